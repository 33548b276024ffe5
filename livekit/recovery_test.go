package livekit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/internal/livekittest"
	"github.com/holdline/holdline/internal/redistest"
	"github.com/holdline/holdline/livekit"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/webrtc/rtctest"
)

var testKey = handoff.Key{ID: "k1", Secret: []byte("a snapshot key for the livekit tests")}

// A room's job given to another worker after its first one let go (the
// job ended there) picks the conversation up from the checkpoint in the
// shared store: the same session, no second greeting, the booking made
// once, the caller never leaving the room.
func TestARoomsJobOnAnotherWorkerPicksUpTheConversation(t *testing.T) {
	rd := redistest.Start(t)
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	worker := func(name string) *rig {
		st, err := store.Open(ctx, rd.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		agents := &testAgents{}
		host, err := calls.New(agents.newAgent, calls.WithStore(st, name, testKey))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { host.Close() })
		return &rig{srv: srv, agents: agents, host: host, tr: livekit.NewTransport(host)}
	}
	a, b := worker("a"), worker("b")
	const room = "handover"
	actx, stopA := context.WithCancel(ctx)
	servedA := a.serve(t, actx, room)
	c, err := livekittest.DialCaller(ctx, srv, room, "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hcA := a.call(t, ctx)
	waitEvent(t, ctx, hcA, "the greeting played", kind(events.PlayoutDone))
	a.agents.last().Say("book a table for two at seven")
	c.Say(rtctest.Tone(700*time.Millisecond, 0.3))
	done := waitEvent(t, ctx, hcA, "the booking's answer", func(e events.Event) bool {
		return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "booked")
	})
	waitEvent(t, ctx, hcA, "the checkpoint of the answer", func(e events.Event) bool {
		return e.Kind == events.CheckpointSaved && uint64(e.Count) >= done.Seq
	})
	stopA()
	<-servedA.done

	b.serve(t, ctx, room)
	hcB := b.call(t, ctx)
	if hcB.ID() != hcA.ID() {
		t.Fatalf("worker b runs session %s; want a's %s, picked up", hcB.ID(), hcA.ID())
	}
	c.SendChat("Are you free at eight?")
	after := time.Now()
	waitEvent(t, ctx, hcB, "the question on worker b", func(e events.Event) bool {
		return e.Kind == events.UserTurn && e.Text == "Are you free at eight?"
	})
	if err := c.Wait(ctx, "the agent's voice from worker b", func(c *livekittest.Caller) bool { return c.Heard("agent-"+room, after) }); err != nil {
		t.Fatal(err)
	}
	if n := count(hcB, booked); n != 0 {
		t.Errorf("book_table ran %d times on worker b; want none (it ran on a)", n)
	}
	ctxB, err := hcB.Session().ChatContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	greetings := 0
	for _, it := range ctxB.Items {
		if strings.Contains(it.Text, "thanks for calling") {
			greetings++
		}
	}
	if greetings != 1 {
		t.Errorf("the conversation holds %d greetings; want the one from worker a", greetings)
	}
}
