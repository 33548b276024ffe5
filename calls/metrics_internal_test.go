package calls

import (
	"testing"

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

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
