package sim_test

import (
	"context"
	"fmt"
	"os"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/sim"
	"github.com/holdline/holdline/tools"
)

// A caller interrupts the agent's preamble at every moment of it; the
// deferred booking never runs, and every run says so.
func ExampleRunScenario() {
	sc, err := sim.Parse("wait.yaml", []byte(`
name: wait-stops-the-booking
agent:
  tools: [{name: book_table, result: {code: "ABC123"}}]
model:
  - text: "Sure, let me book that for you."
    tool_calls: [{name: book_table, args: {party: 2}}]
  - text: "Okay, I won't."
user:
  - {at: 0s, say: "Book a table for two."}
  - {at: 3s, say: "Wait!"}
expect:
  tool_runs: {book_table: 0}
  final_context_contains: ["not executed"]
sweep: {param: user.1.at, from: 2.5s, to: 5s}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	res := sim.RunScenario(sc, sim.Options{Sweep: 100})
	fmt.Println(res.Runs, "runs,", len(res.Failures), "failed")
	// Output: 100 runs, 0 failed
}

// A file with a mistake is refused with the file, line and key.
func ExampleParse_errors() {
	_, err := sim.Parse("bad.yaml", []byte(`
name: bad
agent:
  tools:
    - {name: book_table, duration: fast}
`))
	fmt.Println(err)
	// Output: bad.yaml:5: agent.tools.0.duration: "fast" is not a duration (want e.g. 400ms or 1.5s)
}

// A scenario names a Go agent; the tools' names, schemas, effects,
// interrupt policies and timeouts come from Go, and the file scripts what
// their bodies do. A script that restates what Go says is refused.
func ExampleWithAgents() {
	place := tools.MustNew("place_order", "Orders a pizza.",
		func(ctx context.Context, a struct {
			Pizza string `json:"pizza"`
		}) (string, error) {
			return "PZ-" + a.Pizza, nil
		})
	agents := map[string]runtime.AgentFunc{"pizza": func(context.Context) (*runtime.Agent, func(), error) {
		return &runtime.Agent{Name: "pizza", Tools: []*tools.Tool{place}}, nil, nil
	}}
	sc, err := sim.Parse("wait.yaml", []byte(`
name: wait-stops-the-order
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
sweep: {param: user.1.at, from: 2.5s, to: 4.3s}
`), sim.WithAgents(agents))
	if err != nil {
		fmt.Println(err)
		return
	}
	t := sc.Agent.Tools[0]
	fmt.Println(t.Name, t.Effect, t.OnInterrupt, t.Timeout)
	res := sim.RunScenario(sc, sim.Options{Sweep: 50})
	fmt.Println(res.Runs, "runs,", len(res.Failures), "failed")

	_, err = sim.Parse("bad.yaml", []byte(`
name: bad
agent: pizza
tools:
  place_order: {effect: read}
  refund: {}
`), sim.WithAgents(agents))
	fmt.Println(err)
	// Output:
	// place_order mutation defer 10s
	// 50 runs, 0 failed
	// bad.yaml:5: tools.place_order.effect: comes from the Go tool (tools.WithEffect), not the script: remove it
	// bad.yaml:6: tools.refund: the Go agent "pizza" has no tool "refund" (its tools: place_order)
}

// A failing file's report: the failing runs and their violations, the
// timeline of the first, and the command that replays it.
func ExampleResult_Report() {
	sc, err := sim.Parse("greeting.yaml", []byte(`
name: greeting
model: [{text: "Hello."}]
user: [{at: 0s, inject: "hi"}]
expect: {final_context_contains: ["Goodbye."]}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	sim.RunScenario(sc, sim.Options{}).Report(os.Stdout)
	// Output:
	// FAIL  greeting.yaml (greeting): 1 of 1 runs failed
	//   run seed=1
	//     - expect.final_context_contains: "Goodbye." is not in the final context
	//   timeline of seed=1:
	//            0s  e0  session_started "greeting"
	//            0s  e0  user_turn reason=injected "hi"
	//            0s  e1  turn_started
	//            0s  e1  inference_sent reason=injected
	//         900ms  e1  playout_done "Hello."
	//         900ms  e1  turn_metrics
	//         900ms  e1  turn_settled
	//         900ms  e1  idle
	//   replay: holdline simulate greeting.yaml --seed 1
}
