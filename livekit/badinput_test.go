package livekit_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	lkproto "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
	pion "github.com/pion/webrtc/v4"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/livekittest"
	"github.com/holdline/holdline/livekit"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// logBuffer is a log two goroutines may write.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLog waits for the log to say want.
func waitLog(t *testing.T, ctx context.Context, log *logBuffer, want string) {
	t.Helper()
	for !strings.Contains(log.String(), want) {
		select {
		case <-ctx.Done():
			t.Fatalf("the log never said %q:\n%s", want, log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// What a room may hold besides one caller's voice: a second caller, whose
// voice the agent does not take for its caller's; a camera and audio that
// is not Opus, which are ignored and said so; and key presses, the
// caller's taken and the other's not.
func TestARoomsOtherParticipantsVideoAndKeys(t *testing.T) {
	log := &logBuffer{}
	r := newRig(t, livekit.WithLogger(slog.New(slog.NewTextHandler(log, nil))))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const room = "busy"
	r.serve(t, ctx, room)
	caller, err := livekittest.DialCaller(ctx, r.srv, room, "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	hc := r.call(t, ctx)
	waitEvent(t, ctx, hc, "the greeting played", kind(events.PlayoutDone))

	// A second caller joins and talks: the agent keeps to its caller.
	other, err := livekittest.DialCaller(ctx, r.srv, room, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	waitLog(t, ctx, log, "another participant's audio is not heard")
	other.Say(rtctest.Tone(800*time.Millisecond, 0.3))
	if err := other.SendDTMF(2, "2"); err != nil {
		t.Fatal(err)
	}
	other.SendChat("I am not the caller.")
	waitLog(t, ctx, log, "typed input from someone other than the caller is ignored")

	// The caller's camera, and a second audio track (PCMU as published:
	// livekit-server negotiates Opus for every audio track, so the
	// agent's own codec check is for servers that do not).
	if err := caller.PublishVideo(ctx); err != nil {
		t.Fatal(err)
	}
	waitLog(t, ctx, log, "a track that is not audio is ignored")
	pcmu, err := pion.NewTrackLocalStaticSample(pion.RTPCodecCapability{MimeType: pion.MimeTypePCMU, ClockRate: 8000}, "pcmu", "caller-pcmu")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := caller.Room.LocalParticipant.PublishTrack(pcmu, &lksdk.TrackPublicationOptions{Name: "phone", Source: lkproto.TrackSource_MICROPHONE}); err != nil {
		t.Logf("livekit-server refused a PCMU track at publication: %v", err)
	} else {
		for range 10 {
			_ = pcmu.WriteSample(pionmedia.Sample{Data: make([]byte, 160), Duration: 20 * time.Millisecond})
		}
		waitLog(t, ctx, log, "a second audio track of the caller is ignored")
	}

	// The caller's key press is taken; the other's was not.
	if err := caller.SendDTMF(1, "1"); err != nil {
		t.Fatal(err)
	}
	key := waitEvent(t, ctx, hc, "the caller's key press", kind(events.DTMF))
	if key.Text != "1" {
		t.Errorf("the key pressed was %q; want the caller's 1", key.Text)
	}
	if n := count(hc, func(e events.Event) bool {
		return (e.Kind == events.SpeechStarted || e.Kind == events.UserTurn) && e.Seq < key.Seq
	}); n != 0 {
		t.Errorf("the other participant was heard as the caller: %d speech or turn events", n)
	}

	// The caller is still heard.
	r.agents.last().Say("book a table for two at seven")
	caller.Say(rtctest.Tone(700*time.Millisecond, 0.3))
	waitEvent(t, ctx, hc, "the caller's turn", func(e events.Event) bool {
		return e.Kind == events.UserTurn && strings.Contains(e.Text, "book a table")
	})
}

// livekit-server goes away mid-call and comes back: the call is a lost
// connection, the agent joins the room again with backoff, and the same
// conversation goes on when its caller is back.
func TestTheServerGoingAwayMidCallIsALostConnection(t *testing.T) {
	log := &logBuffer{}
	r := newRig(t, livekit.WithLogger(slog.New(slog.NewTextHandler(log, nil))), livekit.WithResumeTTL(time.Minute))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	const room = "outage"
	served := r.serve(t, ctx, room)
	caller, err := livekittest.DialCaller(ctx, r.srv, room, "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	hc := r.call(t, ctx)
	waitEvent(t, ctx, hc, "the greeting played", kind(events.PlayoutDone))

	r.srv.Kill()
	lost := waitEvent(t, ctx, hc, "the connection lost", kind(events.TransportLost))
	// Some of the agent's attempts fail while the server is away.
	time.Sleep(3 * time.Second)
	if err := r.srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The caller's app joins again too (its SDK may, or it redials).
	caller.Close()
	back, err := livekittest.DialCaller(ctx, r.srv, room, "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	restored := waitEvent(t, ctx, hc, "the connection restored", func(e events.Event) bool {
		return e.Kind == events.TransportRestored && e.Seq > lost.Seq
	})
	t.Logf("the call was lost for %v", restored.Time.Sub(lost.Time).Round(time.Millisecond))
	back.SendChat("Are you still there?")
	waitEvent(t, ctx, hc, "the question after the outage", func(e events.Event) bool {
		return e.Kind == events.UserTurn && e.Text == "Are you still there?"
	})
	after := time.Now()
	if err := back.Wait(ctx, "the agent's voice after the outage", func(c *livekittest.Caller) bool { return c.Heard("agent-"+room, after) }); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if n := count(hc, kind(events.SessionStarted)); n != 1 {
		t.Errorf("the session started %d times; want once", n)
	}
	select {
	case <-served.done:
		t.Fatalf("Serve returned during the outage: %v", served.err)
	default:
	}
}
