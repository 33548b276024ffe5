package sim

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/tools"
)

type menuArgs struct{}

type orderArgs struct {
	Pizza string `json:"pizza" jsonschema:"the pizza to order"`
}

// pizzaAgent is a Go agent as a user writes one: a read that lists the
// menu and a mutation that places the order, whose body takes two
// seconds. placeOpts change the order tool, as an edit of the agent would.
func pizzaAgent(placeOpts ...tools.Option) runtime.AgentFunc {
	return func(ctx context.Context) (*runtime.Agent, func(), error) {
		menu := tools.MustNew("menu", "Lists the pizzas.", func(ctx context.Context, _ menuArgs) ([]string, error) {
			return []string{"margherita", "diavola"}, nil
		}, tools.WithEffect(tools.Read))
		place := tools.MustNew("place_order", "Orders a pizza.", func(ctx context.Context, a orderArgs) (map[string]string, error) {
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]string{"order_id": "PZ-" + a.Pizza}, nil
		}, append([]tools.Option{tools.WithTimeout(5 * time.Second)}, placeOpts...)...)
		return &runtime.Agent{Name: "pizza", Instructions: "You take pizza orders.", Tools: []*tools.Tool{menu, place}}, nil, nil
	}
}

func pizzaAgents(placeOpts ...tools.Option) ParseOption {
	return WithAgents(map[string]runtime.AgentFunc{"pizza": pizzaAgent(placeOpts...)})
}

// pizzaOrder takes an order after reading the menu; the order's script is
// swept from fast to slow.
const pizzaOrder = `name: pizza-order
agent: pizza
tools:
  menu: {duration: 200ms, result: {pizzas: [margherita, diavola]}}
  place_order: {duration: 2s, result: {order_id: PZ1}}
model:
  - text: "Let me look at the menu."
    tool_calls: [{name: menu}]
  - text: "We have margherita and diavola."
  - text: "One margherita, ordering it now."
    tool_calls: [{name: place_order, args: {pizza: margherita}}]
  - text: "Done, your order is PZ1."
user:
  - {at: 0s, say: "What pizzas do you have?"}
  - {at: 10s, say: "A margherita please."}
expect:
  tool_runs: {menu: 1, place_order: 1}
  final_context_contains: ["PZ1", "margherita"]
  events:
    - {kind: tool_deferred, tool: place_order, count: 1}
sweep: {param: tools.place_order.duration, from: 100ms, to: 4s}
`

// waitStopsTheOrder holds only while placing an order is deferred until
// its preamble has played: the Go tool's default for a mutation.
const waitStopsTheOrder = `name: wait-stops-the-order
agent: pizza
tools:
  place_order: {duration: 1s, result: {order_id: PZ1}}
model:
  - text: "Sure, ordering one margherita for you now."
    tool_calls: [{name: place_order, args: {pizza: margherita}}]
  - text: "Okay, I won't."
user:
  - {at: 0s, say: "One margherita please."}
  - {at: 3s, say: "Wait!"}
expect:
  tool_runs: {place_order: 0}
  final_context_contains: ["not executed"]
sweep: {param: user.1.at, from: 2.5s, to: 4.3s}
`

func TestGoAgentScenarioTakesTheToolsFromGo(t *testing.T) {
	sc, err := Parse("pizza.yaml", []byte(pizzaOrder), pizzaAgents())
	if err != nil {
		t.Fatal(err)
	}
	if sc.Agent.Go != "pizza" || sc.Agent.Instructions != "You take pizza orders." {
		t.Errorf("agent %q with instructions %q", sc.Agent.Go, sc.Agent.Instructions)
	}
	if len(sc.Agent.Tools) != 2 {
		t.Fatalf("tools %+v; want the Go agent's two", sc.Agent.Tools)
	}
	menu, place := sc.Agent.Tools[0], sc.Agent.Tools[1]
	if menu.Name != "menu" || menu.Effect != "read" || menu.OnInterrupt != "complete" || menu.Timeout != tools.DefaultTimeout ||
		menu.Duration != 200*time.Millisecond || string(menu.Result) != `{"pizzas":["margherita","diavola"]}` {
		t.Errorf("menu = %+v", menu)
	}
	if place.Name != "place_order" || place.Effect != "mutation" || place.OnInterrupt != "defer" || place.Timeout != 5*time.Second ||
		!place.Dedupe || place.Duration != 2*time.Second || string(place.Result) != `{"order_id":"PZ1"}` {
		t.Errorf("place_order = %+v", place)
	}
	if got, err := sc.Get("tools.place_order.duration"); err != nil || got != 2*time.Second {
		t.Errorf("Get(tools.place_order.duration) = %v, %v", got, err)
	}
}

