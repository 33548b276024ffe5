package tracing_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/tracing"
)

// callEvents is a call of turns agent turns, each with a barge-in
// suspicion, a tool call every other turn and a checkpoint: some 12
// events a turn.
func callEvents(turns int) []events.Event {
	t0 := time.Now()
	var evs []events.Event
	add := func(ms int, e events.Event) {
		e.Seq = uint64(len(evs) + 1)
		e.At = time.Duration(ms) * time.Millisecond
		e.Time = t0.Add(e.At)
		e.Session = "s_bench"
		evs = append(evs, e)
	}
	add(0, events.Event{Kind: events.SessionStarted, Text: "booking"})
	for i := 1; i <= turns; i++ {
		ep, ms := uint64(i), i*5000
		add(ms, events.Event{Kind: events.UserTurn, Reason: "speech", Text: "book a table"})
		add(ms+10, events.Event{Kind: events.TurnStarted, Epoch: ep})
		add(ms+20, events.Event{Kind: events.InferenceSent, Epoch: ep})
		add(ms+400, events.Event{Kind: events.PlayoutStarted, Epoch: ep})
		add(ms+800, events.Event{Kind: events.BargeInSuspected, Epoch: ep, Reason: "speech"})
		add(ms+1000, events.Event{Kind: events.BargeInResumed, Epoch: ep, Reason: "backchannel"})
		if i%2 == 0 {
			add(ms+1100, events.Event{Kind: events.ToolRequested, Epoch: ep, CallID: "c", Tool: "book_table", Policy: "complete", Key: "k"})
			add(ms+1200, events.Event{Kind: events.ToolTerminal, Epoch: ep, CallID: "c", Tool: "book_table", State: "succeeded"})
		}
		add(ms+2000, events.Event{Kind: events.PlayoutDone, Epoch: ep, Played: 1600 * time.Millisecond})
		at := time.Duration(ms) * time.Millisecond
		add(ms+2001, events.Event{Kind: events.TurnMetrics, Epoch: ep, Turn: &events.Turn{Agent: "booking", Model: "gpt-4o-mini", Voice: "alloy",
			SpeechEnd: at - 300*time.Millisecond, Endpoint: at, Request: at + 20*time.Millisecond, FirstToken: at + 200*time.Millisecond,
			FirstPhrase: at + 250*time.Millisecond, VoiceFirstAudio: at + 350*time.Millisecond, Queued: at + 360*time.Millisecond,
			FirstPlayed: at + 400*time.Millisecond, ModelDone: at + 600*time.Millisecond, SynthDone: at + 900*time.Millisecond, TokensIn: 300, TokensOut: 40}})
		add(ms+2002, events.Event{Kind: events.TurnSettled, Epoch: ep})
		add(ms+2010, events.Event{Kind: events.CheckpointSaved, Count: len(evs)})
	}
	add(turns*5000+3000, events.Event{Kind: events.SessionEnded, Reason: "the caller hung up"})
	return evs
}

// BenchmarkCallTrace is what tracing a call of 10 turns costs the
// subscriber that does it, spans batched to an exporter that drops them
// (go test -bench CallTrace -benchmem ./tracing).
func BenchmarkCallTrace(b *testing.B) {
	evs := callEvents(10)
	tp := tracing.NewProvider(tracetest.NewNoopExporter(), nil)
	defer tp.Shutdown(context.Background())
	tr := tracing.New(tp)
	b.ReportAllocs()
	for b.Loop() {
		s := tr.Session("s_bench")
		for _, e := range evs {
			s.Observe(e)
		}
		s.Close()
	}
	b.ReportMetric(float64(len(evs)), "events/call")
}
