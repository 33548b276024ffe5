package calls

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime/engine"
)

// TestDroppedTurnsAreCountedApartFromOtherRecogniserErrors checks that a
// turn lost to a recogniser that fell behind counts in
// holdline_stt_turns_dropped_total, and other recogniser errors do not.
func TestDroppedTurnsAreCountedApartFromOtherRecogniserErrors(t *testing.T) {
	m := newMetrics(&Host{})
	o := m.observer("webrtc")
	o.observe(events.Event{Kind: events.ProviderError, Provider: "stt", Reason: engine.TurnDropped})
	o.observe(events.Event{Kind: events.ProviderError, Provider: "stt", Error: "socket closed"})
	o.observe(events.Event{Kind: events.ProviderError, Provider: "tts", Reason: engine.TurnDropped})
	if got := counterValue(t, m.sttTurnsDropped); got != 1 {
		t.Errorf("holdline_stt_turns_dropped_total = %v; want 1", got)
	}
	if got := counterValue(t, m.providerErrors.WithLabelValues("stt")); got != 2 {
		t.Errorf("stt provider errors = %v; want 2", got)
	}
}

// TestSpeculationsAreCountedWithTheCallersTurns checks the figures the
// hit rate of speculative answers comes from: spoken turns, speculations
// used and discarded, and the time won.
func TestSpeculationsAreCountedWithTheCallersTurns(t *testing.T) {
	m := newMetrics(&Host{})
	o := m.observer("sip")
	o.observe(events.Event{Kind: events.SpeculationStarted})
	o.observe(events.Event{Kind: events.SpeculationDiscarded, Reason: "speech"})
	o.observe(events.Event{Kind: events.SpeculationStarted})
	o.observe(events.Event{Kind: events.UserTurn, Reason: "speech"})
	o.observe(events.Event{Kind: events.SpeculationUsed, Delay: 300 * time.Millisecond})
	o.observe(events.Event{Kind: events.UserTurn, Reason: "injected"})
	for name, c := range map[string]prometheus.Counter{
		"speech turns": m.callerTurns.WithLabelValues("speech"), "typed turns": m.callerTurns.WithLabelValues("typed"),
		"used": m.speculations.WithLabelValues("used"), "discarded": m.speculations.WithLabelValues("discarded"),
	} {
		if got := counterValue(t, c); got != 1 {
			t.Errorf("%s = %v; want 1", name, got)
		}
	}
	var h dto.Metric
	if err := m.speculationWon.Write(&h); err != nil {
		t.Fatal(err)
	}
	if h.GetHistogram().GetSampleCount() != 1 || h.GetHistogram().GetSampleSum() != 0.3 {
		t.Errorf("time won: %d samples, sum %v; want one of 0.3 s", h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum())
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestAToolStillRunningShowsHowLongItHasRun checks the stuck-tool gauges:
// a call under way is counted with its age until it ends, or its session
// does.
func TestAToolStillRunningShowsHowLongItHasRun(t *testing.T) {
	m := newMetrics(&Host{})
	a, b := m.observer("sip"), m.observer("webrtc")
	started := time.Now().Add(-90 * time.Second)
	a.observe(events.Event{Kind: events.ToolStarted, Session: "s1", CallID: "c1", Tool: "book_table", Time: started})
	a.observe(events.Event{Kind: events.ToolStarted, Session: "s1", CallID: "c2", Tool: "book_table", Time: time.Now()})
	b.observe(events.Event{Kind: events.ToolStarted, Session: "s2", CallID: "c1", Tool: "lookup", Time: time.Now()})
	gauges := func() map[string]float64 {
		got := map[string]float64{}
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				if n := mf.GetName(); n == "holdline_tool_calls_running" || n == "holdline_tool_call_oldest_running_seconds" {
					got[n+"/"+mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
				}
			}
		}
		return got
	}
	g := gauges()
	if g["holdline_tool_calls_running/book_table"] != 2 || g["holdline_tool_calls_running/lookup"] != 1 {
		t.Errorf("running %v; want 2 book_table and 1 lookup", g)
	}
	if age := g["holdline_tool_call_oldest_running_seconds/book_table"]; age < 90 || age > 120 {
		t.Errorf("the oldest book_table call has run %v s; want about 90", age)
	}
	a.observe(events.Event{Kind: events.ToolTerminal, Session: "s1", CallID: "c1", Tool: "book_table", State: "succeeded"})
	if age := gauges()["holdline_tool_call_oldest_running_seconds/book_table"]; age > 10 {
		t.Errorf("after the old call ended the oldest has run %v s; want the new one's age", age)
	}
	a.close() // s1's call ended with c2 still running
	b.observe(events.Event{Kind: events.ToolTerminal, Session: "s2", CallID: "c1", Tool: "lookup", State: "succeeded"})
	if g := gauges(); len(g) != 0 {
		t.Errorf("with every call over, still running: %v", g)
	}
}