func TestGoAgentScenarioSweepPasses(t *testing.T) {
	for _, src := range []string{pizzaOrder, waitStopsTheOrder} {
		sc, err := Parse("pizza.yaml", []byte(src), pizzaAgents())
		if err != nil {
			t.Fatal(err)
		}
		res := RunScenario(sc, Options{Sweep: 50})
		if res.Runs != 50 || !res.OK() {
			var b strings.Builder
			res.Report(&b)
			t.Errorf("%s", b.String())
		}
	}
}

// The point of naming a Go agent: when the agent changes, its scenarios
// see the change. Placing an order that completes when interrupted, instead
// of waiting for its preamble, breaks "wait stops the order"; a schema
// that no longer has the model's argument fails the call.
func TestGoAgentScenarioFollowsTheAgent(t *testing.T) {
	sc, err := Parse("wait.yaml", []byte(waitStopsTheOrder), pizzaAgents(tools.WithInterruptPolicy(tools.Complete)))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Agent.Tools[0].OnInterrupt != "complete" {
		t.Fatalf("on_interrupt %q; want the Go tool's complete", sc.Agent.Tools[0].OnInterrupt)
	}
	res := RunScenario(sc, Options{Sweep: 10})
	if len(res.Failures) == 0 {
		t.Fatal("the scenario still passes with an order that runs at once")
	}
	if v := strings.Join(res.Failures[0].Violations, "\n"); !strings.Contains(v, "place_order ran 1 times; want 0") {
		t.Errorf("violations %q; want place_order's run", v)
	}

	// The Go schema judges the model's arguments: a call the schema refuses
	// never runs.
	sc, err = Parse("args.yaml", []byte(strings.Replace(pizzaOrder, "args: {pizza: margherita}", "args: {size: large}", 1)), pizzaAgents())
	if err != nil {
		t.Fatal(err)
	}
	run := RunOnce(sc, 1)
	if v := strings.Join(run.Violations, "\n"); !strings.Contains(v, "place_order ran 0 times; want 1") {
		t.Errorf("violations %q; want place_order not run: its arguments do not fit the Go schema", v)
	}
}

// A scenario that does not fit its Go agent is refused with the line.
func TestGoAgentScenarioErrors(t *testing.T) {
	failing := WithAgents(map[string]runtime.AgentFunc{"broken": func(context.Context) (*runtime.Agent, func(), error) {
		return nil, nil, errors.New("no API key")
	}})
	cases := []struct {
		name string
		opts []ParseOption
		src  string
		want string
	}{
		{"a script for a tool the agent lacks", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
tools:
  menu: {}
  refund: {result: {ok: true}}
`, `x.yaml:5: tools.refund: the Go agent "pizza" has no tool "refund" (its tools: menu, place_order)`},
		{"a call to a tool without a script", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
tools: {menu: {}}
model:
  - text: "Ordering."
    tool_calls:
      - {name: menu}
      - {name: place_order, args: {pizza: diavola}}
`, `x.yaml:8: model.0.tool_calls.1.name: the model calls the Go tool "place_order", which has no script`},
		{"an effect restated", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
tools:
  place_order:
    duration: 1s
    effect: read
`, `x.yaml:6: tools.place_order.effect: comes from the Go tool (tools.WithEffect), not the script: remove it`},
		{"a policy restated", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
tools:
  place_order: {on_interrupt: cancel}
`, `x.yaml:4: tools.place_order.on_interrupt: comes from the Go tool (tools.WithInterruptPolicy)`},
		{"a timeout restated", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
tools:
  menu:
  place_order: {timeout: 3s}
`, `x.yaml:5: tools.place_order.timeout: comes from the Go tool (tools.WithTimeout)`},
		{"an unknown agent", []ParseOption{pizzaAgents()}, `name: x
agent: pasta
`, `x.yaml:2: agent: no Go agent "pasta" (given: pizza)`},
		{"no agents given", nil, `name: x
agent: pizza
`, `x.yaml:2: agent: names the Go agent "pizza", but none were given`},
		{"an agent that fails", []ParseOption{failing}, `name: x
agent: broken
`, `x.yaml:2: agent: Go agent "broken": no API key`},
		{"scripts for an inline agent", nil, `name: x
agent: {tools: [{name: menu}]}
tools: {menu: {}}
`, `x.yaml:3: tools: scripts the tools of a Go agent (agent: NAME)`},
		{"an expectation on a tool the agent lacks", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
expect:
  tool_runs: {refund: 0}
`, `x.yaml:4: expect.tool_runs.refund: the Go agent "pizza" has no tool "refund"`},
		{"a bad script value", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
tools:
  menu: {duration: soon}
`, `x.yaml:4: tools.menu.duration: "soon" is not a duration`},
		{"a sweep of an unscripted tool", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
tools: {menu: {}}
sweep: {param: tools.place_order.duration, from: 0s, to: 1s}
`, `x.yaml:4: sweep.param: parameter "tools.place_order.duration": tool "place_order" has no script in tools`},
		{"a sweep of a Go timeout", []ParseOption{pizzaAgents()}, `name: x
agent: pizza
sweep: {param: agent.tools.1.timeout, from: 1s, to: 2s}
`, `whose timeouts come from Go`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tc.src), tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v\nwant one containing %q", err, tc.want)
			}
			var pe *ParseError
			if err != nil && (!errors.As(err, &pe) || pe.Line == 0) {
				t.Errorf("error %v has no ParseError with a line", err)
			}
		})
	}
}

