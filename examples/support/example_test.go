package support_test

import (
	"context"
	"fmt"
	"log"

	"github.com/holdline/holdline/examples/support"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
)

// The two desks New wires: the front desk looks the account up, opens a
// ticket in the background (Detach: the conversation goes on while it
// runs) and hands the caller to billing (Session.Handoff); billing
// refunds. Billing is the front desk's peer, so that a call restored after
// a crash comes back as whichever desk had it. Run the front desk with
// runtime.New, or serve it.
func ExampleNew() {
	desk := support.New()
	for _, agent := range []*runtime.Agent{desk.FrontDesk, desk.Billing} {
		for _, t := range agent.Tools {
			fmt.Printf("%s: %s (%s, %s)\n", agent.Name, t.Name(), t.Effect(), t.Policy())
		}
		for _, peer := range agent.Peers {
			fmt.Printf("%s: peer %s\n", agent.Name, peer.Name)
		}
	}
	// Output:
	// front-desk: lookup_account (read, complete)
	// front-desk: open_ticket (read, detach)
	// front-desk: transfer_to_billing (read, complete)
	// front-desk: peer billing
	// billing: lookup_account (read, complete)
	// billing: refund (mutation, defer)
}

// The front desk's demo model reads the conversation and answers as a chat
// model would: words to speak, and the tool calls the caller's problem
// needs.
func ExampleNewFrontDeskDemoModel() {
	m := support.NewFrontDeskDemoModel()
	s, err := m.Stream(context.Background(), llm.Request{
		Instructions: support.FrontDeskInstructions,
		Context: llm.ChatContext{Items: []llm.Item{
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "I was charged twice on account A7."},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	answer, err := llm.ReadAll(s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer.Text)
	for _, c := range answer.Calls {
		fmt.Println(c.Name, string(c.Arguments))
	}
	// Output:
	// Let me look at your account and open a ticket.
	// lookup_account {"account":"A7"}
	// open_ticket {"account":"A7"}
}
