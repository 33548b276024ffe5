package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
)

// TestEventSinkSeesTheWholeCall checks that a sink given WithEventSink
// gets every event of the session in order, from session_started to
// session_ended, including what happens before and in OnEnter, and has had
// the last when Run returns.
func TestEventSinkSeesTheWholeCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []events.Event
		sink := func(e events.Event) {
			time.Sleep(time.Millisecond) // a sink slower than the session
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		}
		voice, err := scripted.NewTTS()
		if err != nil {
			t.Fatal(err)
		}
		agent := &Agent{Name: "desk", Model: scripted.NewLLM(scripted.Response{Text: "Hello there."}), TTS: voice,
			OnEnter: func(ctx context.Context, s *Session) error { return s.GenerateReply(ctx, "Greet.") }}
		s, err := New(agent, WithEventSink(sink), WithID("sink"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The call ends when ctx does (the caller hung up).
		if err := s.Run(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) < 3 || got[0].Kind != events.SessionStarted || got[len(got)-1].Kind != events.SessionEnded {
			t.Fatalf("the sink got %d events, first %v, last %v; want session_started first and session_ended last", len(got), kindOf(got, 0), kindOf(got, len(got)-1))
		}
		greeted := false
		for i, e := range got {
			if e.Kind == events.PlayoutDone {
				greeted = true
			}
			if i > 0 && e.Seq != 0 && e.Seq <= got[i-1].Seq {
				t.Errorf("event %d (%s) has seq %d after %d: out of order", i, e.Kind, e.Seq, got[i-1].Seq)
			}
		}
		if !greeted {
			t.Error("the sink did not see the greeting played")
		}
	})
	if err := WithEventSink(nil)(&engine.Settings{}); err == nil {
		t.Error("a nil sink was accepted")
	}
}

func kindOf(evs []events.Event, i int) events.Kind {
	if i < 0 || i >= len(evs) {
		return ""
	}
	return evs[i].Kind
}
