package runtime

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/vad"
)

// frameLog is an output sink that remembers when each frame left.
type frameLog struct {
	mu     sync.Mutex
	frames []sentFrame
	loud   time.Duration // of frames with any sample beyond ±100
}

type sentFrame struct {
	at    time.Time
	epoch uint64
}

func (l *frameLog) WriteFrame(f media.Frame) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, sentFrame{at: time.Now(), epoch: f.Epoch})
	for _, v := range f.Samples {
		if v > 100 || v < -100 {
			l.loud += f.Duration()
			break
		}
	}
	return nil
}

// audible is how much of the output carried sound.
func (l *frameLog) audible() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loud
}

func (l *frameLog) sent() []sentFrame {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.frames)
}

// harness runs a session inside a synctest bubble and records its events.
type harness struct {
	t      *testing.T
	s      *Session
	model  *scripted.LLM
	voice  *scripted.TTS
	out    *frameLog
	start  time.Time
	cancel context.CancelFunc
	done   chan error

	mu     sync.Mutex
	events []events.Event
}

type setup struct {
	responses []scripted.Response
	tools     []*tools.Tool
	ttsOpts   []scripted.TTSOption
	opts      []Option
	stt       *scripted.STT
	textOnly  bool
	agent     func(*Agent) // last changes to the agent
}

