package llm_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/tools"
)

func ExampleCallAccumulator() {
	// Two calls streamed interleaved, as chat-completion APIs do.
	deltas := []llm.ToolCallDelta{
		{Index: 1, ID: "call_b", Name: "get_time"},
		{Index: 0, ID: "call_a", Name: "get_weather", Arguments: `{"city":`},
		{Index: 0, Arguments: `"Paris"}`},
	}
	var acc llm.CallAccumulator
	for _, d := range deltas {
		acc.Add(d)
	}
	for _, c := range acc.Calls() {
		fmt.Println(c.ID, c.Name, string(c.Arguments))
	}
	// Output:
	// call_a get_weather {"city":"Paris"}
	// call_b get_time {}
}

// bakery is a hand-written model: no network, no weights, a few rules. It
// greets, looks the opening hours up when asked, and speaks the result.
type bakery struct {
	mu   sync.Mutex
	seen []string // each request's reason and new items, for the example's output
}

func (m *bakery) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	m.mu.Lock()
	m.seen = append(m.seen, fmt.Sprintf("%s: %d of %d items new", req.Reason, len(req.NewItems()), len(req.Context.Items)))
	m.mu.Unlock()

	var a answer
	switch req.Reason {
	case llm.ReasonGreeting:
		a.say("Hello, this is the bakery. How can I help?")
	case llm.ReasonFollowUp, llm.ReasonToolResult:
		// The results of our calls are among the new items, next to
		// the calls; a provisional one is not a result yet.
		for _, it := range req.NewItems() {
			if it.Kind == llm.KindToolResult && !llm.IsProvisional(it.Output) {
				a.say("We are open " + it.Output + ".")
			}
		}
	default:
		// Answer the caller's latest turn.
		var heard string
		for _, it := range req.Context.Items {
			if it.Kind == llm.KindMessage && it.Role == llm.RoleUser {
				heard = it.Text
			}
		}
		if day := weekday(heard); day != "" && strings.Contains(heard, "open") {
			a.say("Let me check.")
			a.call("hours-1", "opening_hours", `{"day":"`+day+`"}`)
		} else {
			a.say("I can tell you when we are open.")
		}
	}
	a.ctx = ctx
	return &a, nil
}

func weekday(s string) string {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.Contains(s, d.String()) {
			return d.String()
		}
	}
	return ""
}

// answer streams prepared chunks. A real provider's stream reads the
// network; either way, a cancelled context ends it at once.
type answer struct {
	ctx    context.Context
	chunks []llm.Chunk
}

func (a *answer) say(text string) { a.chunks = append(a.chunks, llm.Chunk{Text: text}) }

func (a *answer) call(id, name, args string) {
	a.chunks = append(a.chunks, llm.Chunk{ToolCall: &llm.ToolCallDelta{ID: id, Name: name, Arguments: args}})
}

func (a *answer) Recv() (llm.Chunk, error) {
	if err := a.ctx.Err(); err != nil {
		return llm.Chunk{}, fmt.Errorf("bakery: %w", err)
	}
	if len(a.chunks) == 0 {
		return llm.Chunk{}, io.EOF
	}
	c := a.chunks[0]
	a.chunks = a.chunks[1:]
	return c, nil
}

func (a *answer) Close() error {
	a.chunks = nil
	return nil
}

type dayArgs struct {
	Day string `json:"day"`
}

// A Model written by hand, the first one an agent has: it greets the
// caller, calls a tool when asked for the opening hours, and speaks the
// tool's result, in a real session (text only: no voice, no ears).
func ExampleModel() {
	hours := tools.MustNew("opening_hours", "Opening hours for a day of the week.",
		func(ctx context.Context, a dayArgs) (string, error) {
			if a.Day == "Sunday" {
				return "from 8 to 1", nil
			}
			return "from 7 to 6", nil
		}, tools.WithEffect(tools.Read))
	model := &bakery{}
	agent := &runtime.Agent{
		Name:  "bakery",
		Model: model,
		Tools: []*tools.Tool{hours},
		OnEnter: func(ctx context.Context, s *runtime.Session) error {
			return s.GenerateReply(ctx, "") // the agent speaks first
		},
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
	idle := func(epoch uint64) {
		for e := range sub.C() {
			if e.Kind == events.Idle && e.Epoch >= epoch {
				return
			}
		}
	}

	idle(1) // the greeting
	_ = s.Inject(ctx, "Are you open on Sunday?")
	idle(3) // the answer, and the follow-up with the tool's result
	cc, _ := s.ChatContext(ctx)
	fmt.Print(cc)
	fmt.Println()
	model.mu.Lock()
	defer model.mu.Unlock()
	for _, r := range model.seen {
		fmt.Println(r)
	}
	// Output:
	// assistant: Hello, this is the bakery. How can I help?
	// user: Are you open on Sunday?
	// assistant: Let me check.
	// tool_call opening_hours {"day":"Sunday"} [hours-1]
	// tool_result opening_hours: from 8 to 1 [hours-1]
	// assistant: We are open from 8 to 1.
	//
	// greeting: 0 of 0 items new
	// user_turn: 2 of 2 items new
	// follow_up: 3 of 5 items new
}
