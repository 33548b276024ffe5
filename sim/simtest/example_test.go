package simtest_test

import (
	"testing"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/sim/simtest"
)

// A test of a Go agent runs its scenario files, each swept 50 times. A
// file says `agent: pizza` and scripts only the tools' bodies:
//
//	name: wait-stops-the-order
//	agent: pizza
//	tools:
//	  place_order: {duration: 1s, result: {order_id: PZ1}}
//	model:
//	  - text: "Sure, ordering one margherita for you now."
//	    tool_calls: [{name: place_order, args: {pizza: margherita}}]
//	  - text: "Okay, I won't."
//	user:
//	  - {at: 0s, say: "One margherita please."}
//	  - {at: 3s, say: "Wait!"}
//	expect:
//	  tool_runs: {place_order: 0}
//	sweep: {param: user.1.at, from: 2.5s, to: 4.3s}
//
// The second test runs the order's real Go body wherever the file gives
// it no script, in virtual time.
func ExampleRun() {
	agents := map[string]runtime.AgentFunc{"pizza": pizzaAgent}
	testPizza := func(t *testing.T) {
		simtest.Run(t, "testdata/pizza/*.yaml", agents)
	}
	testPizzaBodies := func(t *testing.T) {
		simtest.Run(t, "testdata/real/*.yaml", agents, simtest.RealTools(), simtest.Runs(10))
	}
	// In a _test.go file these are func TestPizza(t *testing.T) and
	// func TestPizzaBodies(t *testing.T); TestRunPizzaScenarios and
	// TestRunRealTools run them.
	_, _ = testPizza, testPizzaBodies
}
