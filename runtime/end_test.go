package runtime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

// hangups records what a session's owner is told (engine.WithHangup).
type hangups struct {
	mu    sync.Mutex
	calls []string
	at    []time.Time
}

func (h *hangups) option(name string) Option {
	return engine.WithHangup(func(reason string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls = append(h.calls, name+": "+reason)
		h.at = append(h.at, time.Now())
	})
}

func (h *hangups) got() ([]string, []time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls), slices.Clone(h.at)
}

// End stops the session: Run returns nil, session_ended carries the
// reason, and every owner is told once, in order, before Run returns. A
// session whose ctx ended tells no one. After the end, End and Ask say
// the session is closed.
func TestEndStopsTheSessionAndTellsItsOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var told hangups
		s, err := New(&Agent{Name: "a", Model: scripted.NewLLM(scripted.Response{Text: "Hello."})},
			told.option("host"), told.option("app"))
		if err != nil {
			t.Fatal(err)
		}
		sub := s.Subscribe(0)
		ran := make(chan error, 1)
		go func() { ran <- s.Run(context.Background()) }()
		if _, err := s.Ask(context.Background(), "Hi"); err != nil {
			t.Fatal(err)
		}
		if err := s.End(context.Background(), "the caller is done"); err != nil {
			t.Fatalf("End = %v", err)
		}
		if err := <-ran; err != nil {
			t.Fatalf("Run after End = %v; want nil", err)
		}
		if got, _ := told.got(); !slices.Equal(got, []string{"host: the caller is done", "app: the caller is done"}) {
			t.Errorf("owners told %q; want the host then the app, once each, with the reason", got)
		}
		var last events.Event
		for e := range sub.C() {
			last = e
		}
		if last.Kind != events.SessionEnded || last.Reason != "the caller is done" {
			t.Errorf("last event %s %q; want session_ended with the reason", last.Kind, last.Reason)
		}
		if err := s.End(context.Background(), "again"); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("End after the end = %v; want ErrSessionClosed", err)
		}
		if _, err := s.Ask(context.Background(), "Hello?"); !errors.Is(err, ErrSessionClosed) {
			t.Errorf("Ask after the end = %v; want ErrSessionClosed", err)
		}
		if got, _ := told.got(); len(got) != 2 {
			t.Errorf("owners told %q after a second End; want nothing more", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var told hangups
		s, err := New(&Agent{Name: "a", Model: scripted.NewLLM()}, told.option("host"))
		if err != nil {
			t.Fatal(err)
		}
		sub := s.Subscribe(0)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel) // the caller hung up
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := told.got(); len(got) != 0 {
			t.Errorf("owner told %q when its own ctx ended the session; want nothing", got)
		}
		var last events.Event
		for e := range sub.C() {
			last = e
		}
		if last.Kind != events.SessionEnded || last.Reason != "" {
			t.Errorf("last event %s %q; want session_ended without a reason", last.Kind, last.Reason)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var told hangups
		s, err := New(&Agent{Name: "a", Model: scripted.NewLLM()}, told.option("host"))
		if err != nil {
			t.Fatal(err)
		}
		ran := make(chan error, 1)
		go func() { ran <- s.Run(context.Background()) }()
		if err := s.End(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		// The owners are told on Run's goroutine, before Run returns.
		if err := <-ran; err != nil {
			t.Fatalf("Run after End = %v; want nil", err)
		}
		if got, _ := told.got(); !slices.Equal(got, []string{"host: " + DefaultEndReason}) {
			t.Errorf("owner told %q for an End without a reason; want %q", got, DefaultEndReason)
		}
	})
	if err := engine.WithHangup(nil)(&engine.Settings{}); err == nil {
		t.Error("a nil hangup was accepted")
	}
}

const goodbye = "Thank you for calling the bistro, have a lovely evening, goodbye!"

// endCallSetup is an agent whose first answer says goodbye and hangs up.
func endCallSetup(told *hangups, more ...scripted.Response) setup {
	return setup{
		tools: []*tools.Tool{EndCallTool()},
		opts:  []Option{told.option("line")},
		responses: append([]scripted.Response{{TTFB: 100 * time.Millisecond, Text: goodbye,
			ToolCalls: []scripted.Call{{ID: "bye", Name: EndCallName, Args: map[string]string{"reason": "the caller said goodbye"}}}}},
			more...),
	}
}

