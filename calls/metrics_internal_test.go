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
