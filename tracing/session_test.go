package tracing_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/tracing"
)

// counting counts the spans started and ended.
type counting struct{ started, ended atomic.Int64 }

func (c *counting) OnStart(context.Context, sdktrace.ReadWriteSpan) { c.started.Add(1) }
func (c *counting) OnEnd(sdktrace.ReadOnlySpan)                     { c.ended.Add(1) }
func (c *counting) Shutdown(context.Context) error                  { return nil }
func (c *counting) ForceFlush(context.Context) error                { return nil }

type fixture struct {
	exp *tracetest.InMemoryExporter
	tp  *sdktrace.TracerProvider
	cnt *counting
	t0  time.Time
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{exp: tracetest.NewInMemoryExporter(), cnt: &counting{}, t0: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	f.tp = tracing.NewProvider(f.exp, nil, sdktrace.WithSpanProcessor(f.cnt))
	t.Cleanup(func() { _ = f.tp.Shutdown(context.Background()) })
	return f
}

// ev is an event at ms milliseconds into the session.
func (f *fixture) ev(seq uint64, ms int, kind events.Kind, epoch uint64) events.Event {
	at := time.Duration(ms) * time.Millisecond
	return events.Event{Seq: seq, Session: "s_test", Epoch: epoch, Time: f.t0.Add(at), At: at, Kind: kind}
}

func (f *fixture) spans(t *testing.T) tracetest.SpanStubs {
	t.Helper()
	if err := f.tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f.exp.GetSpans()
}

func find(spans tracetest.SpanStubs, name string) (tracetest.SpanStub, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

func attr(s tracetest.SpanStub, key string) (any, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.AsInterface(), true
		}
	}
	return nil, false
}

// Events lost to a slow subscriber leave spans without their start or
// their end: every span still ends, by the session's end at the latest,
// and nothing panics.
func TestDroppedEventsLeaveNoSpanOpen(t *testing.T) {
	f := newFixture(t)
	s := tracing.New(f.tp).Session("s_test", tracing.WithTransport("sip"))
	tool := f.ev(5, 400, events.ToolRequested, 1)
	tool.CallID, tool.Tool = "c1", "book"
	orphan := f.ev(8, 700, events.ToolTerminal, 1)
	orphan.CallID, orphan.Tool, orphan.State = "c2", "lookup", "failed"
	done := f.ev(9, 800, events.PlayoutDone, 2)
	done.Played = 300 * time.Millisecond
	metrics := f.ev(10, 900, events.TurnMetrics, 3)
	metrics.Turn = &events.Turn{Request: 850 * time.Millisecond, FirstToken: 870 * time.Millisecond, ModelDone: 880 * time.Millisecond, Model: "m"}
	dropped := f.ev(0, 950, events.EventsDropped, 0)
	dropped.Count = 7
	for _, e := range []events.Event{
		f.ev(1, 0, events.SessionStarted, 0),
		f.ev(2, 100, events.TurnStarted, 1),
		f.ev(3, 200, events.PlayoutStarted, 1),
		f.ev(4, 300, events.TurnSettled, 9), // a turn never started
		tool,
		f.ev(6, 500, events.BargeInSuspected, 1),
		f.ev(7, 600, events.TransportLost, 1),
		orphan,
		done,
		metrics,
		dropped,
		f.ev(11, 990, events.BargeInConfirmed, 0),
		{Kind: events.TurnMetrics, Epoch: 4}, // no Turn, no time
	} {
		s.Observe(e)
	}
	s.Close()
	s.Observe(f.ev(12, 1000, events.TurnStarted, 5)) // after Close: nothing
	s.Close()

	spans := f.spans(t)
	if st, en := f.cnt.started.Load(), f.cnt.ended.Load(); st != en || st == 0 {
		t.Fatalf("%d spans started, %d ended: spans leaked", st, en)
	}
	root, ok := find(spans, tracing.SpanSession)
	if !ok {
		t.Fatal("no session span")
	}
	if v, _ := attr(root, "holdline.incomplete"); v != true {
		t.Errorf("the session span, ended by Close, is not marked incomplete")
	}
	if v, _ := attr(root, "holdline.events_dropped"); v != int64(7) {
		t.Errorf("events_dropped %v, want 7", v)
	}
	if !root.EndTime.Equal(f.t0.Add(990 * time.Millisecond)) {
		t.Errorf("the session span ends at %v, want the latest event's time", root.EndTime.Sub(f.t0))
	}
	for _, sp := range spans {
		if sp.EndTime.Before(sp.StartTime) {
			t.Errorf("span %s ends before it starts", sp.Name)
		}
		if sp.SpanContext.TraceID() != tracing.TraceID("s_test") {
			t.Errorf("span %s in another trace", sp.Name)
		}
	}
	if sp, ok := find(spans, "execute_tool lookup"); !ok || sp.Status.Code != codes.Error {
		t.Errorf("the tool whose request was dropped: %+v (found %v), want an error span", sp.Status, ok)
	}
	if _, ok := find(spans, "chat m"); !ok {
		t.Errorf("no model span for the turn whose start was dropped")
	}
}