func start(t *testing.T, su setup) *harness {
	t.Helper()
	voice, err := scripted.NewTTS(su.ttsOpts...)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, model: scripted.NewLLM(su.responses...), voice: voice, out: &frameLog{}, done: make(chan error, 1)}
	agent := &Agent{Name: "test", Instructions: "Be brief.", Tools: su.tools, Model: h.model, TTS: voice}
	if su.textOnly {
		agent.TTS = nil
	}
	if su.stt != nil {
		agent.STT = su.stt
	}
	if su.agent != nil {
		su.agent(agent)
	}
	opts := append([]Option{WithOutput(h.out, media.Rate16k), WithID("test")}, su.opts...)
	h.s, err = New(agent, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sub := h.s.Subscribe(1 << 16)
	go func() {
		for e := range sub.C() {
			h.mu.Lock()
			h.events = append(h.events, e)
			h.mu.Unlock()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.start = time.Now()
	go func() { h.done <- h.s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-h.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	synctest.Wait()
	return h
}

// find returns the first event of kind that satisfies ok (nil: any).
func (h *harness) find(kind events.Kind, ok func(events.Event) bool) (events.Event, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.events {
		if e.Kind == kind && (ok == nil || ok(e)) {
			return e, true
		}
	}
	return events.Event{}, false
}

func (h *harness) all(kind events.Kind) []events.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []events.Event
	for _, e := range h.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitFor lets virtual time pass until an event of kind (satisfying ok)
// has been published, at most limit of virtual time.
func (h *harness) waitFor(kind events.Kind, ok func(events.Event) bool, limit time.Duration) events.Event {
	h.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		synctest.Wait()
		if e, found := h.find(kind, ok); found {
			return e
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no %s event within %v; events:\n%s", kind, limit, h.timeline())
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) timeline() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, e := range h.events {
		b.WriteString(e.At.String() + " " + string(e.Kind))
		if e.Text != "" {
			b.WriteString(" " + e.Text)
		}
		if e.Tool != "" {
			b.WriteString(" " + e.Tool + " " + e.State)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (h *harness) context() llm.ChatContext {
	h.t.Helper()
	cc, err := h.s.ChatContext(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return cc
}

// speak pushes d of loud caller audio, a frame at a time, in real (virtual)
// time.
func (h *harness) speak(d time.Duration) { h.push(d, 0.3) }

// hush pushes d of near silence.
func (h *harness) hush(d time.Duration) { h.push(d, 0.0005) }

func (h *harness) push(d time.Duration, level float64) {
	h.t.Helper()
	n := media.SamplesFor(media.Rate16k, 20*time.Millisecond)
	buf := make([]int16, n)
	for at := time.Duration(0); at < d; at += 20 * time.Millisecond {
		for i := range buf {
			// A 440 Hz tone: speech-like energy for the detector.
			buf[i] = int16(level * math.MaxInt16 * math.Sin(2*math.Pi*440*float64(i)/float64(media.Rate16k)))
		}
		if err := h.s.PushAudio(context.Background(), media.Frame{Samples: buf, SampleRate: media.Rate16k}); err != nil {
			h.t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lastAssistant(cc llm.ChatContext) (llm.Item, bool) {
	for i := len(cc.Items) - 1; i >= 0; i-- {
		if it := cc.Items[i]; it.Kind == llm.KindMessage && it.Role == llm.RoleAssistant {
			return it, true
		}
	}
	return llm.Item{}, false
}

const greeting = "Welcome to the bistro where every table has a view of the old harbour and the lights"

// Barge-in during playout: the old epoch's audio stops within one frame of
// the decision, and the interrupted message holds exactly the played words
// (KNOWN_FAILURES C1).
//
// By default the output pauses on suspicion and the barge-in is confirmed
// once the caller's speech outlives the echo; with NoResume it is confirmed
// at once. Either way no audio of the old epoch leaves more than one frame
// after the decision that silenced it, and the context holds what played.
func TestBargeInStopsPlayoutAndKeepsPlayedWords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input engine.InputConfig
		// pauses: the output stops at the suspicion, before the verdict.
		pauses bool
	}{
		{"pause and listen (default)", engine.InputConfig{}, true},
		{"confirmed at once", engine.InputConfig{BargeIn: vad.ArbiterConfig{NoResume: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { testBargeInStopsPlayout(t, tc.input, tc.pauses) })
	}
}

func testBargeInStopsPlayout(t *testing.T, input engine.InputConfig, pauses bool) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{responses: []scripted.Response{{TTFB: 200 * time.Millisecond, Text: greeting}},
			opts: []Option{engine.WithInput(input)}})
		if err := h.s.GenerateReply(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		h.hush(300 * time.Millisecond)
		var cut events.Event
		for {
			h.speak(20 * time.Millisecond)
			if e, ok := h.find(events.TurnInterrupted, nil); ok {
				cut = e
				break
			}
			if time.Since(h.start) > 5*time.Second {
				t.Fatalf("no barge-in:\n%s", h.timeline())
			}
		}
		time.Sleep(200 * time.Millisecond)

		frames := h.out.sent()
		var first, last time.Time
		for _, f := range frames {
			if f.epoch != cut.Epoch {
				continue
			}
			if first.IsZero() {
				first = f.at
			}
			last = f.at
		}
		if first.IsZero() {
			t.Fatal("the greeting never played")
		}
		silenced := cut
		if sus, ok := h.find(events.BargeInSuspected, nil); ok != pauses {
			t.Fatalf("barge_in_suspected seen: %v, want %v:\n%s", ok, pauses, h.timeline())
		} else if ok {
			silenced = sus
		}
		t.Logf("last old-epoch frame left %v after the decision that silenced it, %v after the confirmation", last.Sub(silenced.Time), last.Sub(cut.Time))
		if late := last.Sub(silenced.Time); late > 20*time.Millisecond {
			t.Errorf("old-epoch audio left %v after the output was told to stop; want within one frame (20ms)", late)
		}
		if late := last.Sub(cut.Time); late > 20*time.Millisecond {
			t.Errorf("old-epoch audio left %v after the barge-in was confirmed; want within one frame (20ms)", late)
		}

		tr, ok := h.find(events.PlayoutTruncate, nil)
		if !ok {
			t.Fatalf("no playout_truncated event:\n%s", h.timeline())
		}
		heard := last.Sub(first) + 20*time.Millisecond // each frame is heard in full
		if d := tr.Played - heard; d < -20*time.Millisecond || d > 20*time.Millisecond {
			t.Errorf("playout clock says %v played, frames say %v", tr.Played, heard)
		}
		// 2.5 words per second: word i starts at i×400ms of audio.
		words := strings.Fields(greeting)
		n := int((tr.Played + 400*time.Millisecond - 1) / (400 * time.Millisecond))
		want := strings.Join(words[:n], " ")
		msg, ok := lastAssistant(h.context())
		if !ok {
			t.Fatal("no assistant message in context")
		}
		if msg.Text != want || !msg.Interrupted {
			t.Errorf("assistant message = %q (interrupted %v); want %q interrupted (played %v)", msg.Text, msg.Interrupted, want, tr.Played)
		}
		t.Logf("played %v: context holds %q (interrupted %v)", tr.Played, msg.Text, msg.Interrupted)
		if n == 0 || n >= len(words) {
			t.Errorf("cut after %d of %d words: the test should cut mid-sentence", n, len(words))
		}
	})
}

type lookupArgs struct {
	Query string `json:"query"`
}

// Injected input during a tool preamble: the tool's playout wait returns an
// interruption at once, the tool ends with an error result, and the input is
// answered as a new turn within 50 ms of virtual time (KNOWN_FAILURES B3).
func TestInjectDuringPreambleIsAnsweredAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu       sync.Mutex
			waitErr  error
			waitedAt time.Time
		)
		lookup := tools.MustNew("lookup", "Look something up.", func(ctx context.Context, a lookupArgs) (string, error) {
			err := tools.WaitPlayout(ctx)
			mu.Lock()
			waitErr, waitedAt = err, time.Now()
			mu.Unlock()
			if err != nil {
				return "", err
			}
			return "found it", nil
		}, tools.WithEffect(tools.Read))
		h := start(t, setup{
			tools: []*tools.Tool{lookup},
			responses: []scripted.Response{
				{TTFB: 100 * time.Millisecond, Text: "Let me look that up for you right now.",
					ToolCalls: []scripted.Call{{ID: "c1", Name: "lookup", Args: lookupArgs{Query: "hours"}}}},
				{TTFB: 100 * time.Millisecond, Text: "Sure, cancelled."},
			},
			ttsOpts: []scripted.TTSOption{scripted.WithTTFB(300 * time.Millisecond)},
		})
		if err := h.s.Inject(context.Background(), "When do you open?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.ToolStarted, nil, 2*time.Second)
		time.Sleep(800 * time.Millisecond) // the preamble is playing
		injectedAt := time.Now()
		if err := h.s.Inject(context.Background(), "Cancel that."); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		mu.Lock()
		if !errors.Is(waitErr, ErrInterrupted) {
			t.Errorf("WaitPlayout returned %v; want ErrInterrupted", waitErr)
		}
		if d := waitedAt.Sub(injectedAt); d != 0 {
			t.Errorf("WaitPlayout returned %v after the injection; want at once", d)
		}
		mu.Unlock()

		sent := h.all(events.InferenceSent)
		if len(sent) != 2 {
			t.Fatalf("want 2 model requests, got %d:\n%s", len(sent), h.timeline())
		}
		t.Logf("injected input answered %v after the injection; playout wait returned %v after it", sent[1].Time.Sub(injectedAt), waitedAt.Sub(injectedAt))
		if d := sent[1].Time.Sub(injectedAt); d >= 50*time.Millisecond {
			t.Errorf("injected input answered %v later; want < 50ms", d)
		}
		term := h.waitFor(events.ToolTerminal, nil, time.Second)
		if term.State != string(tools.StateCancelled) {
			t.Errorf("lookup ended %s; want cancelled (interrupted)", term.State)
		}
		h.waitFor(events.Idle, nil, 10*time.Second)
		if errs := h.all(events.ProviderError); len(errs) > 0 || len(h.all(events.InferenceSent)) != 2 {
			t.Errorf("want exactly the two answers and no errors:\n%s", h.timeline())
		}
		cc := h.context()
		results := 0
		for _, it := range cc.Items {
			if it.Kind == llm.KindToolResult {
				results++
				if !it.IsError || !strings.Contains(it.Output, "interrupted") {
					t.Errorf("lookup result = %q (error %v); want an interruption error", it.Output, it.IsError)
				}
			}
		}
		if results != 1 {
			t.Errorf("want exactly one result for the call, got %d:\n%s", results, cc)
		}
		// The second request carried the running call with a provisional
		// output, as providers require.
		reqs := h.model.Requests()
		if got := reqs[1].Context.Items; !hasResultFor(got, "c1") {
			t.Errorf("second request lacks an output for c1:\n%s", reqs[1].Context)
		}
	})
}

func hasResultFor(items []llm.Item, id string) bool {
	for _, it := range items {
		if it.Kind == llm.KindToolResult && it.CallID == id {
			return true
		}
	}
	return false
}

// New input never waits for a running tool (KNOWN_FAILURES B4): it is
// answered at once; the tool finishes under its own policy and its result
// is committed and answered once the floor is free.
func TestNewInputDoesNotWaitForRunningTool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := tools.MustNew("slow_report", "A slow read.", func(ctx context.Context, a lookupArgs) (string, error) {
			select {
			case <-time.After(4 * time.Second):
				return "report ready", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}, tools.WithEffect(tools.Read))
		h := start(t, setup{
			tools: []*tools.Tool{slow},
			responses: []scripted.Response{
				{TTFB: 100 * time.Millisecond, Text: "One sec.", ToolCalls: []scripted.Call{{ID: "r1", Name: "slow_report", Args: lookupArgs{Query: "q"}}}},
				{TTFB: 100 * time.Millisecond, Text: "It is sunny."},
				{TTFB: 100 * time.Millisecond, Text: "Your report is ready."},
			},
		})
		if err := h.s.Inject(context.Background(), "Get my report."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.PlayoutDone, nil, 3*time.Second)
		injectedAt := time.Now()
		if err := h.s.Inject(context.Background(), "And the weather?"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		sent := h.all(events.InferenceSent)
		if len(sent) != 2 || sent[1].Time.Sub(injectedAt) != 0 {
			t.Fatalf("new input not answered at once:\n%s", h.timeline())
		}
		term := h.waitFor(events.ToolTerminal, nil, 6*time.Second)
		if term.State != string(tools.StateSucceeded) {
			t.Errorf("slow_report ended %s; want succeeded", term.State)
		}
		h.waitFor(events.Idle, func(e events.Event) bool { return e.Time.After(term.Time) }, 10*time.Second)
		reqs := h.model.Requests()
		if len(reqs) != 3 {
			t.Fatalf("want 3 model requests (input, new input, late result), got %d:\n%s", len(reqs), h.timeline())
		}
		found := false
		for _, it := range reqs[2].Context.Items {
			found = found || (it.Kind == llm.KindToolResult && it.Output == `report ready`)
		}
		if !found {
			t.Errorf("the late result never reached the model:\n%s", reqs[2].Context)
		}
	})
}

// A synthesiser that completes with no audio does not hang the turn
// (KNOWN_FAILURES B2).
func TestZeroAudioSpeechDoesNotHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{
			responses: []scripted.Response{{TTFB: 100 * time.Millisecond, Text: "Hello there."}},
			ttsOpts:   []scripted.TTSOption{scripted.WithZeroAudio(), scripted.WithTTFB(300 * time.Millisecond)},
		})
		if err := h.s.Inject(context.Background(), "Hi"); err != nil {
			t.Fatal(err)
		}
		done := h.waitFor(events.PlayoutDone, nil, 2*time.Second)
		if done.Text != "" {
			t.Errorf("nothing was played, but playout reports %q", done.Text)
		}
		h.waitFor(events.TurnSettled, nil, time.Second)
		h.waitFor(events.Idle, nil, time.Second)
		if msg, ok := lastAssistant(h.context()); ok {
			t.Errorf("context claims the agent said %q though nothing played", msg.Text)
		}
	})
}

