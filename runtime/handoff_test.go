package runtime

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

type accountArgs struct {
	Account string `json:"account"`
}

// frontDesk is an agent that looks an account up, opens a ticket (which
// takes a while and runs on in the background) and hands the caller to
// billing with strategy.
func frontDesk(t *testing.T, billing *Agent, strategy ContextStrategy, model *scripted.LLM) *Agent {
	lookup := tools.MustNew("lookup_account", "Look the account up.", func(ctx context.Context, a accountArgs) (string, error) {
		return `{"plan":"pro","balance":"42.00"}`, nil
	}, tools.WithEffect(tools.Read))
	ticket := tools.MustNew("open_ticket", "Open a ticket.", func(ctx context.Context, a accountArgs) (string, error) {
		time.Sleep(3 * time.Second) // still running when the caller is handed over
		return `{"ticket":"T-1001"}`, nil
	}, tools.WithEffect(tools.Read), tools.WithInterruptPolicy(tools.Detach), tools.WithTimeout(time.Minute))
	transfer := tools.MustNew("transfer_to_billing", "Hand the caller to billing.", func(ctx context.Context, _ struct{}) (string, error) {
		s, ok := SessionFrom(ctx)
		if !ok {
			t.Error("no session in the tool's context")
			return "", nil
		}
		if err := s.Handoff(ctx, billing, WithContext(strategy)); err != nil {
			return "", err
		}
		return "transferred", nil
	}, tools.WithEffect(tools.Read))
	return &Agent{Name: "front-desk", Instructions: "You are the front desk.", Model: model,
		Tools: []*tools.Tool{lookup, ticket, transfer}}
}

// billingAgent answers as billing and records what it was asked.
func billingAgent() (*Agent, *scripted.LLM) {
	model := scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		return scripted.Response{Text: "Billing here."}
	})
	refund := tools.MustNew("refund", "Refund.", func(ctx context.Context, a accountArgs) (string, error) {
		return "refunded", nil
	})
	return &Agent{Name: "billing", Instructions: "You are billing.", Model: model, Tools: []*tools.Tool{refund}}, model
}

func outputOf(req llm.Request, tool string) (string, bool) {
	ids := map[string]bool{}
	for _, it := range req.Context.Items {
		if it.Kind == llm.KindToolCall && it.Name == tool {
			ids[it.CallID] = true
		}
		if it.Kind == llm.KindToolResult && ids[it.CallID] && !llm.IsProvisional(it.Output) {
			return it.Output, true
		}
	}
	return "", false
}

