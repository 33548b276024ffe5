package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/redistest"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// retryingDoor sends each request to the first worker that neither
// refuses it with 503 nor is gone: HAProxy's retry-on 503 conn-failure
// with redispatch, in a few lines.
func retryingDoor(workers ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		for _, base := range workers {
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
			req.Header = r.Header.Clone()
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				continue
			}
			if res.StatusCode == http.StatusServiceUnavailable {
				res.Body.Close()
				continue
			}
			defer res.Body.Close()
			for k, v := range res.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(res.StatusCode)
			io.Copy(w, res.Body)
			return
		}
		http.Error(w, "no worker takes it", http.StatusServiceUnavailable)
	})
}

// readiness returns the status of a worker's /readyz.
func readiness(url string) int {
	res, err := http.Get(url + "/readyz")
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// A worker sent SIGTERM in the middle of a call drains: it stops being
// ready, moves the browser call at its next clean point to the other
// worker through the front door, and exits 0 once it holds nothing. The
// caller goes on talking to the other worker, hears a gap of well under
// a second, and the booking it made is not made again.
func TestSIGTERMDrainsTheWorkerAndItsCallMovesToAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	rd := redistest.Start(t)
	dir := t.TempDir()
	bin := buildHoldline(t, dir)
	bookings := filepath.Join(dir, "bookings.jsonl")
	a := startWorker(t, bin, "worker-a", rd.URL(), bookings, dir, "--drain-timeout", "1m")
	b := startWorker(t, bin, "worker-b", rd.URL(), bookings, dir, "--drain-timeout", "1m")
	door := httptest.NewServer(retryingDoor(a.url, b.url))
	defer door.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	c, err := rtctest.Dial(ctx, door.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendText("Book a table for two at seven."); err != nil {
		t.Fatal(err)
	}
	booked, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.ToolTerminal && e.Tool == "book_table" })
	if err != nil {
		t.Fatal(err)
	}
	// Mid-answer: the move waits for the agent to finish.
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutStarted && e.Seq > booked.Seq }); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for readiness(a.url) != http.StatusServiceUnavailable {
		if time.Since(signalled) > 5*time.Second {
			t.Fatal("the signalled worker's /readyz did not turn 503")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Wait(ctx, "the move", func(c *rtctest.Client) bool {
		m := c.Moves()
		return len(m) == 1 && (!m[0].Connected.IsZero() || m[0].Err != nil) && (m[0].Err != nil || m[0].Gap > 0)
	}); err != nil {
		t.Fatal(err)
	}
	m := c.Moves()[0]
	if m.Err != nil {
		t.Fatalf("the move failed: %v", m.Err)
	}
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the drained worker did not exit")
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the drained worker exited %d; want 0", code)
	}
	t.Logf("SIGTERM to exit %v; the move: message to connected %v, gap the caller heard %v",
		time.Since(signalled).Round(time.Millisecond), m.Connected.Sub(m.At).Round(time.Millisecond), m.Gap.Round(time.Millisecond))
	if m.Gap > time.Second {
		t.Errorf("the caller heard nothing for %v during the move; want under a second", m.Gap)
	}
	playoutDone := 0
	for _, e := range c.Events() {
		if e.Kind == events.PlayoutDone && e.Seq > booked.Seq {
			playoutDone++
		}
	}
	if playoutDone == 0 {
		t.Error("the answer after the booking was cut short by the move; want it finished first")
	}
	moved, err := c.WaitEvent(ctx, func(e events.Event) bool {
		return e.Kind == events.SessionMoved && e.Text == "from worker-a to worker-b"
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SendText("What time is it booked for?"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone && e.Seq > moved.Seq }); err != nil {
		t.Fatalf("no answer from worker B: %v", err)
	}
	if dups := duplicateBookings(t, bookings); dups != 0 {
		t.Errorf("%d bookings made twice", dups)
	}
	log, _ := os.ReadFile(a.log)
	if !strings.Contains(string(log), "drained: exiting") || !strings.Contains(string(log), "moved=1") {
		t.Errorf("worker A's log does not say it drained with one call moved:\n%s", log)
	}
}

// In headless Chromium, the reference web client follows a draining
// worker's move, tried as a user would: the page books a table by text on
// the worker the front door chose, that worker is drained through the
// admin API, and the page reconnects through the same address to the
// other worker, which answers the next question in the same session
// without booking again.
func TestBrowserFollowsADrainingWorkersMove(t *testing.T) {
	node, script := needBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rd := redistest.Start(t)
	t.Setenv("HOLDLINE_ADMIN_TOKEN", "admin-for-the-move")
	t.Setenv(snapshotKeyEnv, workerSnapshotKey)
	a := serveForBrowserWith(t, ctx, "", "--store", rd.URL(), "--worker", "worker-a")
	b := serveForBrowserWith(t, ctx, "", "--store", rd.URL(), "--worker", "worker-b")
	door := httptest.NewServer(retryingDoor(a, b))
	defer door.Close()
	wav := callerWAV(t, "Book a table for two at seven.", 1.5, 4)
	r := runBrowser(t, ctx, node, script, "move", door.URL, wav, t.ArtifactDir(), a)
	t.Logf("moved (%q) in %d ms at the page; after the move %q (peak RMS %.3f)", r.MovedText, r.MoveMs, r.AfterResume, r.AfterResumePeak)
	if r.MovedText != "from worker-a to worker-b" {
		t.Errorf("session_moved says %q; want from worker-a to worker-b", r.MovedText)
	}
	if !r.SameSession {
		t.Error("after the move the page is in another session; want the same one")
	}
	if r.BookState != "succeeded" || r.BookTableRuns != 1 {
		t.Errorf("book_table: %q, ran %d times; want succeeded, once", r.BookState, r.BookTableRuns)
	}
	if r.AfterResume == "" || r.AfterResumePeak < 0.02 {
		t.Errorf("no spoken answer after the move: %q, peak RMS %.3f", r.AfterResume, r.AfterResumePeak)
	}
	if len(r.Ended.Logged) != 0 {
		t.Errorf("the page saw the session end (%q) though it only moved", r.Ended.Logged)
	}
	if r.MoveMs > 2000 {
		t.Errorf("the page took %d ms to move; want well under two seconds", r.MoveMs)
	}
}
