package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/holdline/holdline/sim"
)

// errViolations makes the command exit non-zero when a run failed.
var errViolations = errors.New("scenario runs failed")

// setFlags collects repeated --set PARAM=DURATION flags.
type setFlags map[string]time.Duration

func (s setFlags) String() string { return fmt.Sprint(map[string]time.Duration(s)) }

func (s setFlags) Set(v string) error {
	param, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want PARAM=DURATION, e.g. user.1.at=1.2s")
	}
	d, err := time.ParseDuration(val)
	if err != nil {
		return fmt.Errorf("%s: %w", param, err)
	}
	s[param] = d
	return nil
}

func (c *cli) simulateCmd(ctx context.Context, args []string) error {
	stdout, stderr := c.stdout, c.stderr
	fs := c.flagSet("simulate")
	sweep := fs.Int("sweep", 0, "run each file `N` times, sweeping its `sweep` parameter from `from` to `to` (seeds seed..seed+N-1)")
	seed := fs.Int64("seed", 0, "use this seed instead of each file's (run i uses seed+i)")
	asJSON := fs.Bool("json", false, "print the results as a JSON array")
	timeline := fs.Bool("timeline", false, "print the event timeline of each file's first run, passing or not")
	speculate := fs.Bool("speculate", true, "speculative answers on (true) or off (false) in every run, whatever the files say (default: as each file says)")
	schema := fs.Bool("schema", false, "print the JSON Schema (draft 2020-12) of scenario files, for editors, and exit")
	set := setFlags{}
	fs.Var(set, "set", "fix a parameter, `PARAM=DURATION` (repeatable), e.g. user.1.at=1.2s to replay a failing run")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: holdline simulate FILE|DIR... [--sweep N] [--seed S] [--set PARAM=DURATION] [--json] [--timeline]")
		fmt.Fprintln(stderr, "       holdline simulate --schema")
		fs.PrintDefaults()
	}
	// Flags may come after the files, as the usage line shows them.
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if *schema {
		b, err := sim.JSONSchema()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	if len(files) == 0 {
		fs.Usage()
		return errors.New("simulate: no scenario files")
	}
	paths, err := scenarioPaths(files)
	if err != nil {
		return err
	}
	opts := sim.Options{Sweep: *sweep, Set: set, KeepFirst: *timeline}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "seed":
			opts.Seed = seed
		case "speculate":
			opts.Speculate = speculate
		}
	})

	// Load every file first: a bad file is reported with the others, and
	// nothing runs until all are readable.
	scenarios := make([]*sim.Scenario, len(paths))
	var loadErrs []error
	for i, p := range paths {
		sc, err := sim.Load(p, sim.WithAgents(c.agents))
		if err != nil {
			loadErrs = append(loadErrs, err)
			continue
		}
		scenarios[i] = sc
	}
	if len(loadErrs) > 0 {
		return errors.Join(loadErrs...)
	}

	start := time.Now()
	results := make([]*sim.Result, len(scenarios))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, sc := range scenarios {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			results[i] = sim.RunScenario(sc, opts)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	elapsed := time.Since(start)

	total, failed := 0, 0
	var spec sim.Speculation
	for _, r := range results {
		spec.Add(r.Speculation)
		total += r.Runs
		failed += len(r.Failures)
		if r.Err != "" {
			failed++
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		// The replay line names this program, which runs the files'
		// Go agents too.
		replay := sim.WithReplayCommand(func(p sim.Replay) string {
			return c.name + strings.TrimPrefix(p.String(), "holdline")
		})
		for _, r := range results {
			if err := r.Report(stdout, replay); err != nil {
				return err
			}
		}
		rate := float64(total) / max(elapsed.Seconds(), 1e-9)
		fmt.Fprintf(stdout, "\n%d files, %d runs, %d failed (%.0f runs/s)\n", len(results), total, failed, rate)
		if spec.Turns > 0 {
			won := time.Duration(0)
			if spec.Used > 0 {
				won = spec.Won / time.Duration(spec.Used)
			}
			fmt.Fprintf(stdout, "speculation: %d of %d spoken turns answered by a speculative answer (%.1f%%), the model asked %v sooner on average; "+
				"%d discarded when the caller went on, %d tool bodies started for them (reads declared speculative)\n",
				spec.Used, spec.Turns, 100*spec.HitRate(), won.Round(time.Millisecond), spec.Discarded, spec.EarlyBodies)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d", errViolations, failed, total)
	}
	return nil
}

// scenarioPaths expands directories into the .yaml and .yml files in them.
func scenarioPaths(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		info, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, a)
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			return nil, err
		}
		n := len(out)
		for _, e := range entries {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				out = append(out, filepath.Join(a, e.Name()))
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s: no .yaml scenario files", a)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