// Tool arguments and what was said are in the spans only WithContent.
func TestContentOnlyWhenAsked(t *testing.T) {
	for _, content := range []bool{false, true} {
		f := newFixture(t)
		s := tracing.New(f.tp, tracing.WithContent(content)).Session("s_test")
		req := f.ev(3, 200, events.ToolRequested, 1)
		req.CallID, req.Tool, req.Text, req.Policy, req.Key = "c1", "book", `{"card":"4111"}`, "complete", "k1"
		user := f.ev(2, 100, events.UserTurn, 0)
		user.Text, user.Reason = "my card is 4111", "speech"
		end := f.ev(4, 300, events.ToolTerminal, 1)
		end.CallID, end.Tool, end.State = "c1", "book", "succeeded"
		for _, e := range []events.Event{f.ev(1, 0, events.SessionStarted, 0), user, f.ev(2, 150, events.TurnStarted, 1), req, end,
			f.ev(5, 400, events.TurnSettled, 1), f.ev(6, 500, events.SessionEnded, 0)} {
			s.Observe(e)
		}
		s.Close()
		spans := f.spans(t)
		tool, ok := find(spans, "execute_tool book")
		if !ok {
			t.Fatal("no tool span")
		}
		args, hasArgs := attr(tool, "gen_ai.tool.call.arguments")
		if hasArgs != content || content && args != req.Text {
			t.Errorf("content %v: arguments %v (%v)", content, args, hasArgs)
		}
		if p, _ := attr(tool, "holdline.tool.policy"); p != "complete" {
			t.Errorf("policy %v", p)
		}
		root, _ := find(spans, tracing.SpanSession)
		said := false
		for _, e := range root.Events {
			for _, kv := range e.Attributes {
				said = said || strings.Contains(kv.Value.Emit(), "4111")
			}
		}
		if said != content {
			t.Errorf("content %v: the caller's words in the session's events: %v", content, said)
		}
	}
}

// A provider's error makes an error span, and marks its turn, without
// the credential an error message may carry.
func TestProviderErrorIsAnErrorWithoutCredentials(t *testing.T) {
	f := newFixture(t)
	s := tracing.New(f.tp).Session("s_test")
	perr := f.ev(3, 200, events.ProviderError, 1)
	perr.Provider, perr.Error = "llm", "401: Incorrect API key provided: sk-abcdefghijklmnop"
	for _, e := range []events.Event{f.ev(1, 0, events.SessionStarted, 0), f.ev(2, 100, events.TurnStarted, 1), perr,
		f.ev(4, 300, events.TurnSettled, 1), f.ev(5, 400, events.SessionEnded, 0)} {
		s.Observe(e)
	}
	spans := f.spans(t)
	pe, ok := find(spans, tracing.SpanProviderErr)
	if !ok || pe.Status.Code != codes.Error {
		t.Fatalf("provider error span %+v (found %v)", pe.Status, ok)
	}
	turn, _ := find(spans, tracing.SpanTurn)
	if turn.Status.Code != codes.Error {
		t.Errorf("the turn is not marked an error")
	}
	for _, sp := range spans {
		if strings.Contains(sp.Status.Description, "sk-abcdefghijklmnop") {
			t.Errorf("span %s status holds the key: %q", sp.Name, sp.Status.Description)
		}
	}
}

