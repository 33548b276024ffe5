package sim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReportOfFailingRuns(t *testing.T) {
	sc := mustParse(t, `
name: runs
agent: {tools: [{name: t, effect: read}]}
model: [{tool_calls: [{name: t}]}, {text: "ok"}]
user: [{at: 0s, inject: "go"}]
expect: {tool_runs: {t: 2}}
sweep: {param: user.0.at, from: 0s, to: 1s}
`)
	res := RunScenario(sc, Options{Sweep: 12, Set: map[string]time.Duration{"vad.onset": 80 * time.Millisecond, "tts.ttfb": 0}})
	var b strings.Builder
	if err := res.Report(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"FAIL  test.yaml (runs): 12 of 12 runs failed\n",
		"  run seed=1 user.0.at=0s\n    - expect.tool_runs: t ran 1 times; want 2\n  run seed=2 user.0.at=90.909",
		"  ... and 2 more failing runs\n",
		"  timeline of seed=1 user.0.at=0s:\n           0s  e0  session_started \"runs\"\n",
		"tool_terminal call=call_sim_1 tool=t state=succeeded\n",
		"  replay: holdline simulate test.yaml --seed 1 --set user.0.at=0s --set tts.ttfb=0s --set vad.onset=80ms\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "  run seed=") != reportListed {
		t.Errorf("report lists %d runs; want %d:\n%s", strings.Count(got, "  run seed="), reportListed, got)
	}

	b.Reset()
	res.Report(&b, WithReplayCommand(func(p Replay) string {
		return "replay " + p.File + " " + p.Set[0].Param
	}))
	if !strings.HasSuffix(b.String(), "  replay: replay test.yaml user.0.at\n") {
		t.Errorf("with a replay command the report ends:\n%s", b.String()[max(0, b.Len()-200):])
	}
}

func TestReportOfPassingAndBrokenFiles(t *testing.T) {
	sc := mustParse(t, bookingScenario)
	var b strings.Builder
	RunScenario(sc, Options{Sweep: 3}).Report(&b)
	if got, want := b.String(), "ok    test.yaml (booking): 3 runs\n"; got != want {
		t.Errorf("report = %q; want %q", got, want)
	}
	b.Reset()
	RunScenario(sc, Options{KeepFirst: true}).Report(&b)
	if !strings.Contains(b.String(), "  timeline of seed=1:\n") || !strings.Contains(b.String(), " idle\n") {
		t.Errorf("a kept first run has no timeline:\n%s", b.String())
	}
	b.Reset()
	RunScenario(sc, Options{Set: map[string]time.Duration{"nope": 0}}).Report(&b)
	if got := b.String(); !strings.HasPrefix(got, "ERROR test.yaml (booking): --set nope: sim: unknown parameter") {
		t.Errorf("report = %q", got)
	}
}

type failingWriter struct{ n int }

var errFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n++; w.n > 2 {
		return 0, errFull
	}
	return len(p), nil
}

func TestReportReturnsTheWriteError(t *testing.T) {
	res := RunScenario(mustParse(t, `
name: fail
user: [{at: 0s, inject: "go"}]
expect: {final_context_contains: ["ABC123"]}
`), Options{})
	w := &failingWriter{}
	if err := res.Report(w); !errors.Is(err, errFull) {
		t.Errorf("Report = %v; want %v", err, errFull)
	}
	if w.n != 3 {
		t.Errorf("%d writes; want none after the one that failed", w.n)
	}
}
