package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// inspectPageNames are the pages the browser test opens, in order.
var inspectPageNames = []string{"bargein", "support", "fixture", "long"}

// inspectPageResult is what test/browser/inspect.mjs prints.
type inspectPageResult struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	Pages []struct {
		File     string              `json:"file"`
		Errors   []string            `json:"errors"`
		Requests []string            `json:"requests"`
		Kinds    []string            `json:"kinds"`
		Seqs     []int               `json:"seqs"`
		FileSeqs []int               `json:"fileSeqs"`
		Lanes    map[string][]string `json:"lanes"`
		Turns    int                 `json:"turnCards"`
		Stages   int                 `json:"stageBars"`
		Summary  string              `json:"breakdownText"`
		Tip      string              `json:"tip"`
		FocusTip string              `json:"focusTip"`
		FocusOf  string              `json:"focusKind"`
		Zoomed   struct {
			Wider bool `json:"wider"`
			Items int  `json:"items"`
		} `json:"zoomed"`
		Screenshot string `json:"screenshot"`
		Width      int    `json:"canvasWidth"`
		Viewport   int    `json:"viewportWidth"`
		RenderMs   int    `json:"renderMs"`
	} `json:"pages"`
}

// In headless Chromium, each page holdline inspect writes shows every
// event of its file, each once, in the DOM (a kind the page does not know
// in the "other" lane), asks nothing of the network, shows an event's
// fields on hover, zooms, and draws the per-turn breakdown where the file
// has turn_metrics. A screenshot of each is kept with the test's
// artifacts (go test -artifacts).
func TestBrowserInspectPageShowsEveryEvent(t *testing.T) {
	node, dir := needChromium(t)
	out := t.ArtifactDir()
	inputs := inspectInputs(t)
	var pages []string
	for _, name := range inspectPageNames {
		page := filepath.Join(out, name+".html")
		inspectFile(t, inputs[name], page)
		pages = append(pages, page)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "inspect.mjs"), out}, pages...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res inspectPageResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		t.Fatalf("inspect.mjs: %v; output %q; log:\n%s", err, stdout.String(), stderr.String())
	}
	if !res.OK {
		t.Fatalf("in the browser: %s", res.Error)
	}
	if len(res.Pages) != len(pages) {
		t.Fatalf("the browser opened %d pages of %d", len(res.Pages), len(pages))
	}
	for i, name := range inspectPageNames {
		p := res.Pages[i]
		t.Run(name, func(t *testing.T) {
			if len(p.Errors) > 0 {
				t.Errorf("errors in the page: %v", p.Errors)
			}
			if len(p.Requests) > 0 {
				t.Errorf("the page asked for %v: not self-contained", p.Requests)
			}
			if want := kindsIn(t, inputs[name]); !slices.Equal(p.Kinds, want) {
				t.Errorf("kinds on the page %v; in the file %v", p.Kinds, want)
			}
			if !slices.Equal(p.Seqs, p.FileSeqs) {
				t.Errorf("events on the page %v; in the file %v: each must be there once", p.Seqs, p.FileSeqs)
			}
			if !strings.Contains(p.Tip, "kind") || !strings.Contains(p.Tip, "at_ns") {
				t.Errorf("hovering an item showed %q; want the event's fields", p.Tip)
			}
			if !strings.Contains(p.FocusTip, p.FocusOf) {
				t.Errorf("focusing a %s item showed %q; want its fields", p.FocusOf, p.FocusTip)
			}
			if !p.Zoomed.Wider || p.Zoomed.Items != len(p.Seqs) {
				t.Errorf("zoomed in: wider %v, %d items of %d", p.Zoomed.Wider, p.Zoomed.Items, len(p.Seqs))
			}
			t.Logf("screenshot %s", p.Screenshot)
		})
	}
	if b := res.Pages[0]; !slices.Contains(b.Lanes["barge"], "barge_in_confirmed") || !slices.Contains(b.Lanes["tools"], "tool_deferred") {
		t.Errorf("the barge-in call's lanes: %v", b.Lanes)
	}
	if s := res.Pages[1]; !slices.Contains(s.Lanes["session"], "handoff") {
		t.Errorf("the support call's lanes: %v", s.Lanes)
	}
	f := res.Pages[2]
	if !slices.Equal(f.Lanes["other"], []string{"speaker_levels"}) {
		t.Errorf("the other lane has %v; want the kind the page does not know", f.Lanes["other"])
	}
	if f.Turns != 2 || f.Stages < 10 || !strings.Contains(f.Summary, "voice-to-voice 1200 ms") || !strings.Contains(f.Summary, "Holdline overhead 6.0 ms") {
		t.Errorf("the breakdown: %d turns, %d stage bars:\n%s", f.Turns, f.Stages, f.Summary)
	}
	// A long call is laid out at a readable scale, wider than the
	// window, and scrolled sideways; every one of its events is there
	// (checked above).
	if l := res.Pages[3]; l.Width <= 2*l.Viewport || l.Turns != 100 || l.RenderMs > 15000 {
		t.Errorf("the long call: canvas %d px in a window of %d, %d turn cards, drawn in %d ms", l.Width, l.Viewport, l.Turns, l.RenderMs)
	}
	// The simulator's turns carry the stages its core knows (no
	// providers run there), and none answers caller speech.
	if b := res.Pages[0]; b.Turns == 0 || !strings.Contains(b.Summary, "no voice-to-voice") {
		t.Errorf("the simulated call: %d turn cards:\n%s", b.Turns, b.Summary)
	}
}
