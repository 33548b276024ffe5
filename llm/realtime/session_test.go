package realtime_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
)

// A whole call on the Realtime backend with Holdline in the media path:
// the caller's audio goes through the session's detector and arbiter to
// the recogniser, the model's audio is played by the session, and a
// barge-in decided by the arbiter truncates the server's copy of the
// answer at the milliseconds the playout clock says were played.
//
// Audio is fed at its real pace, as a transport would: the server is a real
// websocket peer, so the session cannot run on a virtual clock.
func TestCallWithBargeInTruncatesAtThePlayoutClock(t *testing.T) {
	srv := openaitest.New(scriptedAnswers(
		"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen",
		"Sure, stopping.",
	))
	defer srv.Close()
	srv.SetRealtimeTranscriber(func(_ []int16, n int) string {
		return []string{"", "Count to fifteen.", "Stop there."}[min(n, 2)]
	})
	c := newClient(t, srv)
	agent := &runtime.Agent{Name: "counter", Model: c, STT: c.Recognizer()}
	sess, err := runtime.New(agent,
		runtime.WithOutput(media.SinkFunc(func(media.Frame) error { return nil }), media.Rate16k),
		engine.WithInput(engine.InputConfig{Rate: media.Rate16k, NoEchoCancellation: true}))
	if err != nil {
		t.Fatal(err)
	}
	sub := sess.Subscribe(1 << 14)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sess.Run(ctx) }()

	var (
		mu  sync.Mutex
		got []events.Event
	)
	seen := make(chan struct{}, 1)
	go func() {
		for e := range sub.C() {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
			select {
			case seen <- struct{}{}:
			default:
			}
		}
	}()
	find := func(kind events.Kind) (events.Event, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range got {
			if e.Kind == kind {
				return e, true
			}
		}
		return events.Event{}, false
	}
	waitFor := func(kind events.Kind) events.Event {
		t.Helper()
		for {
			if e, ok := find(kind); ok {
				return e
			}
			select {
			case <-seen:
			case <-ctx.Done():
				mu.Lock()
				defer mu.Unlock()
				var b strings.Builder
				for _, e := range got {
					b.WriteString(string(e.Kind) + " " + e.Text + " " + e.Error + "\n")
				}
				var sb strings.Builder
				for _, e := range srv.RealtimeEvents() {
					if e.Type != "input_audio_buffer.append" {
						sb.WriteString(string(e.Raw) + "\n")
					}
				}
				t.Fatalf("no %s event; session events:\n%s\nclient events:\n%s", kind, b.String(), sb.String())
			}
		}
	}
	frame := make([]int16, 320)
	push := func(d time.Duration, level float64) {
		t.Helper()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for at := time.Duration(0); at < d; at += 20 * time.Millisecond {
			for i := range frame {
				frame[i] = int16(level * math.MaxInt16 * math.Sin(2*math.Pi*440*float64(i)/media.Rate16k))
			}
			if err := sess.PushAudio(ctx, media.Frame{Samples: frame, SampleRate: media.Rate16k}); err != nil {
				t.Fatal(err)
			}
			<-tick.C
		}
	}
	waitFor(events.SessionStarted)
	push(200*time.Millisecond, 0.0005) // the line is quiet before the caller speaks
	push(600*time.Millisecond, 0.3)
	push(800*time.Millisecond, 0.0005)
	select {
	case err := <-done:
		t.Fatalf("session ended: %v", err)
	default:
	}
	waitFor(events.TurnStarted)
	for {
		if _, ok := find(events.PlayoutDone); ok {
			t.Fatal("the answer played out before the caller could cut in")
		}
		cp, err := sess.NowPlaying(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(strings.Fields(cp.Text)) >= 3 {
			break
		}
		push(20*time.Millisecond, 0.0005)
	}
	push(600*time.Millisecond, 0.3) // the caller cuts in
	push(800*time.Millisecond, 0.0005)
	cut := waitFor(events.PlayoutTruncate)
	waitFor(events.BargeInConfirmed)
	for {
		if n := len(srv.RealtimeEvents()); n > 0 && len(eventsOf(srv, "conversation.item.truncate")) > 0 {
			break
		}
		select {
		case <-seen:
		case <-ctx.Done():
			t.Fatalf("no truncate sent; events: %v", srv.RealtimeEvents())
		}
	}
	tr := eventsOf(srv, "conversation.item.truncate")[0]
	if ms := tr["audio_end_ms"].(float64); ms != float64(cut.Played.Milliseconds()) {
		t.Errorf("truncated at %v ms; the playout clock said %v were played", ms, cut.Played)
	}
	conv := srv.RealtimeConversation()
	var answer openaitest.RealtimeItem
	for _, it := range conv {
		if it.Role == "assistant" && it.Truncated {
			answer = it
		}
	}
	if !answer.Truncated || !strings.HasPrefix("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen", answer.Text) {
		t.Errorf("server's answer after the cut = %+v", answer)
	}
	heard := strings.Fields(cut.Text)
	if len(heard) < 3 || len(heard) > 14 {
		t.Errorf("context says %q was heard", cut.Text)
	}
	noViolations(t, srv)
	cancel()
	<-done
}

// scriptedAnswers is a brain that answers with each text in turn.
func scriptedAnswers(texts ...string) llm.Model {
	var rs []scripted.Response
	for _, t := range texts {
		rs = append(rs, say(t))
	}
	return scripted.NewLLM(rs...)
}
