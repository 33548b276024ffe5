package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	lkproto "github.com/livekit/protocol/livekit"

	"github.com/holdline/holdline/internal/livekittest"
	"github.com/holdline/holdline/internal/redistest"
)

// lkWorker is a `holdline livekit` process.
type lkWorker struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

const lkAgentName = "holdline-booking"

func startLiveKitWorker(t *testing.T, bin, name string, srv *livekittest.Server, redisURL, bookings, dir string, extra ...string) *lkWorker {
	t.Helper()
	w := &lkWorker{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(w.log)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command(bin, "livekit", "--url", srv.URL, "--agent", "booking", "--agent-name", lkAgentName,
		"--store", redisURL, "--worker", name, "--booking-time", "1500ms", "--bookings", bookings)
	w.cmd.Args = append(w.cmd.Args, extra...)
	w.cmd.Env = append(os.Environ(), "LIVEKIT_API_KEY="+srv.APIKey, "LIVEKIT_API_SECRET="+srv.APISecret,
		snapshotKeyEnv+"="+workerSnapshotKey, "OPENAI_API_KEY=")
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.cmd.Wait(); logf.Close(); close(w.done) }()
	t.Cleanup(w.kill)
	w.waitLog(t, t.Context(), "registered", 60*time.Second)
	return w
}

func (w *lkWorker) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
}

func (w *lkWorker) logText() string {
	b, _ := os.ReadFile(w.log)
	return string(b)
}

