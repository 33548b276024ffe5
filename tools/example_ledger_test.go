package tools_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/holdline/holdline/tools"
)

func ExampleLedger() {
	l := tools.NewLedger("session-42")
	request := func(id, args string, epoch uint64) {
		if _, err := l.Request(id, "book_table", json.RawMessage(args), tools.Mutation, tools.Defer, epoch); err != nil {
			log.Fatal(err)
		}
	}

	// The first booking starts, and is given up on at its deadline.
	request("call_1", `{"date":"2025-05-01","party":4}`, 1)
	l.Start("call_1")
	l.Finish("call_1", tools.Outcome{State: tools.StateTimedOut, Output: "error: timed out", IsError: true})

	// The model asks again, with the same arguments in another order: the
	// booking may have happened, so it must not simply run again.
	request("call_2", `{"party": 4, "date": "2025-05-01"}`, 2)
	d, prior := l.Decide("call_2")
	fmt.Println(d, prior.ID)

	// The first body finishes after all. Its terminal state stands, but its
	// late outcome is what really happened, and the repeat reuses it.
	l.Finish("call_1", tools.Outcome{State: tools.StateSucceeded, Output: "booked B-7"})
	d, prior = l.Decide("call_2")
	fmt.Println(d, prior.ID)
	l.Reuse("call_2", prior)

	// Reports may arrive in any order: a cancel and an end before the start.
	request("call_3", `{"date":"2025-05-02","party":2}`, 3)
	l.RequestCancel("call_3")
	l.Finish("call_3", tools.Outcome{State: tools.StateSucceeded, Output: "booked B-8"})
	l.Start("call_3")

	for _, c := range l.Calls() {
		fmt.Printf("%s %s ran=%v output=%q reused_from=%q\n", c.ID, c.State, c.Ran, c.Outcome().Output, c.ReusedFrom)
	}
	// Output:
	// reconcile call_1
	// reuse call_1
	// call_1 timed_out ran=true output="booked B-7" reused_from=""
	// call_2 succeeded ran=false output="booked B-7" reused_from="call_1"
	// call_3 succeeded ran=true output="booked B-8" reused_from=""
}

// A tool built without WithInterruptPolicy gets its policy from its
// effect: a read completes, a mutation waits until its preamble is heard.
func ExampleDefaultPolicy() {
	fmt.Println(tools.Read, tools.DefaultPolicy(tools.Read))
	fmt.Println(tools.Mutation, tools.DefaultPolicy(tools.Mutation))
	p, ok := tools.ParsePolicy("detach")
	fmt.Println(p == tools.Detach, ok)
	// Output:
	// read complete
	// mutation defer
	// true true
}
