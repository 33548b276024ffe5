package runtime_test

import (
	"context"
	"fmt"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

type hoursArgs struct {
	Day string `json:"day" jsonschema:"day of the week"`
}

// An agent with one read tool, answering typed input. The scripted model
// stands in for a real one; a voice (TTS) and ears (STT) are optional.
func Example() {
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
	sub := s.Subscribe(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	_ = s.Inject(ctx, "When are you open on Friday?")
	for e := range sub.C() {
		if e.Kind == events.Idle && e.Epoch > 0 {
			break
		}
	}
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
// greeting first, with the conversation so far.
func ExampleSession_Handoff() {
	front := &runtime.Agent{Name: "front-desk", Model: scripted.NewLLM(scripted.Response{Text: "Let me put you through to billing."})}
	billing := &runtime.Agent{Name: "billing", Instructions: "You are billing.",
		Model: scripted.NewLLM(scripted.Response{Text: "Billing here: I see the double charge."})}
	s, err := runtime.New(front, runtime.WithID("example"))
	if err != nil {
		fmt.Println(err)
		return
	}
	sub := s.Subscribe(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	idle := func() {
		for e := range sub.C() {
			if e.Kind == events.Handoff {
				fmt.Println(e.Kind, e.Text, e.Reason)
			}
			if e.Kind == events.Idle && e.Epoch > 0 {
				return
			}
		}
	}

	_ = s.Inject(ctx, "I was charged twice.")
	idle()
	_ = s.Handoff(ctx, billing, runtime.WithContext(runtime.LastTurns(1)), runtime.WithGreeting())
	idle()
	cc, _ := s.ChatContext(ctx)
	fmt.Print(cc)
	// Output:
	// handoff front-desk -> billing last_turns
	// user: I was charged twice.
	// assistant: Let me put you through to billing.
	// assistant: Billing here: I see the double charge.
}