type hangArgs struct{}

// A tool that ignores its context is abandoned at its deadline as
// timed_out, and the session goes on (KNOWN_FAILURES B6).
func TestHangingToolTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		hang := tools.MustNew("hang", "Never returns.", func(ctx context.Context, _ hangArgs) (string, error) {
			<-release // ignores ctx on purpose
			return "", nil
		}, tools.WithEffect(tools.Read), tools.WithTimeout(2*time.Second))
		h := start(t, setup{
			tools: []*tools.Tool{hang},
			responses: []scripted.Response{
				{Text: "Checking.", ToolCalls: []scripted.Call{{Name: "hang"}}},
				{Text: "Sorry, that took too long."},
			},
		})
		if err := h.s.Inject(context.Background(), "Check."); err != nil {
			t.Fatal(err)
		}
		started := h.waitFor(events.ToolStarted, nil, time.Second)
		term := h.waitFor(events.ToolTerminal, nil, 3*time.Second)
		if term.State != string(tools.StateTimedOut) || term.Time.Sub(started.Time) != 2*time.Second {
			t.Errorf("tool ended %s after %v; want timed_out after 2s", term.State, term.Time.Sub(started.Time))
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text == "Sorry, that took too long." }, 5*time.Second)
	})
}

// A body that heeds its context ends at its deadline too: the model is
// told once that the call timed out, never again as a "late outcome" of
// the same timeout, whichever of the deadline and the body's return the
// runner sees first.
func TestToolStoppedByItsDeadlineIsReportedOnce(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			slow := tools.MustNew("slow", "Takes its time.", func(ctx context.Context, _ hangArgs) (string, error) {
				<-ctx.Done()
				return "", ctx.Err()
			}, tools.WithEffect(tools.Read), tools.WithTimeout(2*time.Second))
			h := start(t, setup{
				tools: []*tools.Tool{slow},
				responses: []scripted.Response{
					{Text: "Checking.", ToolCalls: []scripted.Call{{Name: "slow"}}},
					{Text: "Sorry, that took too long."},
				},
			})
			if err := h.s.Inject(context.Background(), "Check."); err != nil {
				t.Fatal(err)
			}
			h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text == "Sorry, that took too long." }, 5*time.Second)
			h.waitFor(events.Idle, nil, 5*time.Second)
			synctest.Wait()
			if late := h.all(events.ToolLateOutcome); len(late) > 0 {
				t.Fatalf("the timeout was reported again as a late outcome: %+v", late[0])
			}
		})
	}
}

