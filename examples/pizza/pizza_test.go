package pizza_test

import (
	"testing"

	"github.com/holdline/holdline/examples/pizza"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/sim/simtest"
)

// The scenarios name the Go agent: its tools, effects and interrupt
// policies are this package's, so a change to them that breaks a caller's
// call fails here.
func TestScenarios(t *testing.T) {
	simtest.Run(t, "scenarios/*.yaml", map[string]runtime.AgentFunc{"pizza": pizza.New})
}

// With RealTools the kitchen's own Go code places the order, on the
// scenario's virtual time.
func TestScenariosWithTheRealKitchen(t *testing.T) {
	simtest.Run(t, "testdata/*.yaml", map[string]runtime.AgentFunc{"pizza": pizza.New}, simtest.RealTools(), simtest.Runs(20))
}