// Under WithRealTools a tool without a script runs its Go body, on the
// bubble's clock kept in step with the run's: the order's two-second body
// takes two virtual seconds, and its own result reaches the model.
func TestGoAgentRealToolBodies(t *testing.T) {
	const src = `name: real-order
agent: pizza
tools:
  menu: {result: {pizzas: [scripted]}}
model:
  - text: "Ordering it."
    tool_calls: [{name: menu}, {name: place_order, args: {pizza: margherita}}]
  - text: "Done."
user:
  - {at: 0s, inject: "One margherita."}
expect:
  tool_runs: {menu: 1, place_order: 1}
  final_context_contains: ["PZ-margherita", "scripted"]
  events:
    - {kind: tool_terminal, tool: place_order, state: succeeded, count: 1}
`
	if _, err := Parse("real.yaml", []byte(src), pizzaAgents()); err == nil {
		t.Fatal("without WithRealTools a call to an unscripted tool was accepted")
	}
	sc, err := Parse("real.yaml", []byte(src), pizzaAgents(), WithRealTools(synctest.Wait))
	if err != nil {
		t.Fatal(err)
	}
	if res := RunScenario(sc, Options{Sweep: 2}); !strings.Contains(res.Err, "synctest bubble") {
		t.Errorf("outside a bubble: Err %q; want it refused", res.Err)
	}
	synctest.Test(t, func(t *testing.T) {
		res := RunScenario(sc, Options{Sweep: 5, KeepFirst: true})
		if !res.OK() || res.Runs != 5 {
			var b strings.Builder
			res.Report(&b)
			t.Fatal(b.String())
		}
		var started, ended time.Duration
		for _, e := range res.First.Events {
			switch {
			case e.Kind == events.ToolStarted && e.Tool == "place_order":
				started = e.At
			case e.Kind == events.ToolTerminal && e.Tool == "place_order":
				ended = e.At
			}
		}
		if ended-started != 2*time.Second {
			t.Errorf("place_order ran from %v to %v; want its body's two seconds", started, ended)
		}
		if again := RunOnce(sc, res.First.Seed); !reflect.DeepEqual(again.Events, res.First.Events) {
			t.Errorf("a replay of seed %d differs from the run", res.First.Seed)
		}
	})
}

// A real body honours the interrupt policy through its context: with the
// cancel policy, "wait!" during the order cancels it, and the body's
// return says so.
func TestGoAgentRealToolCancelled(t *testing.T) {
	const src = `name: real-cancel
agent: pizza
model:
  - text: "Ordering one margherita for you now, this takes a moment."
    tool_calls: [{name: place_order, args: {pizza: margherita}}]
  - text: "Okay, cancelled."
user:
  - {at: 0s, inject: "One margherita."}
  - {at: 1.2s, say: "No wait, stop."}
expect:
  tool_runs: {place_order: 1}
  events:
    - {kind: tool_terminal, tool: place_order, state: cancelled, count: 1}
`
	sc, err := Parse("cancel.yaml", []byte(src), pizzaAgents(tools.WithInterruptPolicy(tools.Cancel)), WithRealTools(synctest.Wait))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		res := RunScenario(sc, Options{Sweep: 3})
		if !res.OK() {
			var b strings.Builder
			res.Report(&b)
			t.Fatal(b.String())
		}
	})
}

