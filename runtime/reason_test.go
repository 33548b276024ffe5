package runtime

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

// checkRequest fails t unless req went out for reason with the new items
// starting at index new.
func checkRequest(t *testing.T, name string, req llm.Request, reason llm.Reason, new int) {
	t.Helper()
	if req.Reason != reason || req.New != new {
		t.Errorf("%s: reason %s, new %d; want %s, %d; context:\n%s", name, req.Reason, req.New, reason, new, numbered(req))
	}
}

// numbered renders a request's context with item indexes and New marked.
func numbered(req llm.Request) string {
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(req.Context.String(), "\n"), "\n") {
		mark := "  "
		if i == req.New {
			mark = "> "
		}
		fmt.Fprintf(&b, "%s%d %s\n", mark, i, line)
	}
	return b.String()
}

// requests waits until model has had n requests and returns them.
func requests(t *testing.T, model *scripted.LLM, n int) []llm.Request {
	t.Helper()
	for range 2000 {
		synctest.Wait()
		if reqs := model.Requests(); len(reqs) >= n {
			return reqs
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the model had %d requests within 20 s; want %d", len(model.Requests()), n)
	return nil
}

// idleAfter waits for the idle event that follows turn epoch.
func idleAfter(h *harness, epoch uint64) {
	h.t.Helper()
	h.waitFor(events.Idle, func(e events.Event) bool { return e.Epoch >= epoch }, 20*time.Second)
}

// A caller's first turn is a user turn with everything new; the next one
// is new from the model's own answer on, which the first request did not
// carry.
func TestRequestReasonUserTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := scripted.NewSTT()
		rec.Say("Hello there")
		h := start(t, setup{stt: rec, responses: []scripted.Response{
			{Text: "Hi, how can I help?"},
			{Text: "Of course."},
		}})
		h.speak(300 * time.Millisecond)
		for range 200 {
			if _, ok := h.find(events.InferenceSent, nil); ok {
				break
			}
			h.hush(20 * time.Millisecond)
		}
		idleAfter(h, 1)
		if err := h.s.Inject(context.Background(), "Can I book a table?"); err != nil {
			t.Fatal(err)
		}
		reqs := requests(t, h.model, 2)
		checkRequest(t, "spoken first turn", reqs[0], llm.ReasonUserTurn, 0)
		if got := reqs[0].Context.String(); got != "user: Hello there\n" {
			t.Errorf("first request's context %q; want the caller's words alone", got)
		}
		checkRequest(t, "typed second turn", reqs[1], llm.ReasonUserTurn, 1)
		if got := reqs[1].NewItems(); len(got) != 2 || got[0].Role != llm.RoleAssistant || got[1].Text != "Can I book a table?" {
			t.Errorf("new items %+v; want the answer and the second turn", got)
		}
	})
}

type stockArgs struct {
	Item string `json:"item"`
}

// The follow-up to a turn's tool calls carries their results, new from the
// model's answer on.
func TestRequestReasonFollowUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stock := tools.MustNew("check_stock", "Check the stock.", func(ctx context.Context, a stockArgs) (string, error) {
			return "3 left", nil
		}, tools.WithEffect(tools.Read))
		h := start(t, setup{tools: []*tools.Tool{stock}, responses: []scripted.Response{
			{Text: "Let me check.", ToolCalls: []scripted.Call{{ID: "c1", Name: "check_stock", Args: stockArgs{"blue"}}}},
			{Text: "There are three left."},
		}})
		if err := h.s.Inject(context.Background(), "Is the blue one in stock?"); err != nil {
			t.Fatal(err)
		}
		reqs := requests(t, h.model, 2)
		checkRequest(t, "user turn", reqs[0], llm.ReasonUserTurn, 0)
		checkRequest(t, "follow-up", reqs[1], llm.ReasonFollowUp, 1)
		want := "user: Is the blue one in stock?\n" +
			"assistant: Let me check.\n" +
			"tool_call check_stock {\"item\":\"blue\"} [c1]\n" +
			"tool_result check_stock: 3 left [c1]\n"
		if got := reqs[1].Context.String(); got != want {
			t.Errorf("follow-up context:\n%s\nwant:\n%s", got, want)
		}
	})
}

