package runtime_test

import (
	"context"
	"fmt"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

type hoursArgs struct {
	Day string `json:"day" jsonschema:"day of the week"`
}

// The chat context, as the model is shown it: the caller's words, the
// agent's, and every tool call next to its result.
func ExampleSession_ChatContext() {
	hours := tools.MustNew("opening_hours", "Opening hours for a day.",
		func(ctx context.Context, a hoursArgs) (string, error) {
			return "12:00-23:00 on " + a.Day, nil
		}, tools.WithEffect(tools.Read))
	model := scripted.NewLLM(
		scripted.Response{Text: "Let me check.", ToolCalls: []scripted.Call{{Name: "opening_hours", Args: hoursArgs{Day: "Friday"}}}},
		scripted.Response{Text: "We are open from noon to eleven on Friday."},
	)
	agent := &runtime.Agent{
		Name:         "host",
		Instructions: "You answer questions about the restaurant.",
		Tools:        []*tools.Tool{hours},
		Model:        model,
	}
	s, err := runtime.New(agent, runtime.WithID("example"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	_, _ = s.Ask(ctx, "When are you open on Friday?")
	cc, _ := s.ChatContext(ctx)
	fmt.Print(cc)
	// Output:
	// user: When are you open on Friday?
	// assistant: Let me check.
	// tool_call opening_hours {"day":"Friday"} [call_example_1]
	// tool_result opening_hours: 12:00-23:00 on Friday [call_example_1]
	// assistant: We are open from noon to eleven on Friday.
}

// A front desk hands the caller to billing: billing answers from then on,
// with the conversation so far.
func ExampleSession_Handoff() {
	front := &runtime.Agent{Name: "front-desk", Model: scripted.NewLLM(scripted.Response{Text: "Let me put you through to billing."})}
	billing := &runtime.Agent{Name: "billing", Instructions: "You are billing.",
		Model: scripted.NewLLM(scripted.Response{Text: "Billing here: I see the double charge, and I have refunded it."})}
	s, err := runtime.New(front, runtime.WithID("example"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	_, _ = s.Ask(ctx, "I was charged twice.")
	_ = s.Handoff(ctx, billing, runtime.WithContext(runtime.LastTurns(1)))
	_, _ = s.Ask(ctx, "Can you fix it?")
	cc, _ := s.ChatContext(ctx)
	fmt.Print(cc)
	// Output:
	// user: I was charged twice.
	// assistant: Let me put you through to billing.
	// user: Can you fix it?
	// assistant: Billing here: I see the double charge, and I have refunded it.
}

// Ask drives a session turn by turn: it returns once the agent is idle
// again, with what it said, what the caller heard, and the tool calls it
// made.
func ExampleSession_Ask() {
	hours := tools.MustNew("opening_hours", "Opening hours for a day.",
		func(ctx context.Context, a hoursArgs) (string, error) {
			return "12:00-23:00 on " + a.Day, nil
		}, tools.WithEffect(tools.Read))
	agent := &runtime.Agent{
		Name:  "host",
		Tools: []*tools.Tool{hours},
		Model: scripted.NewLLM(
			scripted.Response{Text: "Let me check.", ToolCalls: []scripted.Call{{Name: "opening_hours", Args: hoursArgs{Day: "Friday"}}}},
			scripted.Response{Text: "We are open from noon to eleven on Friday."},
		),
	}
	s, err := runtime.New(agent, runtime.WithID("example"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	r, err := s.Ask(ctx, "When are you open on Friday?")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("said: ", r.Said)
	// A text-only agent (no TTS) is heard as it writes.
	fmt.Println("heard:", r.Heard)
	for _, c := range r.Calls {
		fmt.Println("call: ", c.Tool, string(c.Args), c.State, c.Output)
	}
	// Output:
	// said:  Let me check. We are open from noon to eleven on Friday.
	// heard: Let me check. We are open from noon to eleven on Friday.
	// call:  opening_hours {"day":"Friday"} succeeded 12:00-23:00 on Friday
}

// An agent with the end_call tool hangs up once its goodbye has been
// heard. The transport (here a function) is told to hang up, and Run
// returns.
func ExampleEndCallTool() {
	agent := &runtime.Agent{
		Name:  "host",
		Tools: []*tools.Tool{runtime.EndCallTool()},
		Model: scripted.NewLLM(scripted.Response{Text: "Thanks for calling, goodbye!",
			ToolCalls: []scripted.Call{{Name: runtime.EndCallName, Args: map[string]string{"reason": "the caller said goodbye"}}}}),
	}
	hungUp := make(chan string, 1)
	s, err := runtime.New(agent, runtime.WithID("example"),
		engine.WithHangup(func(reason string) { hungUp <- reason }))
	if err != nil {
		fmt.Println(err)
		return
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background()) }()

	r, err := s.Ask(context.Background(), "That's all, thank you. Bye!")
	fmt.Println("heard:", r.Heard)
	fmt.Println("call: ", r.Calls[0].Tool, r.Calls[0].State)
	fmt.Println("ask:  ", err)
	fmt.Println("run:  ", <-ran)
	fmt.Println("hangup:", <-hungUp)
	// Output:
	// heard: Thanks for calling, goodbye!
	// call:  end_call succeeded
	// ask:   runtime: session closed
	// run:   <nil>
	// hangup: the caller said goodbye
}

// End ends a call from the application: the session stops, its transport
// is told to hang up, and the reason is in the session's last event.
func ExampleSession_End() {
	agent := &runtime.Agent{Name: "host", Model: scripted.NewLLM(scripted.Response{Text: "Hello!"})}
	ended := make(chan events.Event, 1)
	s, err := runtime.New(agent, runtime.WithID("example"),
		runtime.WithEventSink(func(e events.Event) {
			if e.Kind == events.SessionEnded {
				ended <- e
			}
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background()) }()

	ctx := context.Background()
	r, _ := s.Ask(ctx, "Hi")
	fmt.Println(r.Said)
	fmt.Println(s.End(ctx, "the operator closed the chat"))
	fmt.Println(<-ran)
	e := <-ended
	fmt.Println(e.Kind, e.Reason)
	fmt.Println(s.End(ctx, "again"))
	// Output:
	// Hello!
	// <nil>
	// <nil>
	// session_ended the operator closed the chat
	// runtime: session closed
}
