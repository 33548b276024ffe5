package livekit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"
	lkproto "github.com/livekit/protocol/livekit"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/internal/livekittest"
	"github.com/holdline/holdline/livekit"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// testAgents makes booking agents on the offline demo model with a
// scripted recogniser the test tells what the caller said, and a tone
// voice.
type testAgents struct {
	// lines are queued on every new recogniser: what the caller says, an
	// utterance after another.
	lines []string

	mu   sync.Mutex
	stts []*scripted.STT
}

func (a *testAgents) newAgent(context.Context) (*runtime.Agent, func(), error) {
	voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(4))
	if err != nil {
		return nil, nil, err
	}
	rec := scripted.NewSTT()
	for _, l := range a.lines {
		rec.Say(l)
	}
	a.mu.Lock()
	a.stts = append(a.stts, rec)
	a.mu.Unlock()
	return booking.New(booking.NewRestaurant(8), booking.WithModel(booking.NewDemoModel()), booking.WithTTS(voice), booking.WithSTT(rec)), nil, nil
}

// last returns the recogniser of the agent made last.
func (a *testAgents) last() *scripted.STT {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stts[len(a.stts)-1]
}

// agentToken is what a LiveKit server's job assignment gives an agent: a
// token to join room as an agent participant.
func agentToken(t testing.TB, srv *livekittest.Server, room, identity string) string {
	t.Helper()
	tok, err := auth.NewAccessToken(srv.APIKey, srv.APISecret).
		SetIdentity(identity).
		SetKind(lkproto.ParticipantInfo_AGENT).
		SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: room, Agent: true, CanUpdateOwnMetadata: ptr(true)}).
		SetValidFor(10 * time.Minute).
		ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func ptr[T any](v T) *T { return &v }

// rig is a host serving rooms of one livekit-server.
type rig struct {
	srv    *livekittest.Server
	agents *testAgents
	host   *calls.Host
	tr     *livekit.Transport
}

func newRig(t *testing.T, opts ...livekit.Option) *rig {
	t.Helper()
	srv := livekittest.StartT(t)
	agents := &testAgents{}
	host, err := calls.New(agents.newAgent)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	return &rig{srv: srv, agents: agents, host: host, tr: livekit.NewTransport(host, opts...)}
}

// serving is a Serve running in the background.
type serving struct {
	done chan struct{} // closed when Serve returned
	err  error
}

// serve serves room's job in the background.
func (r *rig) serve(t *testing.T, ctx context.Context, room string) *serving {
	t.Helper()
	job := livekit.Job{ID: "AJ_" + room, Room: room, URL: r.srv.URL, Token: agentToken(t, r.srv, room, "agent-"+room)}
	s := &serving{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = r.tr.Serve(ctx, job)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return")
		}
	})
	return s
}

