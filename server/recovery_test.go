package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/webrtc/rtctest"
)

var snapshotKey = handoff.Key{ID: "test", Secret: []byte("a snapshot key for the tests, 32b")}

// A caller whose worker stopped answering reconnects with its resume
// token to another worker sharing the store: that worker takes the session
// over from its last checkpoint, the agent speaks again knowing the
// booking it made, the booking is not made again, and the first worker,
// fenced off, lets the session go.
func TestSessionMovesToAnotherWorkerWithItsToken(t *testing.T) {
	st, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hsA, _, srvA := newServer(t, server.WithStore(st, "worker-a", snapshotKey))
	hsB, _, srvB := newServer(t, server.WithStore(st, "worker-b", snapshotKey))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c, err := rtctest.Dial(ctx, hsA.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, kind(events.PlayoutDone)); err != nil {
		t.Fatal(err)
	}
	if err := c.SendText("Book a table for two at seven."); err != nil {
		t.Fatal(err)
	}
	b, err := c.WaitEvent(ctx, booked)
	if err != nil {
		t.Fatalf("%v; events: %v", err, kinds(c.Events()))
	}
	done, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone && e.Seq > b.Seq })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.CheckpointSaved && e.Seq > done.Seq }); err != nil {
		t.Fatalf("no checkpoint after the answer: %v", err)
	}
	c.Close()

	reconnect := time.Now()
	r, err := rtctest.Dial(ctx, hsB.URL, rtctest.Options{ResumeToken: c.ResumeToken})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Resumed || r.Location != c.Location {
		t.Fatalf("worker B answered location %q (was %q), resumed %v", r.Location, c.Location, r.Resumed)
	}
	if err := r.Wait(ctx, "the agent's voice", func(r *rtctest.Client) bool { return heardSince(r, reconnect) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("from reconnecting to the agent speaking again: %v", time.Since(reconnect).Round(time.Millisecond))
	said, err := r.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(said.Text, "Hello") {
		t.Errorf("worker B greeted the caller afresh (%q): the conversation was not restored", said.Text)
	}
	t.Logf("worker B: %s", said.Text)
	if n := count(r.Events(), booked); n != 0 {
		t.Errorf("worker B ran the booking %d times; it was made before the move", n)
	}
	deadline := time.Now().Add(15 * time.Second)
	for srvA.Sessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if srvA.Sessions() != 0 || srvB.Sessions() != 1 {
		t.Errorf("sessions: worker A %d, worker B %d; want 0 and 1", srvA.Sessions(), srvB.Sessions())
	}
}
