package sim

import (
	"fmt"
	"maps"
	"time"
)

// Options says how to run a scenario file.
type Options struct {
	// Sweep is the number of runs. With a `sweep` in the file, the swept
	// parameter takes Sweep values evenly spaced from `from` to `to`;
	// without one, the runs differ only by seed. 0 means one run of the
	// file as written.
	Sweep int
	// Seed, when set, replaces the file's seed. Run i uses seed+i.
	Seed *int64
	// Set fixes parameters before the runs (for replaying a failing run:
	// its seed and swept value).
	Set map[string]time.Duration
	// KeepFirst keeps the first run in Result.First, passing or not, so its
	// timeline can be read.
	KeepFirst bool
	// Speculate, when set, turns speculative answers on or off in every
	// run, whatever the file's `speculate` says. A file made to run
	// otherwise than it says is checked against the invariants only: its
	// expectations were written for its own timing.
	Speculate *bool
}

// Speculation counts, over a file's runs, the caller's spoken turns and
// the speculative answers asked for them.
type Speculation struct {
	// Turns are the caller's spoken turns; Used of them were answered by
	// a speculative answer, asked Won sooner in all than the turn ended.
	Turns int           `json:"turns"`
	Used  int           `json:"used"`
	Won   time.Duration `json:"won_ns"`
	// Discarded speculative answers were dropped because the caller went
	// on; EarlyBodies is how many tool bodies started for them (reads
	// declared tools.WithSpeculative: nothing else may start).
	Discarded   int `json:"discarded"`
	EarlyBodies int `json:"early_bodies"`
}

// Add adds o's counts to s.
func (s *Speculation) Add(o Speculation) {
	s.Turns += o.Turns
	s.Used += o.Used
	s.Won += o.Won
	s.Discarded += o.Discarded
	s.EarlyBodies += o.EarlyBodies
}

// HitRate is the share of spoken turns answered speculatively.
func (s Speculation) HitRate() float64 {
	if s.Turns == 0 {
		return 0
	}
	return float64(s.Used) / float64(s.Turns)
}

// Result is every run of one scenario file.
type Result struct {
	File     string `json:"file"`
	Name     string `json:"name"`
	Runs     int    `json:"runs"`
	Failures []*Run `json:"failures,omitempty"`
	// First is the first run, kept when Options.KeepFirst is set.
	First *Run `json:"first,omitempty"`
	// Err is set when the scenario could not be run at all.
	Err string `json:"error,omitempty"`
	// Set is Options.Set, the parameters every run had fixed; a replay
	// fixes them too.
	Set map[string]time.Duration `json:"-"`
	// Speculation counts the speculative answers of all the runs.
	Speculation Speculation `json:"speculation"`
}

// OK reports whether every run passed.
func (r *Result) OK() bool { return r.Err == "" && len(r.Failures) == 0 }

// RunScenario runs sc as opts says and collects the failing runs.
func RunScenario(sc *Scenario, opts Options) *Result {
	res := &Result{File: sc.File, Name: sc.Name, Set: maps.Clone(opts.Set)}
	if sc.realTools != nil && sc.agentFunc != nil && !inBubble(sc.realTools) {
		res.Err = "the scenario runs Go tool bodies (WithRealTools), which need a testing/synctest bubble: " +
			"call RunScenario from synctest.Test, or use simtest.RealTools"
		return res
	}
	base := sc.Clone()
	for param, v := range opts.Set {
		if err := base.Set(param, v); err != nil {
			res.Err = fmt.Sprintf("--set %s: %v", param, err)
			return res
		}
	}
	seed := base.Seed
	if opts.Seed != nil {
		seed = *opts.Seed
	}
	n := max(opts.Sweep, 1)
	sweep := base.Sweep
	if _, fixed := opts.Set[paramOf(sweep)]; fixed || opts.Sweep == 0 {
		sweep = nil
	}
	if opts.Speculate != nil && *opts.Speculate != base.Speculate {
		base.Speculate, base.invariantsOnly = *opts.Speculate, true
	}
	cache := toolCache{}
	sc = base
	for i := range n {
		var value time.Duration
		if sweep != nil {
			value = sweep.From
			if n > 1 {
				value += time.Duration(int64(sweep.To-sweep.From) * int64(i) / int64(n-1))
			}
			sc = base.Clone()
			if err := sc.Set(sweep.Param, value); err != nil {
				res.Err = fmt.Sprintf("sweep %s: %v", sweep.Param, err)
				return res
			}
		}
		run := runOnce(sc, seed+int64(i), cache)
		res.Runs++
		res.Speculation.Add(run.Speculation)
		if sweep != nil {
			run.Param, run.Value = sweep.Param, value
		}
		if i == 0 && opts.KeepFirst {
			res.First = run
		}
		if !run.OK() {
			res.Failures = append(res.Failures, run)
		} else if res.First != run {
			run.Events = nil
		}
	}
	return res
}

func paramOf(s *Sweep) string {
	if s == nil {
		return ""
	}
	return s.Param
}
