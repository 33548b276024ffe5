package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/examples"
	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/internal/redistest"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// worker is a `holdline serve` process.
type worker struct {
	name string
	url  string
	log  string // its output
	cmd  *exec.Cmd
	done chan struct{}
}

func startWorker(t *testing.T, bin, name, redisURL, bookings, logDir string, extra ...string) *worker {
	t.Helper()
	port, err := freeport.TCP()
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{name: name, url: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan struct{})}
	w.log = filepath.Join(logDir, fmt.Sprintf("%s-%d.log", name, port))
	logf, err := os.Create(w.log)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command(bin, "serve", "--http", fmt.Sprintf("127.0.0.1:%d", port), "--agent", "booking",
		"--store", redisURL, "--worker", name, "--resume-ttl", "30s",
		"--booking-time", "1500ms", "--bookings", bookings)
	w.cmd.Args = append(w.cmd.Args, extra...)
	w.cmd.Env = append(os.Environ(), snapshotKeyEnv+"="+workerSnapshotKey, "OPENAI_API_KEY=")
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.cmd.Wait(); logf.Close(); close(w.done) }()
	t.Cleanup(w.kill)
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(w.url + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return w
			}
		}
		select {
		case <-w.done:
			t.Fatalf("worker %s exited at start; see %s", name, logDir)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %s did not come up", name)
		}
	}
}

// buildHoldline builds the holdline binary into dir.
func buildHoldline(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "holdline")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/holdline").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// kill ends the worker with SIGKILL, as a crash would, and waits for it.
func (w *worker) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
}

// killPoints are where a trial kills the worker holding the call.
var killPoints = []struct {
	name string
	// at is the event after which the worker dies.
	at func(e events.Event, seen []events.Event) bool
}{
	{"before the intent", func(e events.Event, _ []events.Event) bool {
		return e.Kind == events.ToolRequested && e.Tool == "book_table"
	}},
	{"between intent and outcome", func(e events.Event, _ []events.Event) bool {
		return e.Kind == events.ToolStarted && e.Tool == "book_table"
	}},
	{"after the outcome", func(e events.Event, _ []events.Event) bool {
		return e.Kind == events.ToolTerminal && e.Tool == "book_table"
	}},
	{"mid-playout", func(e events.Event, seen []events.Event) bool {
		return e.Kind == events.PlayoutStarted && slices.ContainsFunc(seen, func(p events.Event) bool {
			return p.Kind == events.ToolTerminal && p.Tool == "book_table"
		})
	}},
}

// Two `holdline serve` workers share a real Redis. In each trial a caller
// asks the booking agent on one worker for a table, the worker is killed
// with SIGKILL at one of the kill points, and the caller reconnects to the
// other worker with its resume token. Every session must resume there,
// no booking may be made twice, and no turn a checkpoint had saved may be
// lost. HOLDLINE_KILL_TRIALS=N sets the number of trials (default: one per
// kill point).
func TestKilledWorkersCallsResumeOnTheOtherWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	trials := len(killPoints)
	if n, _ := strconv.Atoi(os.Getenv("HOLDLINE_KILL_TRIALS")); n > 0 {
		trials = n
	}
	rd := redistest.Start(t)
	dir := t.TempDir()
	bin := buildHoldline(t, dir)
	bookings := filepath.Join(dir, "bookings.jsonl")
	workers := [2]*worker{
		startWorker(t, bin, "w0", rd.URL(), bookings, dir),
		startWorker(t, bin, "w1", rd.URL(), bookings, dir),
	}
	var latencies []time.Duration
	var lost, failed int
	for i := range trials {
		point := killPoints[i%len(killPoints)]
		from, to := i%2, (i+1)%2
		lat, lostTurns, err := killTrial(t, workers[from], workers[to], point.at)
		if err != nil {
			failed++
			t.Errorf("trial %d (%s): %v", i, point.name, err)
		} else {
			latencies = append(latencies, lat)
		}
		lost += lostTurns
		workers[from] = startWorker(t, bin, fmt.Sprintf("w%d-%d", from, i), rd.URL(), bookings, dir)
	}
	dups := duplicateBookings(t, bookings)
	slices.Sort(latencies)
	pct := func(q float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(q*float64(len(latencies))))].Round(time.Millisecond)
	}
	t.Logf("%d kill trials: %d resumed on the other worker, %d failed; bookings made twice: %d; committed turns lost: %d; reconnect to the agent speaking again p50 %v, p95 %v, max %v",
		trials, len(latencies), failed, dups, lost, pct(0.5), pct(0.95), pct(1))
	if dups != 0 {
		t.Errorf("%d bookings were made twice", dups)
	}
	if lost != 0 {
		t.Errorf("%d committed turns were lost", lost)
	}
}

