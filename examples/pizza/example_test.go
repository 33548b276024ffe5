package pizza_test

import (
	"context"
	"fmt"

	"github.com/holdline/holdline/examples/pizza"
	"github.com/holdline/holdline/runtime"
)

// The agent driven from Go, with no transport: each Ask returns once the
// agent has nothing left to do, with what it said and the tools it ran.
func Example() {
	kitchen := pizza.NewKitchen(0)
	agent := pizza.NewAgent(kitchen)
	agent.OnEnter = nil // no greeting: the caller speaks first
	sess, err := runtime.New(agent)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sess.Run(ctx)
	for _, line := range []string{"Two pepperoni please", "yes"} {
		reply, err := sess.Ask(ctx, line)
		if err != nil {
			panic(err)
		}
		fmt.Printf("caller: %s\nagent:  %s\n", line, reply.Said)
		for _, c := range reply.Calls {
			fmt.Printf("  %s %s -> %s\n", c.Tool, c.Args, c.State)
		}
	}
	fmt.Println("orders:", kitchen.Orders())
	// Output:
	// caller: Two pepperoni please
	// agent:  2 pepperoni, that's 22.00 euros. Shall I place the order?
	// caller: yes
	// agent:  Placing your order now. Your order PZ1 is in: 2 pepperoni, 22.00 euros. Anything else?
	//   place_order {"pizza":"pepperoni","quantity":2} -> succeeded
	// orders: [{PZ1 pepperoni 2 22}]
}
