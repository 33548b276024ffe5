package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

type permanent struct{}

func (permanent) Error() string   { return "404" }
func (permanent) Temporary() bool { return false }

// An answer whose voice gives up on its second phrase: the phrase and every
// later one are reported unspoken, with the failure; what was queued before
// stays on the timeline.
func TestSynthesisGivesUp(t *testing.T) {
	s := NewSynthesis(1)
	boom := errors.New("boom")
	if !s.Say("One.") {
		t.Fatal("first phrase refused")
	}
	s.Queued(time.Second)
	if !s.Say("Two.") {
		t.Fatal("second phrase refused")
	}
	if wait, failover, ok := s.Failed("Two.", boom); wait != SpeechRetryBackoff || failover || !ok {
		t.Fatalf("first failure: wait %v failover %v ok %v, want a retry", wait, failover, ok)
	}
	if _, _, ok := s.Failed("Two.", boom); ok {
		t.Fatal("second failure on the only voice: want give up")
	}
	if s.Say("Three.") {
		t.Fatal("a phrase after the answer's speech failed was to be spoken")
	}
	done := s.Done(7)
	if done.Epoch != 7 || !errors.Is(done.Err, boom) || done.Unspoken != "Two. Three." {
		t.Fatalf("Done = %+v, want epoch 7, boom, %q", done, "Two. Three.")
	}
	if s.Offset() != time.Second {
		t.Fatalf("Offset = %v, want 1s", s.Offset())
	}
}

// A stalled voice, or one whose error says it is not temporary, is not
// asked again: the backup is.
func TestSynthesisSkipsHopelessRetry(t *testing.T) {
	for _, err := range []error{fmt.Errorf("tts: %w", ErrProviderStalled), fmt.Errorf("tts: %w", permanent{})} {
		s := NewSynthesis(2)
		s.Say("Hello.")
		if wait, failover, ok := s.Failed("Hello.", err); wait != 0 || !failover || !ok || s.Voice() != 1 {
			t.Errorf("%v: wait %v failover %v ok %v voice %d, want the backup at once", err, wait, failover, ok, s.Voice())
		}
	}
}

// A later failure of the answer's audio (the output refusing it) leaves
// the phrases after it unspoken, and the first failure is the one told.
func TestSynthesisFail(t *testing.T) {
	s := NewSynthesis(1)
	first, second := errors.New("first"), errors.New("second")
	s.Fail(first)
	s.Fail(second)
	s.Say("Lost.")
	if done := s.Done(1); done.Err != first || done.Unspoken != "Lost." {
		t.Fatalf("Done = %+v", done)
	}
}

func TestWordsFrom(t *testing.T) {
	got := WordsFrom(time.Second, []tts.WordTiming{{Word: "hi", Start: 0, End: 100 * time.Millisecond}})
	want := []tts.WordTiming{{Word: "hi", Start: time.Second, End: time.Second + 100*time.Millisecond}}
	if !slices.Equal(got, want) {
		t.Fatalf("WordsFrom = %v, want %v", got, want)
	}
}

// The text before a tool call is a whole phrase once the call begins, and
// a model that failed having said nothing apologises.
func TestAnswerText(t *testing.T) {
	var a AnswerText
	if got := a.Text("Let me check that for you"); len(got) != 0 {
		t.Fatalf("phrases before the call: %q", got)
	}
	if rest := a.ToolCall(); rest != "Let me check that for you" {
		t.Fatalf("ToolCall = %q", rest)
	}
	if rest := a.ToolCall(); rest != "" {
		t.Fatalf("second ToolCall = %q, want nothing", rest)
	}
	if rest, apologised := a.End(errors.New("late failure"), ""); rest != "" || apologised {
		t.Fatalf("End after speaking = %q, %v", rest, apologised)
	}

	var silent AnswerText
	if rest, apologised := silent.End(errors.New("down"), ""); rest != DefaultApology || !apologised {
		t.Fatalf("End of a silent failure = %q, %v", rest, apologised)
	}
	var own AnswerText
	if rest, _ := own.End(errors.New("down"), "One moment."); rest != "One moment." {
		t.Fatalf("End with the agent's apology = %q", rest)
	}
	var fine AnswerText
	if rest, apologised := fine.End(nil, ""); rest != "" || apologised {
		t.Fatalf("End of an empty answer = %q, %v", rest, apologised)
	}
}

// How a body's return is named, by the context it ran in.
func TestToolOutcomeOf(t *testing.T) {
	interrupted, cancel := context.WithCancelCause(context.Background())
	cancel(ErrCallInterrupted)
	expired, stop := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer stop()
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want tools.State
	}{
		{"returned", context.Background(), nil, tools.StateSucceeded},
		{"failed", context.Background(), errors.New("no table"), tools.StateFailed},
		{"heeded the interruption", interrupted, context.Canceled, tools.StateCancelled},
		{"failed though interrupted", interrupted, errors.New("no table"), tools.StateFailed},
		{"stopped by its deadline", expired, context.DeadlineExceeded, tools.StateTimedOut},
		{"its own deadline, not the call's", context.Background(), context.DeadlineExceeded, tools.StateFailed},
	}
	for _, c := range cases {
		if o := ToolOutcomeOf(c.ctx, "c1", "out", c.err); o.State != c.want || o.CallID != "c1" || !errors.Is(o.Err, c.err) {
			t.Errorf("%s: %+v, want state %s", c.name, o, c.want)
		}
	}
	if o := ToolTimedOut("c2", time.Second); o.State != tools.StateTimedOut || !errors.Is(o.Err, ErrWaitTimeout) {
		t.Errorf("ToolTimedOut = %+v", o)
	}
}
