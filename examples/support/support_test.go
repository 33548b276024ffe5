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
	"github.com/holdline/holdline/scripted"
)

// The front desk hands a caller with a double charge to billing, tried as
// a new user would, on the demo models: billing answers from then on,
// already knows the account (the lookup finished before the handoff), is
// given the ticket when it lands after the handoff, and refunds once.
func TestFrontDeskHandsTheCallerToBilling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(6))
		if err != nil {
			t.Fatal(err)
		}
		front, billing := support.NewFrontDeskDemoModel(), support.NewBillingDemoModel()
		desk := support.New(support.WithModels(front, billing), support.WithTTS(voice))
		s, err := runtime.New(desk.FrontDesk)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var evs []events.Event
		sub := s.Subscribe(4096)
		go func() {
			for e := range sub.C() {
				mu.Lock()
				evs = append(evs, e)
				mu.Unlock()
			}
		}()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		waitFor := func(what string, ok func(events.Event) bool) events.Event {
			t.Helper()
			for range 600 {
				mu.Lock()
				for _, e := range evs {
					if ok(e) {
						mu.Unlock()
						return e
					}
				}
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
			t.Fatalf("no %s within a minute", what)
			return events.Event{}
		}
		said := func(text string) func(events.Event) bool {
			return func(e events.Event) bool { return e.Kind == events.PlayoutDone && strings.Contains(e.Text, text) }
		}

		if err := s.Inject(ctx, "I was charged twice on account A7."); err != nil {
			t.Fatal(err)
		}
		ho := waitFor("handoff", func(e events.Event) bool { return e.Kind == events.Handoff })
		if ho.Text != "front-desk -> billing" {
			t.Errorf("handoff %q", ho.Text)
		}
		waitFor("billing's greeting", said("Billing here. I see two charges"))
		waitFor("the ticket, from billing", said("Your ticket is T-1001"))
		if err := s.Inject(ctx, "Yes, refund one please."); err != nil {
			t.Fatal(err)
		}
		waitFor("the refund", said("is refunded"))
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
