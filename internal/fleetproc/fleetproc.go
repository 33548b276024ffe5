//go:build linux

// Package fleetproc runs a benchmark's clients in a child process (the
// test binary again, running one test), so that their CPU does not count
// as the benchmark process's. The two talk in lines: the benchmark writes
// commands ("go", "bye") to the child's stdin; the child writes JSON
// messages to its stdout, each on a line of its own after Prefix, among
// whatever else the test binary prints there.
package fleetproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Prefix marks the child's protocol lines on its stdout.
const Prefix = "holdline-fleet "

// Child is the client process, seen from the benchmark; M is its
// messages.
type Child[M any] struct {
	Cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan msg[M]
	stderr *tailBuffer
	done   chan error
}

type msg[M any] struct {
	m   M
	err error
}

// Start runs the test binary's test (an exact name) with env ("NAME=value")
// added to its environment, for at most limit; the child is killed when tb
// ends.
func Start[M any](tb testing.TB, test, env string, limit time.Duration) *Child[M] {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout="+limit.String())
	cmd.Env = append(os.Environ(), env)
	cmd.WaitDelay = 5 * time.Second
	c := &Child[M]{Cmd: cmd, msgs: make(chan msg[M], 16), stderr: &tailBuffer{max: 8 << 10}, done: make(chan error, 1)}
	cmd.Stdout = &lineWriter{line: c.line}
	cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		cancel()
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	// Whatever happens to the benchmark, the child goes with it.
	tb.Cleanup(func() {
		cancel()
		c.Wait(tb)
	})
	return c
}

// PID is the child's process ID.
func (c *Child[M]) PID() int { return c.Cmd.Process.Pid }

func (c *Child[M]) line(s string) {
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return
	}
	var m msg[M]
	if err := json.Unmarshal([]byte(rest), &m.m); err != nil {
		m.err = fmt.Errorf("bad line from the client process: %s: %w", s, err)
	}
	c.msgs <- m
}

// Next waits for the child's next message.
func (c *Child[M]) Next(tb testing.TB, timeout time.Duration) M {
	tb.Helper()
	select {
	case m := <-c.msgs:
		if m.err != nil {
			tb.Fatal(m.err)
		}
		return m.m
	case err := <-c.done:
		c.done <- err
		tb.Fatalf("the client process exited: %v; stderr:\n%s", err, c.stderr)
	case <-time.After(timeout):
		tb.Fatalf("no word from the client process in %v; stderr:\n%s", timeout, c.stderr)
	}
	var zero M
	return zero
}

// Send writes cmd to the child's stdin.
func (c *Child[M]) Send(tb testing.TB, cmd string) {
	tb.Helper()
	if _, err := io.WriteString(c.stdin, cmd+"\n"); err != nil {
		tb.Fatalf("telling the client process %q: %v", cmd, err)
	}
}

// Wait closes the child's stdin and waits for it to exit (once the
// benchmark's context ends it is killed).
func (c *Child[M]) Wait(tb testing.TB) {
	c.stdin.Close()
	err := <-c.done
	c.done <- err
	if err != nil && !tb.Failed() {
		tb.Errorf("client process: %v; stderr:\n%s", err, c.stderr)
	}
}

// lineWriter calls line for every whole line written to it.
type lineWriter struct {
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// The child's side.

var outMu sync.Mutex

// Emit writes m to stdout as a protocol line.
func Emit(m any) {
	b, _ := json.Marshal(m)
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintf(os.Stdout, "%s%s\n", Prefix, b)
}

// Commands are the benchmark's commands, read from stdin until EOF (the
// benchmark went away), which calls cancel: the run ends wherever it is.
type Commands struct {
	ctx context.Context
	ch  chan string
}

// ReadCommands reads the commands until ctx ends or stdin closes.
func ReadCommands(ctx context.Context, cancel context.CancelFunc) *Commands {
	c := &Commands{ctx: ctx, ch: make(chan string)}
	go func() {
		defer cancel()
		defer close(c.ch)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			select {
			case c.ch <- strings.TrimSpace(sc.Text()):
			case <-ctx.Done():
				return
			}
		}
	}()
	return c
}

// Await waits for the command want, skipping others; false if it did not
// come within the time, or the run ended.
func (c *Commands) Await(want string, within time.Duration) bool {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case cmd, ok := <-c.ch:
			if !ok {
				return false
			}
			if cmd == want {
				return true
			}
		case <-timer.C:
			return false
		case <-c.ctx.Done():
			return false
		}
	}
}