type bookArgs struct {
	Party int    `json:"party"`
	Time  string `json:"time"`
}

// Arguments the model gets wrong become an error result the model sees; the
// tool body never runs.
func TestInvalidArgumentsBecomeErrorResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		book := tools.MustNew("book_table", "Book.", func(ctx context.Context, a bookArgs) (string, error) {
			runs.Add(1)
			return "booked", nil
		})
		h := start(t, setup{
			tools: []*tools.Tool{book},
			responses: []scripted.Response{
				{Text: "Booking.", ToolCalls: []scripted.Call{{ID: "b1", Name: "book_table", Args: `{"party":"two"}`}}},
				{Text: "Let me fix that."},
			},
		})
		if err := h.s.Inject(context.Background(), "Book for two."); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.Idle, nil, 5*time.Second)
		if n := runs.Load(); n != 0 {
			t.Errorf("tool body ran %d times on invalid arguments", n)
		}
		reqs := h.model.Requests()
		if len(reqs) != 2 {
			t.Fatalf("want a follow-up request with the error, got %d requests", len(reqs))
		}
		var res llm.Item
		for _, it := range reqs[1].Context.Items {
			if it.Kind == llm.KindToolResult {
				res = it
			}
		}
		if !res.IsError || !strings.Contains(res.Output, "party") {
			t.Errorf("model saw %q (error %v); want an error naming the bad field", res.Output, res.IsError)
		}
	})
}