// A result that lands after the caller has spoken again replaces the
// provisional output next to its call, before the later user turn: the
// request for it is new from the result on, and the items after it (the
// later turn and its answer) were already shown, or are the model's own.
func TestRequestReasonLateToolResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stock := tools.MustNew("check_stock", "Check the stock.", func(ctx context.Context, a stockArgs) (string, error) {
			time.Sleep(4 * time.Second)
			return "3 left", nil
		}, tools.WithEffect(tools.Read))
		h := start(t, setup{tools: []*tools.Tool{stock}, responses: []scripted.Response{
			{Text: "Let me check.", ToolCalls: []scripted.Call{{ID: "c1", Name: "check_stock", Args: stockArgs{"blue"}}}},
			{Text: "Yes, we deliver."},
			{Text: "There are three blue ones left."},
		}})
		ctx := context.Background()
		if err := h.s.Inject(ctx, "Is the blue one in stock?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Epoch == 1 }, 5*time.Second)
		if _, done := h.find(events.ToolTerminal, nil); done {
			t.Fatal("the call ended before the caller spoke again; the test needs it running")
		}
		if err := h.s.Inject(ctx, "And do you deliver?"); err != nil {
			t.Fatal(err)
		}
		reqs := requests(t, h.model, 3)

		checkRequest(t, "turn while the call runs", reqs[1], llm.ReasonUserTurn, 1)
		if it := reqs[1].Context.Items[3]; it.Kind != llm.KindToolResult || it.Output != llm.ProvisionalRunning {
			t.Errorf("the running call is shown as %+v; want the provisional output %s", it, llm.ProvisionalRunning)
		}

		late := reqs[2]
		checkRequest(t, "late result", late, llm.ReasonToolResult, 3)
		want := "user: Is the blue one in stock?\n" +
			"assistant: Let me check.\n" +
			"tool_call check_stock {\"item\":\"blue\"} [c1]\n" +
			"tool_result check_stock: 3 left [c1]\n" +
			"user: And do you deliver?\n" +
			"assistant: Yes, we deliver.\n"
		if got := late.Context.String(); got != want {
			t.Errorf("late result's context:\n%s\nwant:\n%s", got, want)
		}
		// The item after the result is the turn the model answered already.
		if got, was := late.Context.Items[4], reqs[1].Context.Items[4]; !reflect.DeepEqual(got, was) {
			t.Errorf("item 4 is %+v; want the user turn of the previous request, %+v", got, was)
		}
	})
}

// A model that fails before saying anything hands the same request, New
// and all, to the backup model, as a retry.
func TestRequestReasonRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		backup := scripted.NewLLM(scripted.Response{Text: "Backup here: we open at noon."})
		h := start(t, setup{
			responses: []scripted.Response{{Text: "Hello."}, {Err: errors.New("upstream 503")}},
			agent:     func(a *Agent) { a.BackupModel = backup },
		})
		ctx := context.Background()
		if err := h.s.Inject(ctx, "Hi"); err != nil {
			t.Fatal(err)
		}
		idleAfter(h, 1)
		if err := h.s.Inject(ctx, "When do you open?"); err != nil {
			t.Fatal(err)
		}
		failed := requests(t, h.model, 2)[1]
		retry := requests(t, backup, 1)[0]
		checkRequest(t, "failed request", failed, llm.ReasonUserTurn, 1)
		checkRequest(t, "retry", retry, llm.ReasonRetry, 1)
		if retry.Context.String() != failed.Context.String() || retry.Instructions != failed.Instructions {
			t.Errorf("the retry is not the failed request:\n%s\nwant:\n%s", retry.Context, failed.Context)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Epoch == 2 }, 5*time.Second)
	})
}