// SleepUntil sleeps until t; false if ctx ended first.
func SleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Renice sets every thread of this process to nice; Linux keeps niceness
// per thread, and threads made later inherit it.
func Renice(nice int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}

// Status heads every message of the child: its type ("ready", "result",
// "error"), the error, and in "ready" how the clients' setup went. A
// child's message type embeds it.
type Status struct {
	Type  string `json:"type"`
	Error string `json:"error,omitempty"` // "error": why; "ready": why the first client failed

	SetupSeconds float64 `json:"setup_s,omitempty"`
	Connected    int     `json:"connected,omitempty"`
	Failed       int     `json:"failed,omitempty"`
}

// Run is the child's side of a run: its context, which ends after the
// run's time limit or when the benchmark goes away (its stdin closes),
// and the benchmark's commands.
type Run struct {
	Ctx      context.Context
	Commands *Commands
}

// Begin starts the child's side of a run of at most limit, at nice (0 to
// leave it); the run ends with t.
func Begin(t testing.TB, nice int, limit time.Duration) *Run {
	if nice > 0 {
		if err := Renice(nice); err != nil {
			t.Logf("renice: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return &Run{Ctx: ctx, Commands: ReadCommands(ctx, cancel)}
}

// Fail tells the benchmark the run failed, and why, and fails t.
func Fail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	Emit(Status{Type: "error", Error: msg})
	t.Fatal(msg)
}

// Connect runs dial for clients 0 to n-1, parallel at once at the most,
// then for each client dialled wait (for its greeting, say), all at once,
// within ctx, and returns the "ready" status: a client whose dial or wait
// failed (an overloaded machine) is left out and counted, so that the run
// still says what the rest cost. When none connected it fails t.
func Connect(t testing.TB, ctx context.Context, n, parallel int, dial, wait func(ctx context.Context, i int) error) Status {
	t.Helper()
	setup := time.Now()
	var (
		mu       sync.Mutex
		failed   int
		firstErr error
		wg       sync.WaitGroup
	)
	slots := make(chan struct{}, parallel)
	for i := range n {
		wg.Go(func() {
			slots <- struct{}{}
			err := dial(ctx, i)
			<-slots
			if err == nil {
				err = wait(ctx, i)
			}
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				failed++
				if firstErr == nil {
					firstErr = fmt.Errorf("client %d: %w", i, err)
				}
			}
		})
	}
	wg.Wait()
	st := Status{Type: "ready", SetupSeconds: time.Since(setup).Seconds(), Connected: n - failed, Failed: failed}
	if firstErr != nil {
		st.Error = firstErr.Error()
	}
	if failed == n {
		Fail(t, "no client connected: %v", firstErr)
	}
	return st
}

// Ready waits for the child's "ready" and logs a short fleet.
func Ready[M interface{ status() Status }](tb testing.TB, c *Child[M], timeout time.Duration) Status {
	tb.Helper()
	st := c.Next(tb, timeout).status()
	if st.Type != "ready" {
		tb.Fatalf("client process: %s %s", st.Type, st.Error)
	}
	if st.Failed > 0 {
		// Measure what the others cost all the same.
		tb.Logf("SHORT: %d of %d clients did not connect or hear their greeting: %s", st.Failed, st.Connected+st.Failed, st.Error)
	}
	return st
}

func (s Status) status() Status { return s }

// The benchmark's settings from its environment.

// EnvCounts is the counts in the variable name ("100" or "25,50"), or def
// when it is unset.
func EnvCounts(tb testing.TB, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var ns []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			tb.Fatalf("%s=%q: want counts like 25,50,100", name, v)
		}
		ns = append(ns, n)
	}
	return ns
}

// EnvDuration is the duration in the variable name ("10s", "1m"), at
// least least, or def when it is unset.
func EnvDuration(tb testing.TB, name string, def, least time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < least {
		tb.Fatalf("%s=%q: want a duration of at least %v", name, v, least)
	}
	return d
}

// EnvInt is the integer in the variable name, from lo to hi, or def when
// it is unset.
func EnvInt(tb testing.TB, name string, def, lo, hi int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		tb.Fatalf("%s=%q: want %d..%d", name, v, lo, hi)
	}
	return n
}