// killTrial runs one call on a, kills a at the kill point, and resumes the
// call on b. It returns the time from reconnecting to hearing the agent,
// and how many turns a saved checkpoint had that b lacks.
func killTrial(t *testing.T, a, b *worker, at func(events.Event, []events.Event) bool) (time.Duration, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, a.url, rtctest.Options{})
	if err != nil {
		return 0, 0, fmt.Errorf("dial %s: %w", a.name, err)
	}
	defer c.Close()
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone }); err != nil {
		return 0, 0, fmt.Errorf("greeting: %w", err)
	}
	if err := c.SendText("Book a table for two at seven."); err != nil {
		return 0, 0, err
	}
	if err := c.Wait(ctx, "the kill point", func(c *rtctest.Client) bool {
		evs := c.Events()
		for i, e := range evs {
			if at(e, evs[:i]) {
				return true
			}
		}
		return false
	}); err != nil {
		return 0, 0, err
	}
	a.kill()
	seen := c.Events()
	c.Close()

	reconnect := time.Now()
	r, err := rtctest.Dial(ctx, b.url, rtctest.Options{ResumeToken: c.ResumeToken})
	if err != nil {
		return 0, 0, fmt.Errorf("resume on %s: %w", b.name, err)
	}
	defer r.Close()
	if !r.Resumed || r.Location != c.Location {
		return 0, 0, fmt.Errorf("resume on %s: location %q (was %q), resumed %v", b.name, r.Location, c.Location, r.Resumed)
	}
	if err := r.Wait(ctx, "the agent's voice", func(r *rtctest.Client) bool {
		for _, l := range r.Levels() {
			if l.At.After(reconnect) && l.RMS > 0.01 {
				return true
			}
		}
		return false
	}); err != nil {
		return 0, 0, err
	}
	latency := time.Since(reconnect)
	// Let the resumed session settle (a repeat of the booking would run
	// now), then compare its context with what the checkpoints held.
	if _, err := r.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.Idle }); err != nil {
		return 0, 0, fmt.Errorf("the resumed session never settled: %w", err)
	}
	cc, err := fetchContext(ctx, b.url+r.Location+"/context")
	if err != nil {
		return 0, 0, err
	}
	var covered uint64
	for _, e := range seen {
		if e.Kind == events.CheckpointSaved {
			covered = max(covered, uint64(e.Count))
		}
	}
	lost := 0
	for _, e := range seen {
		if e.Kind == events.UserTurn && e.Seq <= covered && !slices.ContainsFunc(cc.Items, func(it llm.Item) bool {
			return it.Role == llm.RoleUser && it.Text == e.Text
		}) {
			lost++
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, b.url+r.Location, nil)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
	}
	return latency, lost, nil
}

func fetchContext(ctx context.Context, url string) (llm.ChatContext, error) {
	var cc llm.ChatContext
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return cc, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return cc, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return cc, json.NewDecoder(res.Body).Decode(&cc)
}

// duplicateBookings counts bookings made more than once for the same call
// (the same idempotency key) in the shared bookings file.
func duplicateBookings(t *testing.T, path string) int {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	dups := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec examples.BookingRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("bookings file: %v", err)
		}
		if seen[rec.Key]++; seen[rec.Key] > 1 {
			dups++
		}
	}
	if n := len(seen); n == 0 {
		t.Log("no booking was recorded at all")
	} else {
		t.Logf("%d distinct bookings recorded", n)
	}
	return dups
}