// Synthesis starts on the first phrase while the model is still writing.
func TestSpeechStartsBeforeModelFinishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{responses: []scripted.Response{{
			TTFB: 100 * time.Millisecond, TokensPerSecond: 5,
			Text: "Hello there. This second sentence takes the model a good while to write out.",
		}}})
		if err := h.s.Inject(context.Background(), "Hi"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
		synctest.Wait()
		if got := h.voice.Texts(); len(got) != 1 || got[0] != "Hello there." {
			t.Errorf("synthesis requests after the first sentence = %q; want just the first sentence", got)
		}
		if len(h.out.sent()) == 0 {
			t.Error("no audio played while the model was still writing")
		}
		h.waitFor(events.PlayoutDone, nil, 20*time.Second)
	})
}

// A spoken user turn ends after the configured silence, is committed with
// the final transcript, and is answered.
func TestSpokenTurnEndsAfterSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := scripted.NewSTT(scripted.WithLatency(100 * time.Millisecond))
		rec.Say("book a table for two")
		h := start(t, setup{
			stt:       rec,
			opts:      []Option{WithEndpointing(400 * time.Millisecond)},
			responses: []scripted.Response{{Text: "For what time?"}},
		})
		h.hush(200 * time.Millisecond)
		h.speak(600 * time.Millisecond)
		h.hush(1500 * time.Millisecond)
		stopped := h.waitFor(events.SpeechStopped, nil, time.Second)
		turn := h.waitFor(events.UserTurn, nil, time.Second)
		if turn.Text != "book a table for two" {
			t.Errorf("user turn = %q", turn.Text)
		}
		if d := turn.Time.Sub(stopped.Time); d != 400*time.Millisecond {
			t.Errorf("user turn ended %v after speech stopped; want the 400ms endpointing", d)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text == "For what time?" }, 5*time.Second)
	})
}

