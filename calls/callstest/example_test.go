package callstest_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/calls/callstest"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

// Testing an agent's transfer on a loopback line, with no phone and no
// network: the caller asks for billing, the model calls the agent's
// transfer tool, and the line is asked to transfer the call and hangs up.
func ExampleDial() {
	transfer := tools.MustNew("transfer_to_billing", "Put the caller through to billing.",
		func(ctx context.Context, _ struct{}) (string, error) {
			if err := runtime.Transfer(ctx, "sip:billing@example.com"); err != nil {
				return "", err
			}
			return "transferred", nil
		})
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		model := scripted.NewLLM(scripted.Response{
			Text:      "Putting you through.",
			ToolCalls: []scripted.Call{{Name: "transfer_to_billing"}},
		})
		return &runtime.Agent{Name: "front-desk", Model: model, Tools: []*tools.Tool{transfer}}, nil, nil
	}
	host, err := calls.New(newAgent)
	if err != nil {
		log.Fatal(err)
	}
	defer host.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := callstest.Dial(ctx, host, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Kind(), c.Running())
	if err := c.Inject(ctx, "Billing, please."); err != nil {
		log.Fatal(err)
	}
	select {
	case <-c.HungUp():
	case <-ctx.Done():
		log.Fatal("the call was never hung up")
	}
	for _, tr := range c.Transfers() {
		fmt.Println("transferred to", tr.Target)
	}
	fmt.Println("hung up:", c.Reason())
	// Output:
	// loopback true
	// transferred to sip:billing@example.com
	// hung up: transferred to sip:billing@example.com
}
