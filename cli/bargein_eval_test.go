package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/media/aec"
	"github.com/holdline/holdline/vad/corpus"
)

// TestBargeInEvalTriedAsANewUserWould runs the command as the README shows
// it, on a quarter of the corpus, and checks the JSON a user would script
// against: every mode, the documented keys, and the whole pipeline
// keeping the agent from interrupting itself on its echo.
func TestBargeInEvalTriedAsANewUserWould(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"bargein-eval", "--small", "--no-transcripts", "--vad", "energy", "--json"}, nil, &stdout, &stderr)
	if errors.Is(err, corpus.ErrTools) || errors.Is(err, aec.ErrUnavailable) {
		need.Missing(t, err)
	}
	if err != nil {
		t.Fatalf("bargein-eval: %v\n%s", err, stderr.String())
	}
	var rows []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, stdout.String())
	}
	byMode := map[string]map[string]any{}
	for _, r := range rows {
		for _, k := range []string{"mode", "clips", "false_barge_in_rate", "miss_rate", "detect_p50_ms", "detect_p95_ms"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v lacks %q", r["mode"], k)
			}
		}
		byMode[r["mode"].(string)] = r
	}
	for _, m := range []string{"none", "gating", "aec", "full", "full_cold"} {
		if byMode[m] == nil {
			t.Errorf("no row for mode %s", m)
		}
	}
	full := byMode["full"]
	if full == nil {
		return
	}
	if full["false_barge_in_rate"].(float64) != 0 || byMode["none"]["false_barge_in_rate"].(float64) < 0.5 {
		t.Errorf("false barge-in rate: none %v, full %v; want the echo to fool plain VAD and not the full pipeline",
			byMode["none"]["false_barge_in_rate"], full["false_barge_in_rate"])
	}
	if miss := full["miss_rate"].(float64); miss > 0.1 {
		t.Errorf("full: miss rate %v, want at most 0.1 on the small corpus", miss)
	}
}