// A model that accepts the request and goes silent is given up on after
// the stall timeout: the turn ends with a provider error instead of holding
// the floor forever. A model error mid-stream keeps what was said.
func TestModelFailuresEndTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{
			opts: []Option{engine.WithStallTimeout(3 * time.Second)},
			responses: []scripted.Response{
				{Hang: true},
				{Text: "Hello there my friend.", Err: errors.New("upstream 500"), ErrAfter: 2},
			},
		})
		if err := h.s.Inject(context.Background(), "Hi"); err != nil {
			t.Fatal(err)
		}
		sent := h.waitFor(events.InferenceSent, nil, time.Second)
		failed := h.waitFor(events.ProviderError, nil, 5*time.Second)
		if d := failed.Time.Sub(sent.Time); d != 3*time.Second || !strings.Contains(failed.Error, "stalled") {
			t.Errorf("stalled model reported after %v as %q; want after 3s, naming the stall", d, failed.Error)
		}
		// The caller is not left in silence.
		sorry := h.waitFor(events.PlayoutDone, nil, 10*time.Second)
		if sorry.Text != DefaultApology {
			t.Errorf("after a model that said nothing the agent played %q; want the apology", sorry.Text)
		}
		h.waitFor(events.Idle, nil, time.Second)

		if err := h.s.Inject(context.Background(), "Hello?"); err != nil {
			t.Fatal(err)
		}
		h.waitFor(events.ProviderError, func(e events.Event) bool { return strings.Contains(e.Error, "upstream 500") }, 5*time.Second)
		done := h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text != "" && e.Text != DefaultApology }, 5*time.Second)
		if done.Text != "Hello there" {
			t.Errorf("played %q; want the two words the model sent before failing", done.Text)
		}
		h.waitFor(events.Idle, func(e events.Event) bool { return e.Time.After(done.Time) || e.Time.Equal(done.Time) }, 5*time.Second)
	})
}

// A call to a tool the agent does not have becomes an error result naming
// the tools it does have.
func TestUnknownToolBecomesErrorResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{responses: []scripted.Response{
			{Text: "Sure.", ToolCalls: []scripted.Call{{ID: "x", Name: "launch_rockets"}}},
			{Text: "I can't do that."},
		}})
		if err := h.s.Inject(context.Background(), "Launch."); err != nil {
			t.Fatal(err)
		}
		term := h.waitFor(events.ToolTerminal, nil, time.Second)
		if term.State != string(tools.StateFailed) || !strings.Contains(term.Error, `no tool named "launch_rockets"`) {
			t.Errorf("terminal = %s %q", term.State, term.Error)
		}
		h.waitFor(events.PlayoutDone, func(e events.Event) bool { return e.Text == "I can't do that." }, 5*time.Second)
	})
}

