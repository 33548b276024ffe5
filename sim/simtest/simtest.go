// Package simtest runs scenario files against Go agents from go test.
//
// A scenario that says `agent: NAME` tests the Go agent given as NAME: its
// instructions and tools (names, schemas, effects, interrupt policies,
// timeouts) come from Go, and the file scripts only what the tools' bodies
// do (see the sim package). Run glob-matches the files, runs each as a
// subtest, swept, and fails a subtest with the simulator's report: the
// violations, the event timeline of the first failing run, and the go test
// command that replays it.
//
//	func TestPizzaScenarios(t *testing.T) {
//		simtest.Run(t, "testdata/*.yaml", map[string]runtime.AgentFunc{"pizza": pizza.New})
//	}
//
// # Real tool bodies
//
// By default every tool the model calls must have a script: a scenario is
// then a pure function of its file and seed, thousands of runs take a
// second, and no body books anything. With RealTools, a tool the file
// does not script runs its Go body instead, on a fresh agent for every
// run. Each subtest then runs in a testing/synctest bubble, whose fake
// clock the simulator keeps in step with its own: a body that sleeps two
// seconds, or waits on a timer, takes two seconds of the call's virtual
// time and none of the test's. The bodies must stay inside the bubble (no
// network, no goroutines of the test outside it), as synctest requires.
//
// # Replaying a failure
//
// A failing subtest ends with a command such as
//
//	go test ./pizza -run '^TestPizzaScenarios$/^order\.yaml$' -args -simtest.seed=12 -simtest.set=user.1.at=1.2s
//
// The -simtest.seed and -simtest.set flags (defined by this package) make
// Run run each matching file once, with that seed and those parameters
// fixed, which is exactly the failing run.
package simtest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/sim"
)

// DefaultRuns is how many times Run runs each file without Runs: along
// the file's sweep when it has one, else with successive seeds.
const DefaultRuns = 50

// The replay flags. They are registered at init, as test flags are, so
// that go test hands them to the test binary.
var (
	replaySeed *int64
	replaySet  = map[string]time.Duration{}
)

func init() {
	flag.Func("simtest.seed", "run each scenario once with this `seed` (replays a failing run)", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		replaySeed = &n
		return nil
	})
	flag.Func("simtest.set", "run each scenario once with `PARAM=DURATION` fixed (repeatable; replays a failing run)", func(s string) error {
		param, val, ok := strings.Cut(s, "=")
		if !ok {
			return fmt.Errorf("want PARAM=DURATION, e.g. user.1.at=1.2s")
		}
		d, err := time.ParseDuration(val)
		if err != nil {
			return fmt.Errorf("%s: %w", param, err)
		}
		replaySet[param] = d
		return nil
	})
}

// An Option changes how Run runs the files.
type Option func(*config)

type config struct {
	runs      int
	realTools bool
}

// Runs sets how many times each file runs (DefaultRuns without it); n <= 1
// runs it once, as written.
func Runs(n int) Option {
	return func(c *config) { c.runs = n }
}

// RealTools runs the Go bodies of the tools a file does not script (see
// sim.WithRealTools), each subtest in a testing/synctest bubble so that the
// bodies' time is the call's virtual time. Tools with a script keep it.
func RealTools() Option {
	return func(c *config) { c.realTools = true }
}

// Run runs every scenario file matching pattern (filepath.Glob, relative
// to the test's package directory) as a subtest named by the file's base
// name, with the Go agents the files may name. A file that does not parse
// fails its subtest with each problem and its line; a file with a failing
// run fails it with the report of sim.Result.Report, whose replay line is
// the go test command that runs that one run again. A pattern that
// matches nothing fails t: a typo must not pass.
func Run(t *testing.T, pattern string, agents map[string]runtime.AgentFunc, opts ...Option) {
	t.Helper()
	c := config{runs: DefaultRuns}
	for _, o := range opts {
		o(&c)
	}
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatalf("simtest: pattern %q: %v", pattern, err)
	}
	if len(files) == 0 {
		t.Fatalf("simtest: no scenario files match %q", pattern)
	}
	parse := []sim.ParseOption{sim.WithAgents(agents)}
	if c.realTools {
		parse = append(parse, sim.WithRealTools(synctest.Wait))
	}
	runOpts := sim.Options{Sweep: c.runs}
	if replaySeed != nil || len(replaySet) > 0 {
		// One run, as holdline simulate --seed --set makes.
		runOpts = sim.Options{Seed: replaySeed, Set: replaySet}
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			sc, err := sim.Load(file, parse...)
			if err != nil {
				t.Fatal(err)
			}
			if c.realTools {
				synctest.Test(t, func(t *testing.T) { check(t, sc, runOpts) })
				return
			}
			check(t, sc, runOpts)
		})
	}
}

// check runs sc and fails t with the report when a run fails.
func check(t *testing.T, sc *sim.Scenario, opts sim.Options) {
	t.Helper()
	res := sim.RunScenario(sc, opts)
	var b strings.Builder
	res.Report(&b, sim.WithReplayCommand(func(p sim.Replay) string { return goTest(t.Name(), p) }))
	if !res.OK() {
		t.Error("\n" + b.String())
		return
	}
	t.Log(strings.TrimSpace(b.String()))
}

// goTest writes the go test command that replays p in the test named test.
func goTest(test string, p sim.Replay) string {
	parts := strings.Split(test, "/")
	for i, part := range parts {
		parts[i] = "^" + regexp.QuoteMeta(part) + "$"
	}
	cmd := fmt.Sprintf("go test %s -run %s -args -simtest.seed=%d", packageDir(), shellQuote(strings.Join(parts, "/")), p.Seed)
	for _, s := range p.Set {
		cmd += fmt.Sprintf(" -simtest.set=%s=%v", s.Param, s.Value)
	}
	return cmd
}

// packageDir is the test's package directory (where go test runs it)
// relative to its module's root, the directory a replay is typed in.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		if filepath.Dir(dir) == dir {
			return "."
		}
	}
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
