package tools_test

import (
	"context"
	"fmt"
	"math"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

type tableArgs struct {
	Party int `json:"party"`
}

// What each interrupt policy does to a call when the caller cuts in: the
// agent says "Sure, let me book that for you right away." and calls
// book_table, and the caller says "Wait!" at once.
//
// Complete and Detach let the booking run to the end: the model is told
// the call is still running when it answers "Wait!", and gets the real
// result in a request of its own once it lands. (Without an interruption
// they differ: a Complete call holds its turn until the result is in, a
// Detach call does not.) Cancel cancels the call's context. Defer never
// starts the call, because its preamble was not heard to the end. Either
// way the model is told exactly what happened.
func ExamplePolicy() {
	for _, p := range []tools.Policy{tools.Complete, tools.Cancel, tools.Defer, tools.Detach} {
		fmt.Println(interrupt(p))
	}
	// Output:
	// complete: the body finished; succeeded; result "booked B-7"; 3 model requests
	// cancel: the body was cancelled; cancelled (cancelled); result "cancelled: the user interrupted and the call stopped before it completed"; 2 model requests
	// defer: the body never ran; cancelled (not_executed); result "not executed: the user interrupted before this call started, so nothing was done"; 2 model requests
	// detach: the body finished; succeeded; result "booked B-7"; 3 model requests
}

// interrupt runs one session whose booking tool has policy p, interrupts
// the turn that called it, and says what became of the call.
func interrupt(p tools.Policy) string {
	running := make(chan struct{}) // closed when the booking's body starts
	release := make(chan struct{}) // lets the booking finish
	body := make(chan string, 1)   // how the body ended
	book := tools.MustNew("book_table", "Book a table.",
		func(ctx context.Context, a tableArgs) (string, error) {
			close(running)
			select {
			case <-release:
			case <-ctx.Done():
			}
			// A cancel comes before the release (the caller's "Wait!"
			// cancels the call in the step that asks the model about it),
			// but both may be ready by the time the body looks.
			if err := ctx.Err(); err != nil {
				body <- "the body was cancelled"
				return "", err
			}
			body <- "the body finished"
			return "booked B-7", nil
		},
		tools.WithEffect(tools.Mutation),
		tools.WithInterruptPolicy(p),
	)

	// The model asks for the booking, and answers anything else briefly.
	model := scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		items := req.Context.Items
		if last := items[len(items)-1]; last.Text == "Book a table for two." {
			return scripted.Response{Text: "Sure, let me book that for you right away.",
				ToolCalls:       []scripted.Call{{ID: "c1", Name: "book_table", Args: tableArgs{Party: 2}}},
				TokensPerSecond: math.Inf(1)}
		}
		return scripted.Response{Text: "Okay.", TokensPerSecond: math.Inf(1)}
	})
	voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(10))
	if err != nil {
		return err.Error()
	}
	agent := &runtime.Agent{Name: "host", Model: model, TTS: voice, Tools: []*tools.Tool{book}}
	discard := media.SinkFunc(func(media.Frame) error { return nil }) // the caller's speaker
	s, err := runtime.New(agent, runtime.WithOutput(discard, media.Rate16k), runtime.WithID("example"))
	if err != nil {
		return err.Error()
	}
	sub := s.Subscribe(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	_ = s.Inject(ctx, "Book a table for two.")
	var outcome string
	interrupted := false
	for e := range sub.C() {
		switch {
		case !interrupted && (e.Kind == events.ToolStarted || e.Kind == events.ToolDeferred):
			// The call is under way, or waiting for its preamble to be
			// heard: the caller cuts in.
			if e.Kind == events.ToolStarted {
				<-running
			}
			interrupted = true
			_ = s.Inject(ctx, "Wait!")
		case e.Kind == events.InferenceSent && e.Epoch == 2:
			// The model has been asked about "Wait!": let a booking
			// that is still running finish.
			close(release)
		case e.Kind == events.ToolTerminal:
			outcome = e.State
			if e.Reason != "" {
				outcome += " (" + e.Reason + ")"
			}
		}
		if e.Kind == events.Idle && outcome != "" {
			break
		}
	}
	cc, err := s.ChatContext(ctx)
	if err != nil {
		return err.Error()
	}
	var result string
	for _, it := range cc.Items {
		if it.Kind == llm.KindToolResult {
			result = it.Output
		}
	}
	ran := "the body never ran"
	select {
	case ran = <-body:
	default:
	}
	return fmt.Sprintf("%s: %s; %s; result %q; %d model requests", p, ran, outcome, result, len(model.Requests()))
}