// call returns the host's one call.
func (r *rig) call(t *testing.T, ctx context.Context) *calls.Call {
	t.Helper()
	for {
		if l := r.host.List(); len(l) == 1 {
			if c := r.host.Lookup(l[0].ID); c != nil {
				return c
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("no call started")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func waitEvent(t *testing.T, ctx context.Context, c *calls.Call, what string, match func(events.Event) bool) events.Event {
	t.Helper()
	for {
		evs, wake, closed := c.Events(0)
		for _, e := range evs {
			if match(e) {
				return e
			}
		}
		if closed {
			t.Fatalf("the call ended before %s: %s", what, kinds(evs))
		}
		select {
		case <-wake:
		case <-ctx.Done():
			t.Fatalf("no %s: %s", what, kinds(evs))
		}
	}
}

func count(c *calls.Call, match func(events.Event) bool) int {
	evs, _, _ := c.Events(0)
	n := 0
	for _, e := range evs {
		if match(e) {
			n++
		}
	}
	return n
}

func kind(k events.Kind) func(events.Event) bool {
	return func(e events.Event) bool { return e.Kind == k }
}

func booked(e events.Event) bool { return e.Kind == events.ToolTerminal && e.Tool == "book_table" }

func kinds(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(string(e.Kind))
		if e.Text != "" {
			b.WriteString("(" + e.Text + ")")
		}
		b.WriteString(" ")
	}
	return b.String()
}

// lastLoud is when the agent's audio last sounded after onset, before a
// quiet of at least quiet.
func lastLoud(levels []rtctest.Level, onset time.Time, quiet time.Duration) time.Time {
	last := onset
	for _, l := range levels {
		if l.At.Before(onset) {
			continue
		}
		if l.RMS > rtctest.Loud {
			if l.At.Sub(last) > quiet {
				break
			}
			last = l.At
		}
	}
	return last
}

// A caller in a LiveKit room, as LiveKit's own clients are: the agent
// greets on its track, says its states on lk.agent.state, books once,
// stops its track when the caller talks over it, writes both sides'
// words on lk.transcription, takes typed input from lk.chat, and goes on
// with the same conversation when the caller leaves and joins again.
func TestCallerInALiveKitRoomTriedAsALiveKitClientWould(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	const room = "bistro"
	served := r.serve(t, ctx, room)

	c, err := livekittest.DialCaller(ctx, r.srv, room, "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	agentID := "agent-" + room
	start := time.Now()
	if err := c.Wait(ctx, "the greeting on the agent's track", func(c *livekittest.Caller) bool { return c.Heard(agentID, start) }); err != nil {
		t.Fatal(err)
	}
	hc := r.call(t, ctx)
	waitEvent(t, ctx, hc, "the greeting played", kind(events.PlayoutDone))

	// The caller asks for a table, out loud, in espeak-ng's voice.
	r.agents.last().Say("book a table for two at seven")
	c.Say(espeak48k(t, "Book a table for two at seven."))
	waitEvent(t, ctx, hc, "the booking", booked)
	said := waitEvent(t, ctx, hc, "the booking's answer", func(e events.Event) bool {
		return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "booked")
	})
	if err := c.Wait(ctx, "the answer's words on lk.transcription", func(c *livekittest.Caller) bool {
		return finalText(c, agentID, said.Text)
	}); err != nil {
		t.Fatalf("%v: %s", err, streams(c))
	}
	if err := c.Wait(ctx, "the caller's words on lk.transcription, under the caller's identity", func(c *livekittest.Caller) bool {
		return finalText(c, "caller", "book a table for two at seven")
	}); err != nil {
		t.Fatalf("%v: %s", err, streams(c))
	}

	// Typed input, then the caller talks over the long answer.
	c.SendChat("What times are available?")
	asked := waitEvent(t, ctx, hc, "the typed question", func(e events.Event) bool {
		return e.Kind == events.UserTurn && e.Text == "What times are available?"
	})
	turn := waitEvent(t, ctx, hc, "the answer playing", func(e events.Event) bool {
		return e.Kind == events.PlayoutStarted && e.Seq > asked.Seq
	})
	playing := time.Now()
	if err := c.Wait(ctx, "the answer's audio", func(c *livekittest.Caller) bool { return c.Heard(agentID, playing) }); err != nil {
		t.Fatal(err)
	}
	r.agents.last().Say("wait")
	c.Say(rtctest.Tone(600*time.Millisecond, 0.3))
	cut := waitEvent(t, ctx, hc, "the answer cut", func(e events.Event) bool {
		return e.Kind == events.PlayoutTruncate && e.Epoch == turn.Epoch
	})
	onsets := c.Onsets()
	onset := onsets[len(onsets)-1]
	stop := lastLoud(c.Levels(agentID), onset, 300*time.Millisecond)
	t.Logf("barge-in: the agent's track went quiet %v after the caller's onset", stop.Sub(onset).Round(time.Millisecond))
	if err := c.Wait(ctx, "the cut answer's segment ended at the words played", func(c *livekittest.Caller) bool {
		return finalText(c, agentID, cut.Text)
	}); err != nil {
		t.Fatalf("%v: %s", err, streams(c))
	}

	// lk.agent.state went through its states.
	seen := map[string]bool{}
	for _, s := range c.AgentStates() {
		if s.Identity == agentID {
			seen[s.State] = true
		}
	}
	for _, s := range []string{livekit.StateListening, livekit.StateThinking, livekit.StateSpeaking} {
		if !seen[s] {
			t.Errorf("lk.agent.state was never %q: %v", s, c.AgentStates())
		}
	}
	// Listening means the agent waits for the caller: never straight
	// into speaking (a filler, then the answer, is thinking between).
	var prev string
	for _, s := range c.AgentStates() {
		if s.Identity != agentID {
			continue
		}
		if prev == livekit.StateListening && s.State == livekit.StateSpeaking {
			t.Errorf("lk.agent.state went from listening to speaking: %v", c.AgentStates())
		}
		prev = s.State
	}

	// The caller's network changes: they leave and join again.
	c.Close()
	waitEvent(t, ctx, hc, "the connection lost", kind(events.TransportLost))
	back, err := livekittest.DialCaller(ctx, r.srv, room, "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	waitEvent(t, ctx, hc, "the connection restored", kind(events.TransportRestored))
	back.SendChat("Are you free at eight?")
	after := time.Now()
	waitEvent(t, ctx, hc, "the question after the return", func(e events.Event) bool {
		return e.Kind == events.UserTurn && e.Text == "Are you free at eight?"
	})
	if err := back.Wait(ctx, "the agent's voice after the return", func(c *livekittest.Caller) bool { return c.Heard(agentID, after) }); err != nil {
		t.Fatal(err)
	}
	if n := count(hc, booked); n != 1 {
		t.Errorf("book_table ran %d times; want once", n)
	}
	if n := count(hc, kind(events.SessionStarted)); n != 1 {
		t.Errorf("the session started %d times; want once", n)
	}

	// The agent hangs up: it leaves the room and Serve returns.
	if err := hc.Session().End(ctx, "the test is over"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-served.done:
		if served.err != nil {
			t.Errorf("Serve: %v", served.err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return after the call ended")
	}
}

// finalText says whether a finished lk.transcription stream under
// identity, marked final, holds text.
func finalText(c *livekittest.Caller, identity, text string) bool {
	for _, s := range c.Transcriptions() {
		if s.Sender == identity && s.Done && strings.TrimSpace(s.Text) == strings.TrimSpace(text) &&
			finalAttr(s) {
			return true
		}
	}
	return false
}

func finalAttr(s livekittest.TextStream) bool {
	return s.Attributes[livekit.AttrTranscriptionDone] == "true"
}

// A job whose room nobody joins ends with ErrNoCaller.
func TestAJobNobodyJoinsEndsWithNoCaller(t *testing.T) {
	r := newRig(t, livekit.WithCallerTimeout(2*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s := r.serve(t, ctx, "empty")
	select {
	case <-s.done:
		if !errors.Is(s.err, livekit.ErrNoCaller) {
			t.Fatalf("Serve: %v; want ErrNoCaller", s.err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not give up")
	}
}

// streams lists the lk.transcription streams c received, for a failure's
// message.
func streams(c *livekittest.Caller) string {
	var b strings.Builder
	for _, s := range c.Transcriptions() {
		fmt.Fprintf(&b, "\n  %s done=%v %v %q", s.Sender, s.Done, s.Attributes, s.Text)
	}
	return b.String()
}

// The caller talks over the agent's long answer, trial after trial: the
// time from the caller's onset to the agent's track going quiet at the
// caller, through livekit-server, as p50, p95 and max.
// HOLDLINE_LIVEKIT_TRIALS sets the number of trials (5 unless set; the
// figure in the README is from 20).
func TestBargeInThroughLiveKit(t *testing.T) {
	trials := 5
	if n, err := strconv.Atoi(os.Getenv("HOLDLINE_LIVEKIT_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	r := newRig(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(30+8*trials)*time.Second)
	defer cancel()
	const room = "interrupted"
	r.serve(t, ctx, room)
	c, err := livekittest.DialCaller(ctx, r.srv, room, "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	agentID := "agent-" + room
	hc := r.call(t, ctx)
	waitEvent(t, ctx, hc, "the greeting played", kind(events.PlayoutDone))
	var gaps []time.Duration
	var seq uint64
	for i := range trials {
		question := fmt.Sprintf("What times are available? (%d)", i)
		c.SendChat(question)
		asked := waitEvent(t, ctx, hc, "the question", func(e events.Event) bool {
			return e.Kind == events.UserTurn && e.Text == question && e.Seq > seq
		})
		turn := waitEvent(t, ctx, hc, "the answer playing", func(e events.Event) bool {
			return e.Kind == events.PlayoutStarted && e.Seq > asked.Seq
		})
		playing := time.Now()
		if err := c.Wait(ctx, "the answer's audio", func(c *livekittest.Caller) bool { return c.Heard(agentID, playing.Add(400*time.Millisecond)) }); err != nil {
			t.Fatal(err)
		}
		r.agents.last().Say("wait")
		c.Say(rtctest.Tone(600*time.Millisecond, 0.3))
		waitEvent(t, ctx, hc, "the answer cut", func(e events.Event) bool {
			return e.Kind == events.PlayoutTruncate && e.Epoch == turn.Epoch
		})
		onsets := c.Onsets()
		onset := onsets[len(onsets)-1]
		// Until the agent answers "wait", its track is quiet.
		settled := waitEvent(t, ctx, hc, "the agent settled", func(e events.Event) bool {
			return e.Kind == events.Idle && e.Seq > turn.Seq
		})
		seq = settled.Seq
		gaps = append(gaps, lastLoud(c.Levels(agentID), onset, 300*time.Millisecond).Sub(onset))
	}
	slices.Sort(gaps)
	p50, p95 := gaps[len(gaps)/2], gaps[(len(gaps)*95+99)/100-1]
	t.Logf("barge-in through livekit-server, %d trials: caller's onset to the agent's track quiet at the caller: p50 %v, p95 %v, max %v",
		trials, p50.Round(time.Millisecond), p95.Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	// The target is 300 ms at p95 (measured alone, see the README); a
	// loaded CI machine gets twice that before this fails.
	if p95 > 600*time.Millisecond {
		t.Errorf("barge-in p95 %v through LiveKit; want at most 300 ms (600 ms under test load)", p95)
	}
}

// espeak48k is espeak-ng saying text, at the 48 kHz a test caller's
// microphone takes.
func espeak48k(t *testing.T, text string) []int16 {
	t.Helper()
	out, err := exec.Command("espeak-ng", "--stdout", text).Output()
	if err != nil {
		t.Skipf("espeak-ng: %v (make test installs it)", err)
	}
	pcm, rate, err := media.ReadWAV(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := media.NewResampler(rate, 48000)
	if err != nil {
		t.Fatal(err)
	}
	return rs.Process(nil, pcm)
}