// A final transcript the VAD never flagged as speech still becomes a user
// turn after the usual silence, instead of leaving the floor held forever.
func TestTranscriptWithoutSpeechStillEndsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, setup{
			opts:      []Option{WithEndpointing(400 * time.Millisecond)},
			responses: []scripted.Response{{Text: "Yes?"}},
		})
		at := time.Now()
		if err := h.s.send(context.Background(), engine.UserTranscript{Text: "hello", Final: true}); err != nil {
			t.Fatal(err)
		}
		turn := h.waitFor(events.UserTurn, nil, time.Second)
		if turn.Text != "hello" || turn.Time.Sub(at) != 400*time.Millisecond {
			t.Errorf("user turn %q after %v; want \"hello\" after 400ms", turn.Text, turn.Time.Sub(at))
		}
		h.waitFor(events.Idle, nil, 5*time.Second)
	})
}

// A key the caller presses on a phone is an event and, by default, a user
// turn the model answers ("press 1 to confirm"); with DTMFEventOnly it is
// only the event; anything but a engine.DTMF digit is refused.
func TestDTMFIsAnEventAndAUserTurn(t *testing.T) {
	for _, mode := range []DTMFMode{DTMFAsInput, DTMFEventOnly} {
		t.Run(map[DTMFMode]string{DTMFAsInput: "as input", DTMFEventOnly: "event only"}[mode], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := start(t, setup{
					responses: []scripted.Response{{TTFB: 100 * time.Millisecond, Text: "Confirmed."}},
					textOnly:  true,
					agent:     func(a *Agent) { a.DTMF = mode },
				})
				if err := h.s.PushDTMF(context.Background(), 'x'); err == nil {
					t.Error("PushDTMF('x') accepted")
				}
				if err := h.s.PushDTMF(context.Background(), '1'); err != nil {
					t.Fatal(err)
				}
				ev := h.waitFor(events.DTMF, nil, time.Second)
				if ev.Text != "1" {
					t.Errorf("dtmf event text %q; want 1", ev.Text)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				turns := h.all(events.UserTurn)
				switch mode {
				case DTMFAsInput:
					if len(turns) != 1 || turns[0].Text != "Pressed 1" {
						t.Fatalf("user turns %v; want one, Pressed 1\n%s", turns, h.timeline())
					}
					if _, ok := h.find(events.PlayoutDone, func(e events.Event) bool { return e.Text == "Confirmed." }); !ok {
						t.Errorf("the model's answer to the key press was not given\n%s", h.timeline())
					}
				case DTMFEventOnly:
					if len(turns) != 0 || len(h.model.Requests()) != 0 {
						t.Errorf("%d user turns, %d model requests; want none\n%s", len(turns), len(h.model.Requests()), h.timeline())
					}
				}
			})
		})
	}
}

// A final transcript without words, for a sound the turn waited on, ends
// the wait at once: no turn, and no dropped turn reported.
func TestFinalWithoutWordsIsNoTurnAndNoLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := scripted.NewSTT(scripted.WithLatency(900 * time.Millisecond))
		rec.Say("")
		h := start(t, setup{stt: rec, opts: []Option{WithEndpointing(400 * time.Millisecond)}})
		h.hush(200 * time.Millisecond)
		h.speak(600 * time.Millisecond)
		h.hush(4 * time.Second)
		ign := h.waitFor(events.TranscriptIgnored, func(e events.Event) bool { return e.Reason == engine.NoWords }, time.Second)
		stopped := h.waitFor(events.SpeechStopped, nil, time.Second)
		if d := ign.Time.Sub(stopped.Time); d > time.Second {
			t.Errorf("the wait ended %v after the caller stopped; want when the empty final came (0.9s)", d)
		}
		if e, ok := h.find(events.ProviderError, nil); ok {
			t.Errorf("an empty final reported as an error: %+v", e)
		}
		if e, ok := h.find(events.UserTurn, nil); ok {
			t.Errorf("an empty final made a turn: %+v", e)
		}
	})
}