// A front desk hands the caller to billing mid-call: billing answers from
// then on, with its own instructions and tools, the finished lookup is in
// its context, and the ticket still being opened at the handoff is
// delivered to billing when it lands.
func TestHandoffKeepsFinishedResultsAndDeliversPendingOnes(t *testing.T) {
	for _, strategy := range []ContextStrategy{FullContext(), LastTurns(1), ResetContext()} {
		t.Run(strategy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				billing, billingModel := billingAgent()
				frontModel := scripted.NewLLM(
					scripted.Response{Text: "Let me look.", ToolCalls: []scripted.Call{
						{ID: "l1", Name: "lookup_account", Args: accountArgs{"A7"}},
						{ID: "t1", Name: "open_ticket", Args: accountArgs{"A7"}},
					}},
					scripted.Response{Text: "Your balance is 42. I will put you through to billing.", ToolCalls: []scripted.Call{
						{ID: "x1", Name: "transfer_to_billing", Args: struct{}{}},
					}},
				)
				h := start(t, setup{agent: func(a *Agent) {
					voice := a.TTS
					*a = *frontDesk(t, billing, strategy, frontModel)
					a.TTS, billing.TTS = voice, voice
				}})
				if err := h.s.Inject(context.Background(), "I was charged twice on account A7."); err != nil {
					t.Fatal(err)
				}
				ho := h.waitFor(events.Handoff, nil, 10*time.Second)
				if ho.Text != "front-desk -> billing" || ho.Reason != strategy.String() {
					t.Errorf("handoff event %q (%s); want front-desk -> billing (%s)", ho.Text, ho.Reason, strategy)
				}
				// The ticket lands after the handoff: billing is told.
				h.waitFor(events.ToolCommitted, func(e events.Event) bool { return e.CallID == "t1" }, 10*time.Second)
				h.waitFor(events.Idle, nil, 10*time.Second)
				// Each turn's breakdown names the agent that answered, the
				// front desk's too, though they settle after the handoff.
				var agents []string
				for _, e := range h.all(events.TurnMetrics) {
					agents = append(agents, e.Turn.Agent)
				}
				if len(agents) < 3 || agents[0] != "front-desk" || agents[1] != "front-desk" || agents[len(agents)-1] != "billing" {
					t.Errorf("the turns' breakdowns name agents %q; want the front desk's two turns, then billing", agents)
				}
				reqs := billingModel.Requests()
				if len(reqs) == 0 {
					t.Fatal("billing was never asked anything")
				}
				first, last := reqs[0], reqs[len(reqs)-1]
				if first.Instructions != "You are billing." || len(first.Tools) != 1 || first.Tools[0].Name != "refund" {
					t.Errorf("billing's request had instructions %q and tools %v", first.Instructions, first.Tools)
				}
				if out, ok := outputOf(first, "lookup_account"); !ok || !strings.Contains(out, "42.00") {
					t.Errorf("billing's first request lacks the finished lookup (%q)", out)
				}
				if out, ok := outputOf(last, "open_ticket"); !ok || !strings.Contains(out, "T-1001") {
					t.Errorf("the ticket that landed after the handoff never reached billing: %+v", last.Context.Items)
				}
				if fr := frontModel.Requests(); len(fr) != 2 {
					items := fr[len(fr)-1].Context.Items
					t.Errorf("the front desk was asked %d times; want 2 (nothing after the handoff); last ends %+v", len(fr), items[len(items)-1])
					h.mu.Lock()
					for _, e := range h.events {
						t.Logf("%v %s %s %s %s", e.At, e.Kind, e.CallID, e.Reason, e.Text)
					}
					h.mu.Unlock()
				}
				hasUser := false
				for _, it := range first.Context.Items {
					hasUser = hasUser || (it.Role == llm.RoleUser && strings.Contains(it.Text, "charged twice"))
				}
				if want := strategy.String() != "reset"; hasUser != want {
					t.Errorf("with %s, the caller's words are in billing's context: %v; want %v", strategy, hasUser, want)
				}
			})
		})
	}
}

// A summary handoff gives the next agent the outgoing model's summary in
// place of the messages; a model that does not answer in time leaves the
// last turns instead, and the event says so.
func TestHandoffWithSummaryAndItsFallback(t *testing.T) {
	for _, tc := range []struct {
		name    string
		summary scripted.Response
		reason  string
	}{
		{"summarised", scripted.Response{Text: "Caller on account A7 was charged twice."}, "summary"},
		{"model silent", scripted.Response{Hang: true}, "summary:fallback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				billing, billingModel := billingAgent()
				h := start(t, setup{responses: []scripted.Response{{Text: "I see."}, tc.summary}})
				billing.TTS = h.voice
				ctx := context.Background()
				if err := h.s.Inject(ctx, "I was charged twice on account A7."); err != nil {
					t.Fatal(err)
				}
				h.waitFor(events.Idle, nil, 10*time.Second)
				if err := h.s.Handoff(ctx, billing, WithContext(Summarize(time.Second)), WithGreeting()); err != nil {
					t.Fatal(err)
				}
				ho := h.waitFor(events.Handoff, nil, 5*time.Second)
				if ho.Reason != tc.reason {
					t.Errorf("handoff reason %q; want %q", ho.Reason, tc.reason)
				}
				h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text == "Billing here." }, 10*time.Second)
				items := billingModel.Requests()[0].Context.Items
				switch tc.reason {
				case "summary":
					if len(items) != 1 || !strings.Contains(items[0].Text, "charged twice") || items[0].Role != llm.RoleAssistant {
						t.Errorf("billing's context %+v; want the summary alone", items)
					}
				default:
					if len(items) == 0 || items[0].Role != llm.RoleUser || !strings.Contains(items[0].Text, "charged twice") {
						t.Errorf("billing's context %+v; want the caller's last turn", items)
					}
				}
			})
		})
	}
}
