package sim

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/holdline/holdline/events"
)

// Replay is what it takes to run one run of a scenario again, exactly: the
// file, the run's seed, and the parameters to fix (its swept value and
// whatever the runs had fixed). Replays with the same seed and settings
// give the same run.
type Replay struct {
	File string
	Seed int64
	// Set holds the swept parameter first, then the others by path.
	Set []Setting
}

// Setting is one parameter fixed at one value.
type Setting struct {
	Param string
	Value time.Duration
}

// String is the holdline simulate command that replays the run. (It can
// only load files whose agent is written inline; simtest writes a go test
// command for a scenario of a Go agent.)
func (p Replay) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "holdline simulate %s --seed %d", p.File, p.Seed)
	for _, s := range p.Set {
		fmt.Fprintf(&b, " --set %s=%v", s.Param, s.Value)
	}
	return b.String()
}

// Replay says how to replay run, one of r's runs.
func (r *Result) Replay(run *Run) Replay {
	p := Replay{File: r.File, Seed: run.Seed}
	if run.Param != "" {
		p.Set = append(p.Set, Setting{run.Param, run.Value})
	}
	for _, param := range slices.Sorted(maps.Keys(r.Set)) {
		if param != run.Param {
			p.Set = append(p.Set, Setting{param, r.Set[param]})
		}
	}
	return p
}

// A ReportOption changes how Report writes.
type ReportOption func(*reportConfig)

type reportConfig struct {
	replay func(Replay) string
}

// WithReplayCommand sets how the failure report writes the command that
// replays the first failing run; Replay.String (holdline simulate) by
// default.
func WithReplayCommand(command func(Replay) string) ReportOption {
	return func(c *reportConfig) { c.replay = command }
}

// reportListed is how many failing runs a report lists one by one.
const reportListed = 10

// Report writes r for a person to read, as holdline simulate prints it.
// A passing file is one line (with its first run's timeline when
// Options.KeepFirst kept it). A failing one lists its failing runs (seed,
// swept value, violations; the first ten), then the event timeline of the
// first, which is where a violation is understood, and the command that
// replays it exactly. It returns the first error writing to w.
func (r *Result) Report(w io.Writer, opts ...ReportOption) error {
	c := reportConfig{replay: Replay.String}
	for _, o := range opts {
		o(&c)
	}
	ew := &errWriter{w: w}
	switch {
	case r.Err != "":
		ew.printf("ERROR %s (%s): %s\n", r.File, r.Name, r.Err)
	case r.OK():
		ew.printf("ok    %s (%s): %d runs\n", r.File, r.Name, r.Runs)
		if r.First != nil {
			writeTimeline(ew, r.First)
		}
	default:
		ew.printf("FAIL  %s (%s): %d of %d runs failed\n", r.File, r.Name, len(r.Failures), r.Runs)
		for i, run := range r.Failures {
			if i == reportListed {
				ew.printf("  ... and %d more failing runs\n", len(r.Failures)-reportListed)
				break
			}
			ew.printf("  run seed=%d%s\n", run.Seed, swept(run))
			for _, v := range run.Violations {
				ew.printf("    - %s\n", v)
			}
		}
		first := r.Failures[0]
		writeTimeline(ew, first)
		ew.printf("  replay: %s\n", c.replay(r.Replay(first)))
	}
	return ew.err
}

// errWriter keeps the first write error and skips the writes after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func writeTimeline(w *errWriter, run *Run) {
	w.printf("  timeline of seed=%d%s:\n", run.Seed, swept(run))
	for _, e := range run.Events {
		w.printf("    %s\n", timelineLine(e))
	}
}

func swept(r *Run) string {
	if r.Param == "" {
		return ""
	}
	return fmt.Sprintf(" %s=%v", r.Param, r.Value)
}

// timelineLine writes one event as a timeline shows it: its time, its
// turn, its kind and whichever of its call, tool, state, reason, provider,
// text and error it has.
func timelineLine(e events.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%9s  e%-2d %s", e.At.Round(time.Microsecond), e.Epoch, e.Kind)
	for _, f := range [][2]string{{"call", e.CallID}, {"tool", e.Tool}, {"state", e.State}, {"reason", e.Reason}, {"provider", e.Provider}} {
		if f[1] != "" {
			fmt.Fprintf(&b, " %s=%s", f[0], f[1])
		}
	}
	if e.Text != "" {
		fmt.Fprintf(&b, " %q", e.Text)
	}
	if e.Error != "" {
		fmt.Fprintf(&b, " error=%q", e.Error)
	}
	return b.String()
}