// A recogniser that does not answer within the transcript timeout loses
// the caller's turn, and the session says so with a reason an operator can
// count.
func TestLateFinalIsReportedAsADroppedTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := scripted.NewSTT(scripted.WithLatency(5 * time.Second))
		rec.Say("book a table for two")
		h := start(t, setup{stt: rec, opts: []Option{WithEndpointing(400 * time.Millisecond), engine.WithTranscriptTimeout(2 * time.Second)}})
		h.hush(200 * time.Millisecond)
		h.speak(600 * time.Millisecond)
		h.hush(3 * time.Second)
		e := h.waitFor(events.ProviderError, nil, time.Second)
		if e.Provider != "stt" || e.Reason != engine.TurnDropped || !strings.Contains(e.Error, "2s") {
			t.Errorf("provider error %+v; want stt, reason %q, naming the 2s timeout", e, engine.TurnDropped)
		}
	})
}

// Frames a recogniser that fell behind refuses are counted: the operator
// sees how much of the caller went unheard.
func TestFramesTheRecogniserRefusesAreCountedUnheard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &refusingSTT{STT: scripted.NewSTT()}
		h := start(t, setup{stt: rec.STT, agent: func(a *Agent) { a.STT = rec }})
		h.speak(400 * time.Millisecond)
		if n := h.s.UnheardFrames(); n != 0 {
			t.Errorf("%d frames unheard while the recogniser kept up; want 0", n)
		}
		rec.refuse.Store(true)
		h.speak(400 * time.Millisecond)
		if n := h.s.UnheardFrames(); n != 20 {
			t.Errorf("%d frames of 400 ms counted unheard while the recogniser refused them; want 20", n)
		}
	})
}

// refusingSTT is a recogniser whose streams refuse frames while refuse is
// set, as one that has fallen behind does.
type refusingSTT struct {
	*scripted.STT
	refuse atomic.Bool
}

func (r *refusingSTT) Stream(ctx context.Context, rate int) (stt.Stream, error) {
	st, err := r.STT.Stream(ctx, rate)
	if err != nil {
		return nil, err
	}
	return refusingStream{Stream: st, refuse: &r.refuse}, nil
}

type refusingStream struct {
	stt.Stream
	refuse *atomic.Bool
}

func (s refusingStream) Write(f media.Frame) error {
	if s.refuse.Load() {
		return errors.New("decoder is falling behind")
	}
	return s.Stream.Write(f)
}

// A short answer said as the agent's question ends ("Shall I book it?"
// "Yes.") begins in the echo tail of the agent's last words, but the
// agent's turn is over: it is the caller's turn, not a backchannel.
func TestYesRightAfterTheAgentsQuestionIsATurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := scripted.NewSTT(scripted.WithLatency(100 * time.Millisecond))
		rec.Say("yes")
		h := start(t, setup{
			stt:       rec,
			opts:      []Option{WithEndpointing(400 * time.Millisecond)},
			responses: []scripted.Response{{Text: "Shall I book it?"}, {Text: "Booked."}},
		})
		if err := h.s.Inject(context.Background(), "a table for two"); err != nil {
			t.Fatal(err)
		}
		for {
			h.hush(20 * time.Millisecond)
			if _, ok := h.find(events.PlayoutDone, nil); ok {
				break
			}
		}
		h.speak(300 * time.Millisecond)
		h.hush(2 * time.Second)
		turn := h.waitFor(events.UserTurn, func(e events.Event) bool { return e.Reason == "speech" }, time.Second)
		if turn.Text != "yes" {
			t.Errorf("the caller's answer made the turn %q; want %q", turn.Text, "yes")
		}
	})
}
