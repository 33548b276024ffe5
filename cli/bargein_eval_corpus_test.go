package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/aec"
	"github.com/holdline/holdline/vad/corpus"
	"github.com/holdline/holdline/vad/eval"
)

// bargeinEval runs the command with args and decodes its JSON, skipping
// the test when espeak-ng, sox or libspeexdsp are missing.
func bargeinEval(t *testing.T, args ...string) []eval.Result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append([]string{"bargein-eval"}, args...), nil, &stdout, &stderr)
	if errors.Is(err, corpus.ErrTools) || errors.Is(err, aec.ErrUnavailable) {
		need.Missing(t, err)
	}
	if err != nil {
		t.Fatalf("bargein-eval %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var res []eval.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("bargein-eval %s: output is not a JSON array of results: %v\n%s", strings.Join(args, " "), err, stdout.String())
	}
	return res
}

// TestBargeInEvalCorpusReadsBackExport exports a quarter of the
// synthesised corpus, evaluates the export with --corpus, and checks every
// figure against the same clips evaluated in memory as recordings
// (--open-loop): the files, the manifest and the loading must lose
// nothing. At 8 kHz and with energy alone, to keep it short under -race.
func TestBargeInEvalCorpusReadsBackExport(t *testing.T) {
	dir := t.TempDir()
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"bargein-eval", "--export", dir, "--small", "--rate", "8000"}, nil, &stdout, &stdout)
	if errors.Is(err, corpus.ErrTools) {
		need.Missing(t, err)
	}
	if err != nil {
		t.Fatalf("--export: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "wrote 68 clips") {
		t.Errorf("--export printed %q, want the count of clips written", stdout.String())
	}

	reloaded := bargeinEval(t, "--corpus", dir, "--no-transcripts", "--vad", "energy", "--json")
	inMemory := bargeinEval(t, "--small", "--rate", "8000", "--open-loop", "--no-transcripts", "--vad", "energy", "--json")
	if !reflect.DeepEqual(reloaded, inMemory) {
		t.Errorf("figures differ:\nreloaded  %+v\nin memory %+v", reloaded, inMemory)
	}

	// Equal figures prove little if they are empty: the reloaded corpus
	// must be the whole small corpus, and the modes must tell apart what
	// they tell apart on the synthesised one.
	byMode := map[eval.Mode]eval.Result{}
	for _, r := range reloaded {
		byMode[r.Mode] = r
		if r.Rate != 8000 || r.Clips != 68 || r.EchoClips != 34 || r.BargeIns != 24 || r.Backchannels != 10 {
			t.Errorf("%s: %d clips at %d Hz (%d echo, %d barge-ins, %d backchannels), want the small corpus's 68 at 8000",
				r.Mode, r.Clips, r.Rate, r.EchoClips, r.BargeIns, r.Backchannels)
		}
	}
	if len(byMode) != len(eval.Modes) {
		t.Fatalf("modes %v, want %v", reloaded, eval.Modes)
	}
	if none := byMode[eval.None]; none.FalseBargeInRate != 1 {
		t.Errorf("none: false barge-in rate %v, want the recorded echo to fool plain voice activity every time", none.FalseBargeInRate)
	}
	full := byMode[eval.Full]
	if full.FalseBargeInRate != 0 || full.MissRate > 0.1 || full.DetectP50 <= 0 {
		t.Errorf("full: false barge-in rate %v, miss rate %v, detection p50 %v ms; want 0, at most 0.1, above 0",
			full.FalseBargeInRate, full.MissRate, full.DetectP50)
	}
}

// writeWAV writes x as a mono WAV file under dir, making directories.
func writeWAV(t *testing.T, dir, name string, x []int16, rate int) {
	t.Helper()
	var b bytes.Buffer
	if err := media.WriteWAV(&b, x, rate); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBargeInEvalCorpusErrors checks that bad input to --corpus is an error
// that says what is wrong, before any audio is evaluated.
func TestBargeInEvalCorpusErrors(t *testing.T) {
	audio := make([]int16, 16000)
	for i := range audio {
		audio[i] = int16(i%200*50 - 5000)
	}
	corpusDir := func(t *testing.T, manifest string) string {
		dir := t.TempDir()
		writeWAV(t, dir, "c1/mic.wav", audio, 16000)
		writeWAV(t, dir, "c1/ref.wav", audio, 16000)
		if manifest != "" {
			if err := os.WriteFile(filepath.Join(dir, corpus.ManifestName), []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	good := `{"version": 1, "clips": [{"id": "one", "kind": "barge_in", "mic": "c1/mic.wav", "reference": "c1/ref.wav", "onset_ms": 300}]}`
	for _, tc := range []struct {
		name     string
		manifest string
		args     []string
		want     []string
	}{
		{"missing WAV", `{"version": 1, "clips": [{"id": "one", "kind": "barge_in", "mic": "c2/mic.wav", "reference": "c1/ref.wav", "onset_ms": 300}]}`,
			[]string{"--no-transcripts"}, []string{corpus.ManifestName, `clip 1 ("one")`, "mic c2/mic.wav does not exist"}},
		{"bad kind", `{"version": 1, "clips": [{"id": "one", "kind": "interruption", "mic": "c1/mic.wav", "reference": "c1/ref.wav", "onset_ms": 300}]}`,
			[]string{"--no-transcripts"}, []string{`clip 1 ("one")`, `unknown kind "interruption"`}},
		{"no manifest", "", []string{"--no-transcripts"}, []string{corpus.ManifestName, "no such file"}},
		{"no texts for the transcript check", good, nil, []string{`clip "one" has no agent_text`, "caller_text", "--no-transcripts"}},
		{"rate with a corpus", good, []string{"--rate", "8000"}, []string{"--rate does not go with --corpus"}},
		{"open loop with a corpus", good, []string{"--open-loop"}, []string{"--open-loop does not go with --corpus"}},
		{"a stray argument", good, []string{"extra"}, []string{`unexpected argument "extra"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := corpusDir(t, tc.manifest)
			var stdout, stderr bytes.Buffer
			args := append([]string{"bargein-eval", "--corpus", dir}, tc.args...)
			err := run(context.Background(), args, nil, &stdout, &stderr)
			if err == nil {
				t.Fatalf("no error; printed\n%s", stdout.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestBargeInEvalTableDashesWhatWasNotMeasured: a corpus without
// barge-ins, or without echo at -3 dB, prints "–" there, not a 0 that
// reads as a result.
func TestBargeInEvalTableDashesWhatWasNotMeasured(t *testing.T) {
	scenes := []eval.Scene{{Kind: eval.Echo, GainDB: -12}, {Kind: eval.Backchannel}}
	results := []eval.Result{{
		Mode: eval.Full, VAD: "energy", Clips: 2, EchoClips: 1, Backchannels: 1,
		FalseBargeInRate: 0.25, BackchannelRate: 0.5, PauseRate: 1,
		FalseBargeInByGain: map[string]float64{"-12": 0.25},
	}}
	var out bytes.Buffer
	if err := printTable(&out, scenes, results); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("table:\n%s", out.String())
	}
	got := strings.Fields(lines[1])
	want := []string{"energy", "full", "25.0%", "–", "–", "–", "–", "50.0%", "–", "100.0%"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("row %q, want %q", got, want)
	}
}
