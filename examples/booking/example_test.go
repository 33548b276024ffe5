package booking_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
)

// The agent New builds: its tools act on the restaurant, each with the
// effect and interrupt policy the session goes by. Run it with
// runtime.New, or serve it (package server, package sip, holdline serve
// --agent booking).
func ExampleNew() {
	agent := booking.New(booking.NewRestaurant(8))
	fmt.Println(agent.Name)
	for _, t := range agent.Tools {
		fmt.Println(t.Name(), t.Effect(), t.Policy())
	}
	// Output:
	// booking
	// check_availability read complete
	// book_table mutation defer
	// cancel_booking mutation defer
}

// The tools' bodies on their own: what the model's calls do to the
// reservation book.
func ExampleRestaurant() {
	r := booking.NewRestaurant(4) // four guests per time slot
	set, err := tools.NewSet(r.Tools()...)
	if err != nil {
		log.Fatal(err)
	}
	call := func(name, args string) {
		t, _ := set.Lookup(name)
		out, err := t.Run(context.Background(), json.RawMessage(args))
		if err != nil {
			out = "error: " + err.Error() // goes back to the model
		}
		fmt.Println(name, out)
	}
	call("check_availability", `{"party":4,"time":"19:00"}`)
	call("book_table", `{"party":4,"time":"19:00","name":"Ada"}`)
	call("check_availability", `{"party":2,"time":"19:00"}`)
	call("book_table", `{"party":2,"time":"7pm"}`)
	call("cancel_booking", `{"code":"HB1900401"}`)
	fmt.Println(len(r.Bookings()), "bookings")
	// Output:
	// check_availability {"available":true,"time":"19:00","party":4}
	// book_table {"code":"HB1900401","party":4,"time":"19:00"}
	// check_availability {"available":false,"time":"19:00","party":2,"alternatives":["17:30","18:00","20:30","21:00"]}
	// book_table error: tool "book_table": invalid arguments: time must be HH:MM on a 24-hour clock, got "7pm"
	// cancel_booking {"code":"HB1900401","party":4,"time":"19:00","cancelled":true}
	// 0 bookings
}

// The demo model reads the conversation and answers as a chat model would:
// words to speak, and a tool call once it knows the party and the time.
func ExampleNewDemoModel() {
	m := booking.NewDemoModel()
	s, err := m.Stream(context.Background(), llm.Request{
		Instructions: booking.Instructions,
		Context: llm.ChatContext{Items: []llm.Item{
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Book a table for two at seven"},
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
	// Let me check that for you.
	// check_availability {"party":2,"time":"19:00"}
}