// waitLog waits for the worker's log to say want.
func (w *lkWorker) waitLog(t *testing.T, ctx context.Context, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(w.logText(), want) {
		select {
		case <-w.done:
			t.Fatalf("worker %s exited; its log:\n%s", w.name, w.logText())
		case <-ctx.Done():
			t.Fatalf("worker %s never logged %q: %v", w.name, want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s did not log %q within %v; its log:\n%s", w.name, want, within, w.logText())
		}
	}
}

// holds reports whether the worker's log says it started room's call.
func (w *lkWorker) holds(room string) bool {
	return strings.Contains(w.logText(), "room="+room+" ")
}

// heardAgentAfter says whether any agent in the room was heard by c after
// from.
func heardAgentAfter(c *livekittest.Caller, from time.Time) bool {
	seen := map[string]bool{}
	for _, a := range c.AttributeChanges() {
		if a.Kind == lkproto.ParticipantInfo_AGENT && !seen[a.Identity] {
			seen[a.Identity] = true
			if c.Heard(a.Identity, from) {
				return true
			}
		}
	}
	return false
}

// Two `holdline livekit` workers share a real Redis and a real
// livekit-server; rooms are dispatched to them by name. The worker holding
// a room is killed with SIGKILL while that room's booking runs: every room
// it held is dispatched again (livekit-server does not: the surviving
// worker's rescue does), picked up on the other worker from its
// checkpoint, and its agent is heard again; no booking is made twice.
// HOLDLINE_LIVEKIT_KILL=full runs five rooms (two otherwise).
func TestLiveKitWorkersRoomsOutliveAKilledWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	rooms := 2
	if os.Getenv("HOLDLINE_LIVEKIT_KILL") == "full" {
		rooms = 5
	}
	rd := redistest.Start(t)
	srv := livekittest.StartT(t)
	dir := t.TempDir()
	bin := buildHoldline(t, dir)
	bookings := filepath.Join(dir, "bookings.jsonl")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	workers := []*lkWorker{
		startLiveKitWorker(t, bin, "w0", srv, rd.URL(), bookings, dir),
		startLiveKitWorker(t, bin, "w1", srv, rd.URL(), bookings, dir),
	}
	callers := make([]*livekittest.Caller, rooms)
	for i := range rooms {
		room := fmt.Sprintf("room-%d", i)
		if err := srv.Dispatch(ctx, room, lkAgentName, ""); err != nil {
			t.Fatal(err)
		}
		c, err := livekittest.DialCaller(ctx, srv, room, "caller")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		callers[i] = c
	}
	start := time.Now()
	for i, c := range callers {
		if err := c.Wait(ctx, "the greeting", func(c *livekittest.Caller) bool { return heardAgentAfter(c, start) }); err != nil {
			t.Fatalf("room %d: %v\nw0:\n%s\nw1:\n%s", i, err, workers[0].logText(), workers[1].logText())
		}
	}
	// The victim is the worker of room 0; the rooms it holds are its
	// callers' to watch.
	victim, survivor := workers[0], workers[1]
	if !victim.holds("room-0") {
		victim, survivor = survivor, victim
	}
	var held []int
	for i := range rooms {
		if victim.holds(fmt.Sprintf("room-%d", i)) {
			held = append(held, i)
		}
	}
	for _, c := range callers {
		c.SendChat("Book a table for two at seven.")
	}
	// Room 0's booking runs once its preamble is said; the booking takes
	// 1.5 s: kill half-way through it.
	if err := callers[0].Wait(ctx, "the booking's preamble", func(c *livekittest.Caller) bool {
		return slices.ContainsFunc(c.Transcriptions(), func(s livekittest.TextStream) bool {
			return s.Done && strings.Contains(s.Text, "Booking it now")
		})
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	victim.kill()
	killed := time.Now()
	t.Logf("killed %s holding rooms %v, mid-booking in room 0", victim.name, held)

	var gaps []time.Duration
	for _, i := range held {
		c := callers[i]
		if err := c.Wait(ctx, "the agent again after the kill", func(c *livekittest.Caller) bool { return heardAgentAfter(c, killed) }); err != nil {
			t.Fatalf("room %d: %v\nsurvivor's log:\n%s", i, err, survivor.logText())
		}
		var back time.Time
		for _, a := range c.AttributeChanges() {
			if a.Kind != lkproto.ParticipantInfo_AGENT {
				continue
			}
			for _, l := range c.Levels(a.Identity) {
				if l.At.After(killed) && l.RMS > 0.01 && (back.IsZero() || l.At.Before(back)) {
					back = l.At
				}
			}
		}
		gaps = append(gaps, back.Sub(killed))
	}
	slices.Sort(gaps)
	resumed := strings.Count(survivor.logText(), "origin=reconnected")
	t.Logf("rooms resumed on %s: %d of the %d %s held; kill to the agent heard again: %v", survivor.name, resumed, len(held), victim.name, gaps)
	if resumed != len(held) {
		t.Errorf("%d rooms picked their conversation up; want %d\nsurvivor's log:\n%s", resumed, len(held), survivor.logText())
	}
	// The rooms the kill spared book as ever; the killed worker's rooms
	// say what they will of the booking its death left unknown.
	for i, c := range callers {
		if slices.Contains(held, i) {
			after := func(c *livekittest.Caller) []string {
				var said []string
				for _, s := range c.Transcriptions() {
					if s.Sender != c.Identity && s.Done && s.Started.After(killed) {
						said = append(said, s.Text)
					}
				}
				return said
			}
			if err := c.Wait(ctx, "the picked-up agent's words", func(c *livekittest.Caller) bool { return len(after(c)) > 0 }); err != nil {
				t.Errorf("room %d: %v", i, err)
			}
			t.Logf("room %d, picked up: the agent said %q", i, after(c))
			continue
		}
		if err := c.Wait(ctx, "the booking confirmed", func(c *livekittest.Caller) bool {
			return slices.ContainsFunc(c.Transcriptions(), func(s livekittest.TextStream) bool {
				return s.Done && strings.Contains(s.Text, "booked")
			})
		}); err != nil {
			t.Errorf("room %d: %v", i, err)
		}
	}
	if n := duplicateBookings(t, bookings); n != 0 {
		t.Errorf("%d bookings made twice", n)
	}
}

// A worker told to stop (SIGTERM) takes no more rooms, waits its drain
// timeout for its rooms' calls to end, then lets them go with their
// checkpoints; the other worker dispatches them again and picks them up,
// and the caller, who never left the room, hears the agent go on.
func TestLiveKitWorkerDrainHandsItsRoomsOn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	rd := redistest.Start(t)
	srv := livekittest.StartT(t)
	dir := t.TempDir()
	bin := buildHoldline(t, dir)
	bookings := filepath.Join(dir, "bookings.jsonl")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	old := startLiveKitWorker(t, bin, "old", srv, rd.URL(), bookings, dir, "--drain-timeout", "2s")
	if err := srv.Dispatch(ctx, "stays", lkAgentName, ""); err != nil {
		t.Fatal(err)
	}
	c, err := livekittest.DialCaller(ctx, srv, "stays", "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := c.Wait(ctx, "the greeting", func(c *livekittest.Caller) bool { return heardAgentAfter(c, start) }); err != nil {
		t.Fatalf("%v\n%s", err, old.logText())
	}
	c.SendChat("Book a table for two at seven.")
	if err := c.Wait(ctx, "the booking confirmed", func(c *livekittest.Caller) bool {
		return slices.ContainsFunc(c.Transcriptions(), func(s livekittest.TextStream) bool {
			return s.Done && strings.Contains(s.Text, "booked")
		})
	}); err != nil {
		t.Fatal(err)
	}
	next := startLiveKitWorker(t, bin, "next", srv, rd.URL(), bookings, dir)
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	termed := time.Now()
	select {
	case <-old.done:
	case <-ctx.Done():
		t.Fatalf("the old worker did not exit after its drain; its log:\n%s", old.logText())
	}
	if code := old.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the old worker exited %d after its drain; its log:\n%s", code, old.logText())
	}
	exited := time.Since(termed)
	// A room dispatched while it drained would have gone to next only.
	next.waitLog(t, ctx, "origin=reconnected", time.Minute)
	if err := c.Wait(ctx, "the agent from the next worker", func(c *livekittest.Caller) bool {
		return heardAgentAfter(c, termed.Add(exited))
	}); err != nil {
		t.Fatalf("%v\nnext's log:\n%s", err, next.logText())
	}
	t.Logf("SIGTERM to exit %v; to the agent heard from the next worker %v", exited.Round(time.Millisecond), time.Since(termed).Round(time.Millisecond))
	if n := duplicateBookings(t, bookings); n != 0 {
		t.Errorf("%d bookings made twice", n)
	}
}

