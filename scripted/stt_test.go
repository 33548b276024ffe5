package scripted

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

type timedTranscript struct {
	at time.Duration
	stt.Transcript
}

// collect reads s in the background until it ends.
func collect(s stt.Stream) (results func() ([]timedTranscript, error)) {
	start := time.Now()
	var (
		out  []timedTranscript
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			var tr stt.Transcript
			tr, err = s.Recv()
			if err != nil {
				return
			}
			out = append(out, timedTranscript{time.Since(start), tr})
		}
	}()
	return func() ([]timedTranscript, error) {
		<-done
		return out, err
	}
}

// speak writes d of 20 ms frames in real (fake) time.
func speak(t *testing.T, s stt.Stream, d time.Duration) {
	t.Helper()
	f := media.Frame{Samples: make([]int16, 320), SampleRate: 16000}
	for range d / (20 * time.Millisecond) {
		if err := s.Write(f); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newSTTStream(t *testing.T, r *STT) stt.Stream {
	t.Helper()
	s, err := r.Stream(t.Context(), 16000)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSTTUtterances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewSTT()
		r.Say("book a table")
		r.Say("for four")
		s := newSTTStream(t, r)
		results := collect(s)

		time.Sleep(100 * time.Millisecond) // silence, no audio written
		speak(t, s, time.Second)           // 100ms..1.1s
		s.EndOfSpeech()                    // final due at 1.25s
		time.Sleep(50 * time.Millisecond)
		speak(t, s, 500*time.Millisecond) // 1.15s..1.65s
		s.EndOfSpeech()                   // final due at 1.8s
		time.Sleep(time.Second)
		s.Close()

		got, err := results()
		if err != io.EOF {
			t.Fatalf("ended with %v, want io.EOF", err)
		}
		ms := time.Millisecond
		want := []timedTranscript{
			{100 * ms, stt.Transcript{Text: "book"}},
			{1150 * ms, stt.Transcript{Text: "for"}}, // before the final due after it
			{1250 * ms, stt.Transcript{Text: "book a table", Final: true}},
			{1800 * ms, stt.Transcript{Text: "for four", Final: true}},
		}
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("transcript %d: %v, want %v", i, got[i], want[i])
			}
		}
		if n := r.Frames(); n != 75 {
			t.Errorf("%d frames counted, want 75", n)
		}
	})
}

func TestSTTLatencyAndNoPartials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewSTT(WithLatency(400*time.Millisecond), WithPartials(false))
		r.Say("yes")
		s := newSTTStream(t, r)
		start := time.Now()
		speak(t, s, 200*time.Millisecond)
		s.EndOfSpeech()
		tr, err := s.Recv()
		if err != nil || tr != (stt.Transcript{Text: "yes", Final: true}) {
			t.Fatalf("got %v, %v", tr, err)
		}
		if d := time.Since(start); d != 600*time.Millisecond {
			t.Errorf("final at %v, want 200ms + 400ms latency", d)
		}
	})
}

func TestSTTNothingQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewSTT()
		s := newSTTStream(t, r)
		results := collect(s)
		speak(t, s, 300*time.Millisecond)
		s.EndOfSpeech()
		time.Sleep(time.Second)
		synctest.Wait()
		r.Say("late") // queued after the utterance ended: for the next one
		time.Sleep(time.Second)
		s.Close()
		got, err := results()
		if err != io.EOF || len(got) != 0 {
			t.Errorf("got %v then %v, want nothing then io.EOF", got, err)
		}

		// An explicitly empty utterance is delivered.
		r = NewSTT(WithLatency(0))
		r.Say("")
		s = newSTTStream(t, r)
		s.Write(media.Frame{Samples: make([]int16, 160), SampleRate: 16000})
		s.EndOfSpeech()
		if tr, err := s.Recv(); err != nil || tr != (stt.Transcript{Final: true}) {
			t.Errorf("got %v, %v; want an empty final", tr, err)
		}
	})
}

func TestSTTCloseDropsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewSTT()
		r.Say("first")
		r.Say("second")
		s := newSTTStream(t, r)
		s.EndOfSpeech()
		time.Sleep(200 * time.Millisecond) // "first" is due
		s.EndOfSpeech()                    // "second" is not yet
		s.Close()
		if tr, err := s.Recv(); err != nil || tr.Text != "first" {
			t.Fatalf("got %v, %v; want the final already due", tr, err)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Errorf("got %v, want io.EOF", err)
		}
		if err := s.Write(media.Frame{SampleRate: 16000}); !errors.Is(err, ErrClosed) {
			t.Errorf("Write after Close: %v", err)
		}
		if err := s.EndOfSpeech(); !errors.Is(err, ErrClosed) {
			t.Errorf("EndOfSpeech after Close: %v", err)
		}
	})
}

func TestSTTFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewSTT(WithSTTFailure(errBoom))
		r.Say("hello there")
		s := newSTTStream(t, r)
		results := collect(s)
		speak(t, s, 500*time.Millisecond)
		s.EndOfSpeech()
		got, err := results()
		if !errors.Is(err, errBoom) {
			t.Fatalf("ended with %v, want errBoom", err)
		}
		if len(got) != 1 || got[0].Text != "hello" || got[0].Final {
			t.Errorf("before the failure: %v, want only the partial", got)
		}
		if _, err := s.Recv(); !errors.Is(err, errBoom) {
			t.Errorf("failure not sticky: %v", err)
		}
	})
}

func TestSTTFailureTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewSTT(WithSTTFailure(errBoom), WithLatency(time.Second))
		s := newSTTStream(t, r)
		s.EndOfSpeech()
		start := time.Now()
		if _, err := s.Recv(); !errors.Is(err, errBoom) || time.Since(start) != time.Second {
			t.Errorf("got %v after %v, want errBoom after the 1s latency", err, time.Since(start))
		}
	})
}

func TestSTTContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewSTT()
		ctx, cancel := context.WithCancel(t.Context())
		s, _ := r.Stream(ctx, 8000)
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		if _, err := s.Recv(); !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
			t.Errorf("got %v after %v, want context.Canceled after 1s", err, time.Since(start))
		}
		if err := s.Write(media.Frame{SampleRate: 8000}); !errors.Is(err, context.Canceled) {
			t.Errorf("Write after cancel: %v", err)
		}
	})
}

func TestSTTRates(t *testing.T) {
	r := NewSTT()
	if _, err := r.Stream(context.Background(), 11025); !errors.Is(err, media.ErrUnsupportedRate) {
		t.Errorf("11025 Hz: %v", err)
	}
	s, err := r.Stream(context.Background(), 16000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(media.Frame{Samples: make([]int16, 80), SampleRate: 8000}); err == nil {
		t.Error("frame at the wrong rate accepted")
	}
	if r.Frames() != 0 {
		t.Error("rejected frame counted")
	}
}