// The end_call tool hangs up once the goodbye of its reply has played to
// the last word, and not a frame before; the model is not asked anything
// more, and the call is recorded as what ended the session.
func TestEndCallHangsUpAfterTheGoodbye(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var told hangups
		h := start(t, endCallSetup(&told))
		r, err := h.s.Ask(context.Background(), "That's all, thanks.")
		if !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("Ask answered by a hangup = %v; want ErrSessionClosed", err)
		}
		synctest.Wait()
		got, at := told.got()
		if !slices.Equal(got, []string{"line: the caller said goodbye"}) {
			t.Fatalf("line told %q; want one hangup with the model's reason:\n%s", got, h.timeline())
		}
		done, ok := h.find(events.PlayoutDone, nil)
		if !ok || done.Text != strings.Join(strings.Fields(goodbye), " ") {
			t.Fatalf("the goodbye did not play out (%v, %q):\n%s", ok, done.Text, h.timeline())
		}
		// 2.5 words a second: every word of the goodbye went down the
		// line before the hangup.
		want := time.Duration(len(strings.Fields(goodbye))) * 400 * time.Millisecond
		var played time.Duration
		var last time.Time
		for _, f := range h.out.sent() {
			if f.epoch == done.Epoch {
				played += 20 * time.Millisecond
				last = f.at
			}
		}
		if played < want {
			t.Errorf("%v of the goodbye's %v went down the line", played, want)
		}
		if last.After(at[0]) {
			t.Errorf("goodbye audio went out %v after the hangup", last.Sub(at[0]))
		}
		if d := at[0].Sub(done.Time); d < 0 || d > 20*time.Millisecond {
			t.Errorf("hung up %v after the goodbye played out; want at once after it", d)
		}
		ended, ok := h.find(events.SessionEnded, nil)
		if !ok || ended.Reason != "the caller said goodbye" || ended.Seq < done.Seq {
			t.Errorf("session_ended %v %q (seq %d, playout done %d); want it after the goodbye, with the reason", ok, ended.Reason, ended.Seq, done.Seq)
		}
		if n := len(h.all(events.InferenceSent)); n != 1 {
			t.Errorf("%d model requests; want only the one that said goodbye:\n%s", n, h.timeline())
		}
		if r.Heard != goodbye || r.Said != goodbye {
			t.Errorf("reply heard %q, said %q; want the whole goodbye", r.Heard, r.Said)
		}
		if len(r.Calls) != 1 || r.Calls[0].Tool != EndCallName || r.Calls[0].State != tools.StateSucceeded {
			t.Errorf("reply's calls = %+v; want end_call succeeded", r.Calls)
		}
		if term, ok := h.find(events.ToolTerminal, nil); !ok || term.State != string(tools.StateSucceeded) || term.Seq > ended.Seq {
			t.Errorf("end_call's terminal event %v %+v; want succeeded, before session_ended", ok, term)
		}
	})
}

// A caller who speaks over the goodbye keeps the call up: end_call never
// runs (it is recorded as not executed) and the agent answers them.
func TestBargeInDuringTheGoodbyeKeepsTheCallUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var told hangups
		rec := scripted.NewSTT()
		rec.Say("wait one more thing")
		su := endCallSetup(&told, scripted.Response{TTFB: 100 * time.Millisecond, Text: "Of course, what else?"})
		su.stt = rec
		h := start(t, su)
		replies := make(chan Reply, 1)
		go func() {
			r, err := h.s.Ask(context.Background(), "That's all, thanks.")
			if err != nil {
				t.Errorf("Ask = %v", err)
			}
			replies <- r
		}()
		time.Sleep(time.Second) // the goodbye is playing
		h.hush(300 * time.Millisecond)
		for {
			h.speak(20 * time.Millisecond)
			if _, ok := h.find(events.TurnInterrupted, nil); ok {
				break
			}
			if time.Since(h.start) > 5*time.Second {
				t.Fatalf("no barge-in:\n%s", h.timeline())
			}
		}
		h.speak(500 * time.Millisecond)
		var r Reply
		for r.Said == "" {
			select {
			case r = <-replies:
			default:
				h.hush(20 * time.Millisecond)
				if time.Since(h.start) > 20*time.Second {
					t.Fatalf("Ask did not return:\n%s", h.timeline())
				}
			}
		}
		synctest.Wait()
		if got, _ := told.got(); len(got) != 0 {
			t.Errorf("line told %q; want no hangup after the caller cut in", got)
		}
		if _, ok := h.find(events.SessionEnded, nil); ok {
			t.Errorf("the session ended:\n%s", h.timeline())
		}
		if len(r.Calls) != 1 || r.Calls[0].State != tools.StateCancelled || r.Calls[0].Ran {
			t.Errorf("reply's calls = %+v; want end_call cancelled without running", r.Calls)
		}
		if !r.Interrupted || !strings.HasSuffix(r.Heard, "Of course, what else?") || strings.Contains(r.Heard, "goodbye!") {
			t.Errorf("reply heard %q (interrupted %v); want the goodbye cut and the answer to the caller", r.Heard, r.Interrupted)
		}
		if _, err := h.s.ChatContext(context.Background()); err != nil {
			t.Errorf("the session does not answer: %v", err)
		}
	})
}

// end_call outside a session (a tool test, say) is an error, not a panic.
func TestEndCallOutsideASession(t *testing.T) {
	if _, err := EndCallTool().Run(context.Background(), []byte(`{}`)); !errors.Is(err, errNoSession) {
		t.Errorf("end_call without a session = %v; want errNoSession", err)
	}
}
