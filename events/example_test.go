package events_test

import (
	"fmt"
	"os"
	"time"

	"github.com/holdline/holdline/events"
)

func ExampleBus() {
	bus := events.NewBus()
	sub := bus.Subscribe(16)

	bus.Publish(events.Event{Seq: 1, Session: "call-1", Kind: events.SpeechStarted})
	bus.Publish(events.Event{Seq: 2, Session: "call-1", Kind: events.BargeInConfirmed})
	bus.Close()

	for e := range sub.C() {
		fmt.Println(e.Seq, e.Kind)
	}
	// Output:
	// 1 speech_started
	// 2 barge_in_confirmed
}

func ExampleJSONL() {
	sink := events.NewJSONL(os.Stdout)
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	_ = sink.Write(events.Event{Seq: 1, Session: "call-1", Time: start, Kind: events.SessionStarted})
	_ = sink.Write(events.Event{
		Seq: 2, Session: "call-1", Epoch: 1, Time: start.Add(time.Second), At: time.Second,
		Kind: events.PlayoutTruncate, Text: "Sure, I can", Played: 800 * time.Millisecond,
	})
	_ = sink.Flush()
	// Output:
	// {"seq":1,"session":"call-1","epoch":0,"time":"2025-01-02T03:04:05Z","at_ns":0,"kind":"session_started"}
	// {"seq":2,"session":"call-1","epoch":1,"time":"2025-01-02T03:04:06Z","at_ns":1000000000,"kind":"playout_truncated","text":"Sure, I can","played_ns":800000000}
}

// A turn's breakdown: each stage reached, with the time it took from the
// one before; then voice-to-voice and Holdline's own share.
func ExampleTurn_Breakdown() {
	ms := time.Millisecond
	t := events.Turn{
		SpeechEnd: 1000 * ms, Transcript: 1450 * ms, Endpoint: 1800 * ms, Request: 1801 * ms,
		FirstToken: 2100 * ms, FirstPhrase: 2250 * ms, VoiceFirstAudio: 2370 * ms, Queued: 2371 * ms,
		FirstPlayed: 2380 * ms, Overhead: 2 * ms,
	}
	for _, st := range t.Breakdown() {
		fmt.Printf("%-17s %v\n", st.Name, st.Took)
	}
	// Output:
	// transcript        450ms
	// endpoint          800ms
	// request           1ms
	// first_token       299ms
	// first_phrase      150ms
	// voice_first_audio 120ms
	// queued            1ms
	// played            9ms
	// voice_to_voice    1.38s
	// overhead          2ms
}
