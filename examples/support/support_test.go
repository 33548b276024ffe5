package support_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/examples/support"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
)

// The front desk hands a caller with a double charge to billing, tried as
// a new user would, on the demo models: billing answers from then on,
// already knows the account (the lookup finished before the handoff), is
// given the ticket when it lands after the handoff, and refunds once.
func TestFrontDeskHandsTheCallerToBilling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		front, billing := support.NewFrontDeskDemoModel(), support.NewBillingDemoModel()
		desk := support.New(support.WithModels(front, billing), support.WithTTS(demoVoice(t)))
		c := startCall(t, desk.FrontDesk)
		c.waitFor("the greeting", said("Holdline Telecom, front desk. How can I help?"))

		c.say("I was charged twice on account A7.")
		ho := c.waitFor("handoff", func(e events.Event) bool { return e.Kind == events.Handoff })
		if ho.Text != "front-desk -> billing" {
			t.Errorf("handoff %q", ho.Text)
		}
		c.waitFor("billing's greeting", said("Billing here. I see two charges"))
		c.waitFor("the ticket, from billing", said("Your ticket is T-1001"))
		c.say("Yes, refund one please.")
		c.waitFor("the refund", said("is refunded"))
		if r := desk.Refunds(); len(r) != 1 || r[0].Account != "A7" {
			t.Errorf("refunds %+v; want one, for A7", r)
		}
		for _, req := range billing.Requests() {
			if req.Instructions != support.BillingInstructions {
				t.Errorf("billing was asked with instructions %q", req.Instructions)
			}
		}
		first := billing.Requests()[0]
		if !hasResult(first, "lookup_account", "19.99") {
			t.Errorf("billing's first request lacks the account lookup: %+v", first.Context.Items)
		}
		for _, req := range front.Requests() {
			if hasResult(req, "transfer_to_billing", "billing") {
				t.Error("the front desk was asked again after handing the caller over")
			}
		}
	})
}

// A call handed to billing is restored on another worker (a new desk
// made the way the first was, given the state of the last checkpoint):
// it comes back as billing, not as the front desk the worker starts calls
// with, knowing the account and the ticket, and billing refunds there.
func TestCallWithBillingComesBackAsBillingAfterACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		desk := support.New(support.WithTTS(demoVoice(t)))
		c := startCall(t, desk.FrontDesk)
		c.waitFor("the greeting", said("How can I help?"))
		c.say("I was charged twice on account A7.")
		c.waitFor("the ticket, from billing", said("Your ticket is T-1001"))
		st, err := c.s.State(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		c.end() // the worker dies

		front, billing := support.NewFrontDeskDemoModel(), support.NewBillingDemoModel()
		other := support.New(support.WithModels(front, billing), support.WithTTS(demoVoice(t)))
		r := startCall(t, other.FrontDesk, engine.WithState(st))
		if !r.s.Restored() {
			t.Error("the restored session says it is new")
		}
		started := r.waitFor("the start", func(e events.Event) bool { return e.Kind == events.SessionStarted })
		if started.Text != "billing" {
			t.Errorf("the restored call started as %q; want billing", started.Text)
		}
		if started.Seq <= st.Seq {
			t.Errorf("the restored call's events start again at %d; the state covered up to %d", started.Seq, st.Seq)
		}
		r.say("Yes, refund one please.")
		r.waitFor("the refund", said("is refunded"))
		if got := other.Refunds(); len(got) != 1 || got[0].Account != "A7" {
			t.Errorf("refunds on the new worker %+v; want one, for A7", got)
		}
		if n := len(front.Requests()); n != 0 {
			t.Errorf("the front desk was asked %d times on the new worker; the call was with billing", n)
		}
		reqs := billing.Requests()
		if len(reqs) == 0 || !hasResult(reqs[0], "lookup_account", "19.99") || !hasResult(reqs[0], "open_ticket", "T-1001") {
			t.Errorf("billing's first request on the new worker lacks the lookup or the ticket: %+v", reqs)
		}
	})
}

func demoVoice(t *testing.T) *scripted.TTS {
	voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(6))
	if err != nil {
		t.Fatal(err)
	}
	return voice
}

// call is a running session and the events it has emitted.
type call struct {
	t      *testing.T
	s      *runtime.Session
	mu     sync.Mutex
	evs    []events.Event
	cancel context.CancelFunc
	done   chan error
}

func startCall(t *testing.T, agent *runtime.Agent, opts ...runtime.Option) *call {
	s, err := runtime.New(agent, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := &call{t: t, s: s, done: make(chan error, 1)}
	sub := s.Subscribe(4096)
	go func() {
		for e := range sub.C() {
			c.mu.Lock()
			c.evs = append(c.evs, e)
			c.mu.Unlock()
		}
	}()
	var ctx context.Context
	ctx, c.cancel = context.WithCancel(context.Background())
	go func() { c.done <- s.Run(ctx) }()
	t.Cleanup(c.end)
	return c
}

// end stops the session, once.
func (c *call) end() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.cancel = nil
	if err := <-c.done; err != nil {
		c.t.Errorf("Run: %v", err)
	}
}

func (c *call) say(text string) {
	c.t.Helper()
	if err := c.s.Inject(context.Background(), text); err != nil {
		c.t.Fatal(err)
	}
}

func (c *call) waitFor(what string, ok func(events.Event) bool) events.Event {
	c.t.Helper()
	for range 600 {
		c.mu.Lock()
		for _, e := range c.evs {
			if ok(e) {
				c.mu.Unlock()
				return e
			}
		}
		c.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("no %s within a minute", what)
	return events.Event{}
}

func said(text string) func(events.Event) bool {
	return func(e events.Event) bool { return e.Kind == events.PlayoutDone && strings.Contains(e.Text, text) }
}

func hasResult(req llm.Request, tool, text string) bool {
	names := map[string]string{}
	for _, it := range req.Context.Items {
		if it.Kind == llm.KindToolCall {
			names[it.CallID] = it.Name
		}
		if it.Kind == llm.KindToolResult && names[it.CallID] == tool && strings.Contains(it.Output, text) {
			return true
		}
	}
	return false
}