// The agent a handoff brings in has been shown nothing: its first request
// is new from the start, a handoff with a greeting, or a greeting when its
// OnEnter asks for a reply; its next one counts from that. The summary
// the outgoing model writes is a request of its own kind.
func TestRequestReasonHandoff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []HandoffOption
		enter  bool
		reason llm.Reason
	}{
		{"with greeting", []HandoffOption{WithGreeting()}, false, llm.ReasonHandoff},
		{"greeting by OnEnter", []HandoffOption{WithContext(Summarize(time.Second))}, true, llm.ReasonGreeting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, setup{responses: []scripted.Response{
					{Text: "Let me put you through."},
					{Text: "Caller was charged twice."}, // the summary, if asked
				}})
				billingModel := scripted.NewLLM(
					scripted.Response{Text: "Billing here."},
					scripted.Response{Text: "I will refund it."},
				)
				billing := &Agent{Name: "billing", Instructions: "You are billing.", Model: billingModel, TTS: h.voice}
				if tc.enter {
					billing.OnEnter = func(ctx context.Context, s *Session) error { return s.GenerateReply(ctx, "") }
				}
				ctx := context.Background()
				if err := h.s.Inject(ctx, "I was charged twice."); err != nil {
					t.Fatal(err)
				}
				idleAfter(h, 1)
				if err := h.s.Handoff(ctx, billing, tc.opts...); err != nil {
					t.Fatal(err)
				}
				first := requests(t, billingModel, 1)[0]
				checkRequest(t, "billing's first", first, tc.reason, 0)
				if len(first.Context.Items) == 0 {
					t.Error("billing's first request has no context")
				}
				idleAfter(h, 2)
				if err := h.s.Inject(ctx, "Can you refund it?"); err != nil {
					t.Fatal(err)
				}
				next := requests(t, billingModel, 2)[1]
				checkRequest(t, "billing's next", next, llm.ReasonUserTurn, len(first.Context.Items))

				front := h.model.Requests()
				checkRequest(t, "front desk", front[0], llm.ReasonUserTurn, 0)
				if tc.enter {
					if len(front) != 2 {
						t.Fatalf("the front desk had %d requests; want the turn and the summary", len(front))
					}
					checkRequest(t, "summary", front[1], llm.ReasonSummary, 0)
				}
			})
		})
	}
}

// A reply the application asks for before the agent has said anything is
// its greeting, over an empty context; one asked for later is a reply.
func TestRequestReasonGreeting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{
			responses: []scripted.Response{
				{Text: "Welcome to the bistro."},
				{Text: "We open at noon."},
				{Text: "Anything else?"},
			},
			agent: func(a *Agent) {
				a.OnEnter = func(ctx context.Context, s *Session) error { return s.GenerateReply(ctx, "Greet the caller.") }
			},
		})
		ctx := context.Background()
		idleAfter(h, 1)
		if err := h.s.Inject(ctx, "When do you open?"); err != nil {
			t.Fatal(err)
		}
		idleAfter(h, 2)
		if err := h.s.GenerateReply(ctx, "Ask whether there is anything else."); err != nil {
			t.Fatal(err)
		}
		reqs := requests(t, h.model, 3)
		checkRequest(t, "greeting", reqs[0], llm.ReasonGreeting, 0)
		if len(reqs[0].Context.Items) != 0 || !strings.HasSuffix(reqs[0].Instructions, "Greet the caller.") {
			t.Errorf("greeting request: instructions %q, context %q", reqs[0].Instructions, reqs[0].Context)
		}
		// The greeting's context was empty: nothing of this one was shown.
		checkRequest(t, "user turn", reqs[1], llm.ReasonUserTurn, 0)
		checkRequest(t, "reply", reqs[2], llm.ReasonReply, 2)
	})
}
