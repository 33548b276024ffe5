package sim_test

import (
	"fmt"

	"github.com/holdline/holdline/sim"
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