// The Go-agent scenario in the README's simulator section runs and passes,
// swept, against a Go agent written as its text describes.
func TestReadmeGoAgentScenario(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "### Scenarios for Go agents")
	if !ok {
		t.Fatal("the README has no section on Go agents")
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("the section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	sc, err := Parse("README.md", []byte(block), pizzaAgents())
	if err != nil {
		t.Fatal(err)
	}
	if res := RunScenario(sc, Options{Sweep: 100}); !res.OK() {
		var b strings.Builder
		res.Report(&b)
		t.Fatal(b.String())
	}
}

func TestGoAgentParameters(t *testing.T) {
	sc, err := Parse("pizza.yaml", []byte(pizzaOrder), pizzaAgents())
	if err != nil {
		t.Fatal(err)
	}
	c := sc.Clone()
	if err := c.Set("tools.place_order.duration", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if sc.Agent.Tools[1].Duration != 2*time.Second || c.Agent.Tools[1].Duration != 3*time.Second {
		t.Errorf("durations %v and %v; want the clone's set alone", sc.Agent.Tools[1].Duration, c.Agent.Tools[1].Duration)
	}
	// The body's three seconds show between its start and its end.
	run := RunOnce(c, 1)
	var started, ended time.Duration
	for _, e := range run.Events {
		switch {
		case e.Kind == events.ToolStarted && e.Tool == "place_order":
			started = e.At
		case e.Kind == events.ToolTerminal && e.Tool == "place_order":
			ended = e.At
		}
	}
	if !run.OK() || ended-started != 3*time.Second {
		t.Errorf("place_order ran %v (violations %v); want the 3s set", ended-started, run.Violations)
	}
	for param, want := range map[string]string{
		"tools.place_order.timeout":  "a script's parameter is tools.NAME.duration",
		"tools.refund.duration":      `the Go agent "pizza" has no tool "refund"`,
		"agent.tools.0.duration":     "a script's duration is tools.NAME.duration",
		"agent.tools.1.timeout":      "whose timeouts come from Go",
		"tools.place_order.duration": "",
	} {
		err := sc.Set(param, time.Second)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Set(%s) = %v; want %q", param, err, want)
		}
	}
	inline := mustParse(t, bookingScenario)
	if err := inline.Set("tools.book_table.duration", time.Second); err == nil || !strings.Contains(err.Error(), "written inline") {
		t.Errorf("Set(tools.NAME.duration) on an inline agent = %v", err)
	}
}

// A real body sees its turn as a live one does: a tool that waits for its
// preamble to play out (tools.WaitPlayout) returns the instant it has.
func TestGoAgentRealToolWaitsForPlayout(t *testing.T) {
	type noArgs struct{}
	transfer := tools.MustNew("transfer", "Transfers the call.", func(ctx context.Context, _ noArgs) (string, error) {
		if err := tools.WaitPlayout(ctx); err != nil {
			return "", err
		}
		return "transferred", nil
	}, tools.WithEffect(tools.Read))
	agents := WithAgents(map[string]runtime.AgentFunc{"desk": func(context.Context) (*runtime.Agent, func(), error) {
		return &runtime.Agent{Name: "desk", Tools: []*tools.Tool{transfer}}, nil, nil
	}})
	sc, err := Parse("transfer.yaml", []byte(`name: transfer
agent: desk
model:
  - text: "Let me put you through to a colleague."
    tool_calls: [{name: transfer}]
  - text: "Done."
user:
  - {at: 0s, inject: "A human, please."}
expect:
  final_context_contains: ["transferred"]
`), agents, WithRealTools(synctest.Wait))
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		run := RunOnce(sc, 1)
		if !run.OK() {
			t.Fatal(run.Violations)
		}
		var played, ended time.Duration
		for _, e := range run.Events {
			switch {
			case e.Kind == events.PlayoutDone && e.Epoch == 1:
				played = e.At
			case e.Kind == events.ToolTerminal:
				ended = e.At
			}
		}
		if played == 0 || ended != played {
			t.Errorf("the transfer ended at %v; want when its preamble had played, %v", ended, played)
		}
	})
}