// A worker given the wrong secret, or none, says so at start-up and stops:
// one refused connection, not a retry storm.
func TestLiveKitWorkerWithTheWrongSecretSaysSo(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("LIVEKIT_API_KEY", srv.APIKey)
	t.Setenv("LIVEKIT_API_SECRET", "")
	var out strings.Builder
	err := run(ctx, []string{"livekit", "--url", srv.URL}, strings.NewReader(""), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "LIVEKIT_API_SECRET") {
		t.Errorf("no secret: %v", err)
	}
	t.Setenv("LIVEKIT_API_SECRET", "not-the-secret-of-this-server-0123456789")
	start := time.Now()
	err = run(ctx, []string{"livekit", "--url", srv.URL}, strings.NewReader(""), &out, &out)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "LIVEKIT_API_KEY and LIVEKIT_API_SECRET") {
		t.Fatalf("a wrong secret: %v", err)
	}
	t.Logf("a wrong secret: %v, after %v", err, took.Round(time.Millisecond))
	if strings.Contains(out.String(), "not-the-secret") {
		t.Error("the secret is in the output")
	}
	refused := strings.Count(srv.Log(), "401") + strings.Count(srv.Log(), "unauthorized")
	if refused > 2 {
		t.Errorf("the server logged %d refusals: the worker tried again", refused)
	}
}
