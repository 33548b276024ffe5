package simtest_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/sim/simtest"
	"github.com/holdline/holdline/tools"
)

type menuArgs struct{}

type orderArgs struct {
	Pizza string `json:"pizza" jsonschema:"the pizza to order"`
}

// pizzaAgent is the Go agent under test: a read that lists the menu, and
// a mutation that places an order in two seconds.
func pizzaAgent(ctx context.Context) (*runtime.Agent, func(), error) {
	menu, err := tools.New("menu", "Lists the pizzas.", func(ctx context.Context, _ menuArgs) ([]string, error) {
		return []string{"margherita", "diavola"}, nil
	}, tools.WithEffect(tools.Read))
	if err != nil {
		return nil, nil, err
	}
	place, err := tools.New("place_order", "Orders a pizza.", func(ctx context.Context, a orderArgs) (map[string]string, error) {
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]string{"order_id": "PZ-" + a.Pizza}, nil
	}, tools.WithTimeout(5*time.Second))
	if err != nil {
		return nil, nil, err
	}
	return &runtime.Agent{Name: "pizza", Instructions: "You take pizza orders.", Tools: []*tools.Tool{menu, place}}, nil, nil
}

var agents = map[string]runtime.AgentFunc{"pizza": pizzaAgent}

func TestRunPizzaScenarios(t *testing.T) {
	simtest.Run(t, "testdata/pizza/*.yaml", agents)
}

func TestRunRealTools(t *testing.T) {
	simtest.Run(t, "testdata/real/*.yaml", agents, simtest.RealTools(), simtest.Runs(10))
}

// TestHelperScenarios is run by the tests below in a child process, where
// failing is what it is for.
func TestHelperScenarios(t *testing.T) {
	pattern := os.Getenv("SIMTEST_HELPER_PATTERN")
	if pattern == "" {
		t.Skip("run by TestRunReportsAFailure")
	}
	simtest.Run(t, pattern, agents, simtest.Runs(20))
}

// helper runs TestHelperScenarios (or the test run names) on pattern in a
// child process and returns its output, which must say it failed.
func helper(t *testing.T, pattern, run string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=" + run}, args...)...)
	cmd.Env = append(os.Environ(), "SIMTEST_HELPER_PATTERN="+pattern)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child test passed:\n%s", out)
	}
	return string(out)
}

// A failing run fails its subtest with the report, and the replay command
// in it runs that run again, alone.
func TestRunReportsAFailure(t *testing.T) {
	out := helper(t, "testdata/failing/*.yaml", "^TestHelperScenarios$")
	for _, want := range []string{
		"--- FAIL: TestHelperScenarios/late.yaml",
		"FAIL  testdata/failing/late.yaml (wait-too-late): ",
		"    - expect.tool_runs: place_order ran 1 times; want 0\n",
		"  timeline of seed=",
		" tool_terminal call=call_sim_1 tool=place_order state=succeeded\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	m := regexp.MustCompile(`replay: go test \./sim/simtest -run '(\^TestHelperScenarios\$/\^late\\\.yaml\$)' -args (-simtest\.seed=(\d+) -simtest\.set=user\.1\.at=(\S+))\n`).
		FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no go test replay command in:\n%s", out)
	}
	replay := helper(t, "testdata/failing/*.yaml", m[1], strings.Fields(m[2])...)
	for _, want := range []string{"(wait-too-late): 1 of 1 runs failed\n", "run seed=" + m[3] + "\n"} {
		if !strings.Contains(replay, want) {
			t.Errorf("the replay lacks %q:\n%s", want, replay)
		}
	}
	if a, b := timeline(out), timeline(replay); a == "" || a != b {
		t.Errorf("the replay's timeline\n%s\ndiffers from the failing run's\n%s", b, a)
	}
}

// timeline returns the events of the first timeline in a report.
func timeline(report string) string {
	_, rest, _ := strings.Cut(report, "timeline of seed=")
	_, rest, _ = strings.Cut(rest, "\n")
	events, _, _ := strings.Cut(rest, "replay:")
	return events
}

// A file that does not fit its agent fails with its line; a pattern that
// matches nothing fails too.
func TestRunReportsABrokenFile(t *testing.T) {
	out := helper(t, "testdata/broken/*.yaml", "^TestHelperScenarios$")
	if want := "testdata/broken/effect.yaml:6: tools.place_order.effect: comes from the Go tool (tools.WithEffect)"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	out = helper(t, "testdata/nothing/*.yaml", "^TestHelperScenarios$")
	if want := `simtest: no scenario files match "testdata/nothing/*.yaml"`; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