// A session resumed where its tracer was not told of the earlier life
// (no checkpoint fact) still continues the session's trace, linked to
// its first life's span.
func TestResumedSessionLinksToItsFirstLife(t *testing.T) {
	f := newFixture(t)
	s := tracing.New(f.tp).Session("s_test")
	s.Observe(f.ev(41, 0, events.SessionStarted, 0))
	s.Observe(f.ev(42, 0, events.SessionResumed, 3))
	s.Observe(f.ev(43, 100, events.SessionEnded, 3))
	root, ok := find(f.spans(t), tracing.SpanSession)
	if !ok {
		t.Fatal("no session span")
	}
	if root.SpanContext.TraceID() != tracing.TraceID("s_test") || root.SpanContext.SpanID() != tracing.SessionSpanID("s_test", 41) {
		t.Errorf("the resumed session span is %v", root.SpanContext)
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.SpanID() != tracing.SessionSpanID("s_test", 1) {
		t.Errorf("links %+v, want the first life's span", root.Links)
	}
}

// Handoffs, checkpoints and the caller's connection are spans (or
// events) of the session.
func TestSessionLevelSpans(t *testing.T) {
	f := newFixture(t)
	s := tracing.New(f.tp).Session("s_test")
	handoff := f.ev(2, 100, events.Handoff, 0)
	handoff.Text, handoff.Reason, handoff.Count = "desk -> billing", "summary", 4
	saved := f.ev(3, 150, events.CheckpointSaved, 0)
	saved.Count = 2
	failed := f.ev(4, 200, events.CheckpointFailed, 0)
	failed.Error = "redis: connection refused"
	for _, e := range []events.Event{f.ev(1, 0, events.SessionStarted, 0), handoff, saved, failed,
		f.ev(5, 300, events.TransportLost, 0), f.ev(6, 900, events.TransportRestored, 0), f.ev(7, 1000, events.SessionEnded, 0)} {
		s.Observe(e)
	}
	spans := f.spans(t)
	root, _ := find(spans, tracing.SpanSession)
	for _, tc := range []struct {
		name       string
		start, end int
		err        bool
	}{
		{tracing.SpanHandoff, 100, 100, false},
		{tracing.SpanCheckpoint, 200, 200, true},
		{tracing.SpanTransport, 300, 900, false},
	} {
		sp, ok := find(spans, tc.name)
		switch {
		case !ok:
			t.Errorf("no %s span", tc.name)
		case sp.Parent.SpanID() != root.SpanContext.SpanID():
			t.Errorf("%s is not under the session", tc.name)
		case !sp.StartTime.Equal(f.t0.Add(time.Duration(tc.start)*time.Millisecond)) || !sp.EndTime.Equal(f.t0.Add(time.Duration(tc.end)*time.Millisecond)):
			t.Errorf("%s spans [%v, %v], want [%dms, %dms]", tc.name, sp.StartTime.Sub(f.t0), sp.EndTime.Sub(f.t0), tc.start, tc.end)
		case (sp.Status.Code == codes.Error) != tc.err:
			t.Errorf("%s status %v", tc.name, sp.Status)
		}
	}
	h, _ := find(spans, tracing.SpanHandoff)
	if v, _ := attr(h, "holdline.handoff"); v != "desk -> billing" {
		t.Errorf("handoff %v", v)
	}
	var savedSeen bool
	for _, e := range root.Events {
		savedSeen = savedSeen || e.Name == "checkpoint_saved"
	}
	if !savedSeen {
		t.Errorf("no checkpoint_saved event on the session span")
	}
}

// A call resumed from a checkpoint links to the life that wrote it, as
// the checkpoint's fact names it, and names its own for the next.
func TestObserverLinksToTheLifeThatWroteTheCheckpoint(t *testing.T) {
	f := newFixture(t)
	tr := tracing.New(f.tp)
	second := tracing.SessionSpanID("s_test", 21)
	o, facts := tr.Observer(calls.Watch{ID: "s_test", Kind: "sip", Origin: calls.Redialled, Seq: 40,
		Facts: map[string]string{tracing.FactSessionSpan: second.String()}})
	if want := tracing.SessionSpanID("s_test", 41).String(); facts[tracing.FactSessionSpan] != want {
		t.Errorf("facts %v, want the span %s", facts, want)
	}
	o.Observe(f.ev(41, 0, events.SessionStarted, 0))
	o.Observe(f.ev(42, 0, events.SessionResumed, 0))
	o.Close()
	root, _ := find(f.spans(t), tracing.SpanSession)
	if root.SpanContext.SpanID().String() != facts[tracing.FactSessionSpan] {
		t.Errorf("the session span is %s, not the one sealed in the facts", root.SpanContext.SpanID())
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.SpanID() != second {
		t.Errorf("links %+v, want the second life's span %s", root.Links, second)
	}
}
