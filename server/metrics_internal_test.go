package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
)

// TestDroppedTurnsAreCountedApartFromOtherRecogniserErrors checks that a
// turn lost to a recogniser that fell behind counts in
// holdline_stt_turns_dropped_total, and other recogniser errors do not.
func TestDroppedTurnsAreCountedApartFromOtherRecogniserErrors(t *testing.T) {
	m := newMetrics()
	o := m.observer()
	o.observe(events.Event{Kind: events.ProviderError, Provider: "stt", Reason: runtime.TurnDropped})
	o.observe(events.Event{Kind: events.ProviderError, Provider: "stt", Error: "socket closed"})
	o.observe(events.Event{Kind: events.ProviderError, Provider: "tts", Reason: runtime.TurnDropped})
	if got := testutil.ToFloat64(m.sttTurnsDropped); got != 1 {
		t.Errorf("holdline_stt_turns_dropped_total = %v; want 1", got)
	}
	if got := testutil.ToFloat64(m.providerErrors.WithLabelValues("stt")); got != 2 {
		t.Errorf("stt provider errors = %v; want 2", got)
	}
}
