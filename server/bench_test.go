//go:build linux

package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/interceptor"
	pion "github.com/pion/webrtc/v4"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"

	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/webrtc"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// Environment of BenchmarkConcurrentSessions.
const (
	// benchSessionsEnv overrides the session counts: "100" or "25,50".
	benchSessionsEnv = "HOLDLINE_BENCH_SESSIONS"
	// benchWindowEnv overrides the measured window: "10s", "1m".
	benchWindowEnv = "HOLDLINE_BENCH_WINDOW"
	// benchNiceEnv sets the client process's niceness (default 19; 0 to
	// let the clients compete with the server as equals).
	benchNiceEnv = "HOLDLINE_BENCH_CLIENT_NICE"
	// benchClientEnv picks the fleet's client: rtctest (the default) or
	// light (lightClient).
	benchClientEnv = "HOLDLINE_BENCH_CLIENT"
	// benchOpusEnv sets the server's Opus encoder complexity (0-10; the
	// transport's default otherwise), to see what it costs.
	benchOpusEnv = "HOLDLINE_BENCH_OPUS_COMPLEXITY"
	// benchHeapEnv names a file to write a heap profile to (with ".N"
	// added) while the sessions are live.
	benchHeapEnv = "HOLDLINE_BENCH_HEAPPROFILE"
	// fleetEnv carries the fleet's configuration (JSON) to the child
	// process; TestBenchClientFleet runs only when it is set.
	fleetEnv = "HOLDLINE_BENCH_FLEET"
	// fleetPrefix marks the child's protocol lines on its stdout, among
	// whatever else the test binary prints there.
	fleetPrefix = "holdline-fleet "
)

var (
	benchSessions    = []int{25, 50, 100, 150}
	benchWindow      = 10 * time.Second
	benchClientNice  = 19
	fleetDialers     = 8                       // offers in flight at once
	fleetGap         = 60 * time.Millisecond   // a hole in the agent's audio, as a client hears it
	fleetStagger     = 3 * time.Second         // the clients' first moves spread over this
	fleetToneToText  = 1500 * time.Millisecond // from a client's tone to its typed line
	fleetTone        = 400 * time.Millisecond
	fleetLines       = []string{"Book a table for two at seven", "What times are available?", "Hello"}
	fleetConnectBase = 30 * time.Second
	fleetConnectPer  = 300 * time.Millisecond // per session, on top of fleetConnectBase
)

// fleetConfig is what the benchmark tells its client process.
type fleetConfig struct {
	URL     string        `json:"url"`
	Client  string        `json:"client"` // "rtctest" or "light" (lightClient)
	N       int           `json:"n"`
	Window  time.Duration `json:"window"`
	Connect time.Duration `json:"connect"` // to connect all and hear every greeting
	Nice    int           `json:"nice"`
	// Speech makes every client speak booking phrases (espeak-ng's voice)
	// through the window, one every speechGap after the last, instead of
	// a tone and a typed line: for servers whose recogniser listens
	// (BenchmarkLocalEngines).
	Speech bool `json:"speech,omitempty"`
	// Delete ends every client's session with DELETE at "bye".
	Delete bool `json:"delete,omitempty"`
}

// fleetMsg is a line from the client process: "ready" once every client
// is connected and has heard its greeting begin, "result" after the
// window, "error" when it gave up.
type fleetMsg struct {
	Type  string `json:"type"`
	Error string `json:"error,omitempty"`

	// ready: dialling and greetings, and how many clients made it.
	SetupSeconds float64 `json:"setup_s,omitempty"`
	Connected    int     `json:"connected,omitempty"`
	Failed       int     `json:"failed,omitempty"` // Error says why the first did

	// result: over the window, all clients.
	CPUSeconds  float64 `json:"cpu_s,omitempty"` // the client process's user+sys
	WallSeconds float64 `json:"wall_s,omitempty"`
	Packets     int     `json:"packets,omitempty"` // agent packets received
	Gaps        int     `json:"gaps,omitempty"`    // holes > fleetGap between them
	MaxGapMS    float64 `json:"max_gap_ms,omitempty"`
	Sent        int     `json:"sent,omitempty"`    // typed lines sent
	Replies     int     `json:"replies,omitempty"` // clients that heard the agent after their line
}

// BenchmarkConcurrentSessions measures what a session costs the server:
// for each N it starts a server (scripted providers: the booking agent on
// the demo model, a tone voice, a scripted recogniser) and N pion WebRTC
// clients, waits until every client hears its greeting begin, then over a
// steady window (10 s) in which every client makes a sound (the VAD and
// the recogniser run) and types a line (a turn with tools and speech runs)
// at times staggered over the first 3 s, it reports
//
//	server-cpu-%/session  the benchmark process's CPU (user+sys, getrusage)
//	                      over the window, in % of one core, per session
//	server-cpu-%          the same for all sessions (100 per core is the machine)
//	client-cpu-%/session  the client process's, for context
//	other-cpu-%           other processes' CPU (/proc/*/stat): it skews everything
//	steal-cpu-%           CPU the hypervisor took from this VM (/proc/stat): likewise
//	heap-KiB/session      Go heap in use with N sessions minus before, per session
//	live-KiB/session      live Go heap (HeapAlloc after GC), likewise
//	rss-KiB/session       VmRSS likewise (it has libopus's C memory too)
//	missed-frames         output frame periods skipped (srv.MissedFrames): a player
//	                      more than media.MaxCatchUp periods late; the deadline
//	                      misses, must be 0
//	late-frames           frames sent a period or more behind their slot and caught
//	                      up (srv.LateFrames): not lost, but the client's jitter
//	                      buffer had to absorb them
//	packet-gaps           holes > 60 ms between consecutive agent packets (by RTP
//	                      timestamp; the sender pauses in silence) as the clients
//	                      heard them (client lateness counts too)
//	max-gap-ms            the longest such hole
//	sessions              sessions live at the end of the window
//	replies               clients that heard the agent after their typed line
//
// "Per session" divides by the clients that connected and heard their
// greeting (N unless the log says SHORT). Misses, saturation and a short
// fleet are logged (MISSED, SATURATED, NOISY, SHORT) rather than failed,
// so that the figures still print.
//
// The clients run in a child process (this test binary again, running
// TestBenchClientFleet), so their Opus codecs, pion stacks and tickers do
// not count in the server's CPU figure; the child runs at nice 19 by
// default so that the server gets the CPU first, as on a dedicated host
// (HOLDLINE_BENCH_CLIENT_NICE=0 to compete as equals). rtctest clients cost
// 1-1.7% of a core each, which on a 2-core machine starves the server well
// before 100 sessions; HOLDLINE_BENCH_CLIENT=light uses lightClient, which
// sends the server the same packets for about a third of that.
//
// Also: HOLDLINE_BENCH_SESSIONS=100 (or 25,50) for other session counts,
// HOLDLINE_BENCH_WINDOW=30s for another window, HOLDLINE_BENCH_OPUS_COMPLEXITY
// for another server encoder complexity (default 5), and
// HOLDLINE_BENCH_HEAPPROFILE=/tmp/heap for a heap profile taken while the
// sessions are live.
//
// The measurement is one run per sub-benchmark and ignores b.N: a run
// takes longer than the default -benchtime, so the framework calls it
// once; pass -benchtime 1x to say so (and -count to repeat). ns/op is the
// window.
//
//	go test -run '^$' -bench BenchmarkConcurrentSessions -benchtime 1x ./server
//	HOLDLINE_BENCH_SESSIONS=100 go test -run '^$' -bench ConcurrentSessions -benchtime 1x -cpuprofile cpu.out ./server
func BenchmarkConcurrentSessions(b *testing.B) {
	ns := sessionCounts(b, benchSessions)
	window := benchWindow
	if v := os.Getenv(benchWindowEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 2*time.Second {
			b.Fatalf("%s=%q: want a duration of at least 2s", benchWindowEnv, v)
		}
		window = d
	}
	nice := benchClientNice
	if v := os.Getenv(benchNiceEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 19 {
			b.Fatalf("%s=%q: want 0..19", benchNiceEnv, v)
		}
		nice = n
	}
	client := "rtctest"
	switch v := os.Getenv(benchClientEnv); v {
	case "", "rtctest":
	case "light":
		client = v
	default:
		b.Fatalf("%s=%q: want rtctest or light", benchClientEnv, v)
	}
	complexity := -1
	if v := os.Getenv(benchOpusEnv); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 0 || c > 10 {
			b.Fatalf("%s=%q: want 0..10", benchOpusEnv, v)
		}
		complexity = c
	}
	for _, n := range ns {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			benchSessionsOnce(b, n, benchRun{window: window, nice: nice, opusComplexity: complexity, client: client})
		})
	}
}

// benchRun is how BenchmarkConcurrentSessions runs, from its environment.
type benchRun struct {
	window         time.Duration
	nice           int
	opusComplexity int // -1: the transport's default
	client         string
}

// sessionCounts is HOLDLINE_BENCH_SESSIONS ("100" or "25,50"), or def.
func sessionCounts(b *testing.B, def []int) []int {
	v := os.Getenv(benchSessionsEnv)
	if v == "" {
		return def
	}
	var ns []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want session counts like 25,50,100", benchSessionsEnv, v)
		}
		ns = append(ns, n)
	}
	return ns
}

func benchSessionsOnce(b *testing.B, n int, run benchRun) {
	window := run.window
	b.StopTimer()
	// The baseline: nothing of an earlier run left, memory given back.
	debug.FreeOSMemory()
	heap0, live0 := heapStats()
	rss0 := rssKiB(b)

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []server.Option{server.WithAgentName("booking"), server.WithMaxSessions(n + 10), server.WithLogger(logger)}
	if run.opusComplexity >= 0 {
		t, err := webrtc.NewTransport(webrtc.WithLogger(logger), webrtc.WithOpus(run.opusComplexity, 32000))
		if err != nil {
			b.Fatal(err)
		}
		opts = append(opts, server.WithTransport(t))
	}
	agents := &testAgents{}
	srv, err := server.New(agents.newAgent, opts...)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		srv.Close()
	}()

	cfg := fleetConfig{URL: hs.URL, N: n, Client: run.client, Window: window, Connect: fleetConnectBase + time.Duration(n)*fleetConnectPer, Nice: run.nice}
	fleet := startFleet(b, cfg)

	msg := fleet.next(b, cfg.Connect+30*time.Second)
	if msg.Type != "ready" {
		b.Fatalf("client fleet: %s %s", msg.Type, msg.Error)
	}
	up := msg.Connected
	b.Logf("%d of %d clients connected and greeted in %.1fs; %d sessions live", up, n, msg.SetupSeconds, srv.Sessions())
	if msg.Failed > 0 {
		// Measure what the others cost all the same: "sessions" says it.
		b.Logf("SHORT: %d of %d clients did not connect or hear their greeting: %s", msg.Failed, n, msg.Error)
	}

	// The window.
	missed0, late0 := srv.MissedFrames(), srv.LateFrames()
	cpu0 := cpuSeconds()
	steal0 := stolenCPU(b)
	others0 := otherProcsCPU(fleet.cmd.Process.Pid)
	start := time.Now()
	fleet.send(b, "go")
	b.StartTimer()
	// Where in the window frames went missing, by second.
	var missedBySecond []uint64
	for sec, prev := 1, missed0; time.Duration(sec)*time.Second <= window; sec++ {
		time.Sleep(time.Until(start.Add(time.Duration(sec) * time.Second)))
		m := srv.MissedFrames()
		missedBySecond = append(missedBySecond, m-prev)
		prev = m
	}
	time.Sleep(time.Until(start.Add(window)))
	b.StopTimer()
	cpu1 := cpuSeconds()
	steal1 := stolenCPU(b)
	others1 := otherProcsCPU(fleet.cmd.Process.Pid)
	wall := time.Since(start).Seconds()
	missed := srv.MissedFrames() - missed0
	late := srv.LateFrames() - late0
	live := srv.Sessions()

	res := fleet.next(b, 30*time.Second)
	if res.Type != "result" {
		b.Fatalf("client fleet: %s %s", res.Type, res.Error)
	}
	// Memory with every session still live.
	debug.FreeOSMemory()
	heap1, live1 := heapStats()
	rss1 := rssKiB(b)
	if path := os.Getenv(benchHeapEnv); path != "" {
		writeHeapProfile(b, fmt.Sprintf("%s.%d", path, n))
	}
	fleet.send(b, "bye")
	fleet.wait(b)

	perSession := func(v float64) float64 { return v / float64(up) }
	serverCPU := 100 * (cpu1 - cpu0) / wall
	b.ReportMetric(perSession(serverCPU), "server-cpu-%/session")
	b.ReportMetric(serverCPU, "server-cpu-%")
	clientCPU := 100 * res.CPUSeconds / res.WallSeconds
	b.ReportMetric(perSession(clientCPU), "client-cpu-%/session")
	// The rest of the machine: other processes, or a hypervisor taking the
	// CPU, skew everything.
	steal := 100 * (steal1 - steal0) / wall
	others := 100 * others1.since(others0) / wall
	b.ReportMetric(others, "other-cpu-%")
	b.ReportMetric(steal, "steal-cpu-%")
	b.ReportMetric(perSession(float64(heap1)-float64(heap0))/1024, "heap-KiB/session")
	b.ReportMetric(perSession(float64(live1)-float64(live0))/1024, "live-KiB/session")
	b.ReportMetric(perSession(float64(rss1-rss0)), "rss-KiB/session")
	b.ReportMetric(float64(missed), "missed-frames")
	b.ReportMetric(float64(late), "late-frames")
	b.ReportMetric(float64(res.Gaps), "packet-gaps")
	b.ReportMetric(res.MaxGapMS, "max-gap-ms")
	b.ReportMetric(float64(live), "sessions")
	b.ReportMetric(float64(res.Replies), "replies")
	b.Logf("window %.1fs: server %.0f%% of a core, clients %.0f%%, other processes %.0f%%, stolen by the hypervisor %.0f%%; %d agent packets heard (%.0f%% of the window: the rest was silence, not sent), %d gaps > %v (max %.0f ms); %d/%d lines answered",
		wall, serverCPU, clientCPU, others, steal, res.Packets,
		100*float64(res.Packets)/(float64(up)*res.WallSeconds*50),
		res.Gaps, fleetGap, res.MaxGapMS, res.Replies, res.Sent)
	// Misses and short runs are reported, not failed: a failed benchmark
	// prints none of its figures.
	if missed > 0 {
		b.Logf("MISSED: %d output frames over %d sessions; by second of the window: %v", missed, up, missedBySecond)
	}
	if busy := serverCPU + clientCPU + others + steal; busy > 90*float64(runtime.NumCPU()) {
		b.Logf("SATURATED: %.0f%% of %d cores busy; the server's figure is what it got, not what it needed", busy, runtime.NumCPU())
	}
	if steal > 5 {
		b.Logf("NOISY: the hypervisor took %.0f%% of a core; wakeups were late, misses may not be the server's", steal)
	}
	if live != up {
		b.Logf("SHORT: %d sessions live at the end of the window; want %d", live, up)
	}
}

// fleet is the client process, seen from the benchmark.
type fleet struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan fleetMsg
	stderr *tailBuffer
	done   chan error
}

func startFleet(b *testing.B, cfg fleetConfig) *fleet {
	spec, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	limit := cfg.Connect + cfg.Window + 2*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBenchClientFleet$", "-test.count=1", "-test.timeout="+limit.String())
	cmd.Env = append(os.Environ(), fleetEnv+"="+string(spec))
	cmd.WaitDelay = 5 * time.Second
	f := &fleet{cmd: cmd, msgs: make(chan fleetMsg, 16), stderr: &tailBuffer{max: 8 << 10}, done: make(chan error, 1)}
	cmd.Stdout = &lineWriter{line: f.line}
	cmd.Stderr = f.stderr
	if f.stdin, err = cmd.StdinPipe(); err != nil {
		cancel()
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		b.Fatal(err)
	}
	go func() { f.done <- cmd.Wait() }()
	// Whatever happens to the benchmark, the child goes with it.
	b.Cleanup(func() {
		cancel()
		f.wait(b)
	})
	return f
}

func (f *fleet) line(s string) {
	rest, ok := strings.CutPrefix(s, fleetPrefix)
	if !ok {
		return
	}
	var m fleetMsg
	if err := json.Unmarshal([]byte(rest), &m); err != nil {
		m = fleetMsg{Type: "error", Error: "bad line from the fleet: " + s}
	}
	f.msgs <- m
}

// next waits for the child's next message.
func (f *fleet) next(b *testing.B, timeout time.Duration) fleetMsg {
	b.Helper()
	select {
	case m := <-f.msgs:
		return m
	case err := <-f.done:
		f.done <- err
		b.Fatalf("the client fleet exited: %v; stderr:\n%s", err, f.stderr)
	case <-time.After(timeout):
		b.Fatalf("no word from the client fleet in %v; stderr:\n%s", timeout, f.stderr)
	}
	return fleetMsg{}
}

func (f *fleet) send(b *testing.B, cmd string) {
	b.Helper()
	if _, err := io.WriteString(f.stdin, cmd+"\n"); err != nil {
		b.Fatalf("telling the client fleet %q: %v", cmd, err)
	}
}

// wait waits for the child to exit (once the benchmark's context ends it
// is killed).
func (f *fleet) wait(b *testing.B) {
	f.stdin.Close()
	err := <-f.done
	f.done <- err
	if err != nil && !b.Failed() {
		b.Errorf("client fleet: %v; stderr:\n%s", err, f.stderr)
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

// cpuSeconds is this process's user+sys CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// stolenCPU is the CPU time the hypervisor took from this machine's CPUs
// (steal in /proc/stat), in seconds. (Its busy times are sampled at the
// tick and miss a load that wakes every 20 ms, so they are not used.)
func stolenCPU(tb testing.TB) float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		tb.Fatalf("/proc/stat: %q", line)
	}
	tick := func(i int) float64 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			tb.Fatalf("/proc/stat: %q", line)
		}
		return v / 100 // USER_HZ
	}
	return tick(8) // user nice system idle iowait irq softirq steal
}

// procsCPU is the CPU time, in seconds, of each process but this one and
// the excluded, with their reaped children.
type procsCPU map[int]float64

func otherProcsCPU(exclude ...int) procsCPU {
	out := procsCPU{}
	dirs, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self || slices.Contains(exclude, pid) {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		var ticks float64
		for _, s := range f[11:15] { // utime stime cutime cstime
			v, _ := strconv.ParseFloat(s, 64)
			ticks += v
		}
		out[pid] = ticks / 100 // USER_HZ
	}
	return out
}

// since returns the CPU time used from then to p: by the processes of both,
// and all of it for processes started since.
func (p procsCPU) since(then procsCPU) float64 {
	var sum float64
	for pid, v := range p {
		sum += max(0, v-then[pid])
	}
	return sum
}

func writeHeapProfile(tb testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatal(err)
	}
}

// heapStats returns the heap in use and the live heap, in bytes; call it
// after a GC.
func heapStats() (inuse, live uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.HeapAlloc
}

// rssKiB is this process's resident set (VmRSS).
func rssKiB(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", v, err)
			}
			return n
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestBenchClientFleet is BenchmarkConcurrentSessions's client process: N
// rtctest clients of the server at HOLDLINE_BENCH_FLEET's URL. It says
// "ready" when all are connected and greeted, runs the window's script on
// "go", reports what the clients heard and its own CPU, and hangs up on
// "bye", when its stdin closes, or on its own a while after the window.
// Without HOLDLINE_BENCH_FLEET it skips.
func TestBenchClientFleet(t *testing.T) {
	spec := os.Getenv(fleetEnv)
	if spec == "" {
		t.Skip("the client process of BenchmarkConcurrentSessions; it runs only as that benchmark's child")
	}
	var cfg fleetConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil || cfg.N <= 0 || cfg.Window <= 0 {
		t.Fatalf("%s=%s: %v", fleetEnv, spec, err)
	}
	var outMu sync.Mutex
	emit := func(m fleetMsg) {
		b, _ := json.Marshal(m)
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stdout, "%s%s\n", fleetPrefix, b)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		emit(fleetMsg{Type: "error", Error: msg})
		t.Fatal(msg)
	}
	if cfg.Nice > 0 {
		if err := reniceSelf(cfg.Nice); err != nil {
			t.Logf("renice: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Connect+cfg.Window+time.Minute)
	defer cancel()

	// The benchmark's commands; EOF (the benchmark went away) ends the run
	// wherever it is.
	cmds := make(chan string)
	go func() {
		defer cancel()
		defer close(cmds)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			select {
			case cmds <- strings.TrimSpace(sc.Text()):
			case <-ctx.Done():
				return
			}
		}
	}()
	await := func(want string, within time.Duration) bool {
		timer := time.NewTimer(within)
		defer timer.Stop()
		for {
			select {
			case c, ok := <-cmds:
				if !ok {
					return false
				}
				if c == want {
					return true
				}
			case <-timer.C:
				return false
			case <-ctx.Done():
				return false
			}
		}
	}

	// Connect everyone and wait for every greeting.
	setup := time.Now()
	dial := dialRTCTest
	if cfg.Client == "light" {
		dial = dialLight
	}
	clients := make([]fleetClient, cfg.N)
	defer func() {
		var wg sync.WaitGroup
		for _, c := range clients {
			if c != nil {
				wg.Go(func() { c.Close() })
			}
		}
		wg.Wait()
	}()
	cctx, ccancel := context.WithTimeout(ctx, cfg.Connect)
	defer ccancel()
	// A client that cannot connect or hear its greeting in time (an
	// overloaded machine) is left out and counted, so the run still says
	// what the rest cost.
	var (
		errMu    sync.Mutex
		failed   int
		firstErr error
	)
	failure := func(i int, err error) {
		errMu.Lock()
		defer errMu.Unlock()
		failed++
		if firstErr == nil {
			firstErr = fmt.Errorf("client %d: %w", i, err)
		}
	}
	dialers := make(chan struct{}, fleetDialers)
	var dialing sync.WaitGroup
	for i := range clients {
		dialing.Go(func() {
			dialers <- struct{}{}
			c, err := dial(cctx, cfg.URL)
			<-dialers
			if err != nil {
				failure(i, err)
				return
			}
			if err := waitLoud(cctx, c); err != nil {
				c.Close()
				failure(i, err)
				return
			}
			clients[i] = c
		})
	}
	dialing.Wait()
	ready := fleetMsg{Type: "ready", SetupSeconds: time.Since(setup).Seconds(), Connected: cfg.N - failed, Failed: failed}
	if firstErr != nil {
		ready.Error = firstErr.Error()
	}
	clients = slices.DeleteFunc(clients, func(c fleetClient) bool { return c == nil })
	if len(clients) == 0 {
		fail("no client connected: %v", firstErr)
	}
	emit(ready)

	if !await("go", time.Minute) {
		t.Fatal("no go from the benchmark")
	}
	cpu0 := cpuSeconds()
	start := time.Now()
	end := start.Add(cfg.Window)
	// Each client makes a short sound (the VAD and recogniser run; with
	// nothing scripted it is heard as noise), then types a line the agent
	// answers, at times staggered over the window's first seconds.
	stagger := min(fleetStagger, cfg.Window/3)
	sentAt := make([]time.Time, len(clients))
	var script sync.WaitGroup
	var spoken speechScript
	if cfg.Speech {
		var err error
		if spoken, err = speakFleet(ctx, clients, start, end, stagger); err != nil {
			fail("speech: %v", err)
		}
	}
	for i, c := range clients {
		if cfg.Speech {
			break
		}
		script.Go(func() {
			at := start.Add(time.Duration(i) * stagger / time.Duration(len(clients)))
			if !sleepUntil(ctx, at) {
				return
			}
			c.SayTone()
			if !sleepUntil(ctx, at.Add(fleetToneToText)) {
				return
			}
			if err := c.SendText(fleetLines[i%len(fleetLines)]); err == nil {
				sentAt[i] = time.Now()
			}
		})
	}
	sleepUntil(ctx, end)
	cpu1 := cpuSeconds()
	wall := time.Since(start).Seconds()
	script.Wait()

	res := fleetMsg{Type: "result", CPUSeconds: cpu1 - cpu0, WallSeconds: wall}
	if cfg.Speech {
		res.Sent, res.Replies = spoken.wait(clients, end)
	}
	for i, c := range clients {
		levels := c.Levels()
		var prev rtctest.Level
		for _, l := range levels {
			if l.At.After(end) {
				break
			}
			if !l.At.Before(start) {
				res.Packets++
				// A hole between packets that follow each other in the
				// media clock is audio that came late; across a jump of
				// the timestamp the sender paused in silence.
				if !prev.At.IsZero() && l.Timestamp-prev.Timestamp == 960 {
					if gap := l.At.Sub(prev.At); gap > fleetGap {
						res.Gaps++
						res.MaxGapMS = max(res.MaxGapMS, float64(gap)/float64(time.Millisecond))
					}
				}
			}
			prev = l
		}
		if !sentAt[i].IsZero() {
			res.Sent++
			for _, l := range levels {
				if l.At.After(sentAt[i]) && !l.At.After(end) && l.RMS > 0.01 {
					res.Replies++
					break
				}
			}
		}
	}
	emit(res)
	await("bye", 30*time.Second)
	if cfg.Delete {
		// The benchmark closes stdin after "bye", which ends ctx.
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				if err := c.Delete(dctx, cfg.URL); err != nil {
					t.Logf("delete: %v", err)
				}
			})
		}
		wg.Wait()
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// reniceSelf sets every thread of this process to nice; Linux keeps
// niceness per thread, and threads made later inherit it.
func reniceSelf(nice int) error {
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

// fleetClient is one caller of the fleet.
type fleetClient interface {
	SayTone() // fleetTone on the microphone
	// SayPhrase puts speechPhrases[i] (fleetSpeech) on the microphone.
	SayPhrase(i int)
	SendText(text string) error
	Levels() []rtctest.Level
	// Delete ends the session.
	Delete(ctx context.Context, base string) error
	Close() error
}

type rtctestClient struct{ *rtctest.Client }

func (c rtctestClient) SayTone() { c.Say(rtctest.Tone(fleetTone, 0.3)) }

func (c rtctestClient) SayPhrase(i int) {
	sp, _ := fleetSpeech()
	c.Say(append(sp.pcm[i], rtctest.Silence(100*time.Millisecond)...))
}

func (c rtctestClient) Delete(ctx context.Context, base string) error {
	return c.Client.Delete(ctx, base, "")
}

func dialRTCTest(ctx context.Context, base string) (fleetClient, error) {
	c, err := rtctest.Dial(ctx, base, rtctest.Options{})
	if err != nil {
		return nil, err
	}
	return rtctestClient{c}, nil
}

// waitLoud waits until c hears the agent.
func waitLoud(ctx context.Context, c fleetClient) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !loudAfter(c.Levels(), time.Time{}) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the greeting: %w", ctx.Err())
		}
	}
	return nil
}

func loudAfter(levels []rtctest.Level, t time.Time) bool {
	for _, l := range levels {
		if l.At.After(t) && l.RMS > 0.01 {
			return true
		}
	}
	return false
}

// lightClient is a cheaper stand-in for rtctest.Client
// (HOLDLINE_BENCH_CLIENT=light): the same offer, data channel, hello and
// 20 ms microphone packets, so the server does the same work, but the
// microphone's Opus packets are encoded once for the whole fleet rather
// than every 20 ms by every client (an encoder at rtctest's settings
// costs about 350 us a frame here, 1.75% of a core per client), and the
// agent's audio is decoded at 16 kHz. On a small machine it leaves the
// server the CPU a real deployment's callers would not take.
type lightClient struct {
	location string // the session's URL path
	pc       *pion.PeerConnection
	track    *pion.TrackLocalStaticSample
	dc       *pion.DataChannel
	stop     chan struct{}
	wg       sync.WaitGroup

	mu     sync.Mutex
	levels []rtctest.Level
	mic    [][]byte // packets waiting to be sent
}

// lightMic is the fleet's microphone audio, encoded once.
var lightMic = sync.OnceValues(func() (lightPackets, error) {
	enc, err := opus.NewEncoder(48000, 1, opus.AppVoIP) // as rtctest's
	if err != nil {
		return lightPackets{}, err
	}
	const frame = 960
	buf := make([]byte, 1500)
	encode := func(pcm []int16) ([]byte, error) {
		n, err := enc.Encode(pcm, buf)
		return append([]byte(nil), buf[:n]...), err
	}
	var p lightPackets
	silence := make([]int16, frame)
	for range 5 { // past the encoder's start
		if p.silence, err = encode(silence); err != nil {
			return p, err
		}
	}
	tone := rtctest.Tone(fleetTone, 0.3)
	for off := 0; off+frame <= len(tone); off += frame {
		pkt, err := encode(tone[off : off+frame])
		if err != nil {
			return p, err
		}
		p.tone = append(p.tone, pkt)
	}
	return p, nil
})

type lightPackets struct {
	silence []byte
	tone    [][]byte
}

var lightAPI = sync.OnceValues(func() (*pion.API, error) {
	m := &pion.MediaEngine{}
	if err := m.RegisterCodec(pion.RTPCodecParameters{
		RTPCodecCapability: pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"},
		PayloadType:        111,
	}, pion.RTPCodecTypeAudio); err != nil {
		return nil, err
	}
	ir := &interceptor.Registry{}
	if err := pion.RegisterDefaultInterceptors(m, ir); err != nil {
		return nil, err
	}
	var se pion.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]pion.NetworkType{pion.NetworkTypeUDP4})
	se.SetInterfaceFilter(func(name string) bool { return name == "lo" })
	return pion.NewAPI(pion.WithMediaEngine(m), pion.WithInterceptorRegistry(ir), pion.WithSettingEngine(se)), nil
})

func dialLight(ctx context.Context, base string) (fleetClient, error) {
	if _, err := lightMic(); err != nil {
		return nil, err
	}
	api, err := lightAPI()
	if err != nil {
		return nil, err
	}
	pc, err := api.NewPeerConnection(pion.Configuration{})
	if err != nil {
		return nil, err
	}
	c := &lightClient{pc: pc, stop: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	c.track, err = pion.NewTrackLocalStaticSample(pion.RTPCodecCapability{MimeType: pion.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "mic", "fleet")
	if err != nil {
		return nil, err
	}
	if _, err := pc.AddTransceiverFromTrack(c.track, pion.RTPTransceiverInit{Direction: pion.RTPTransceiverDirectionSendrecv}); err != nil {
		return nil, err
	}
	if c.dc, err = pc.CreateDataChannel(webrtc.ChannelLabel, nil); err != nil {
		return nil, err
	}
	opened := make(chan struct{})
	c.dc.OnOpen(func() {
		_ = c.dc.SendText(`{"type":"hello","after":0}`) // the events, as a browser asks
		close(opened)
	})
	connected := make(chan struct{})
	var once sync.Once
	pc.OnConnectionStateChange(func(s pion.PeerConnectionState) {
		if s == pion.PeerConnectionStateConnected {
			once.Do(func() { close(connected) })
		}
	})
	pc.OnTrack(func(tr *pion.TrackRemote, _ *pion.RTPReceiver) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.listen(tr)
		}()
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return nil, err
	}
	gathered := pion.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		return nil, err
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/sessions", strings.NewReader(pc.LocalDescription().SDP))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/sdp")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("offer: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	c.location = resp.Header.Get("Location")
	if err := pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeAnswer, SDP: string(answer)}); err != nil {
		return nil, err
	}
	for _, ch := range []chan struct{}{connected, opened} {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting: %w", ctx.Err())
		}
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.speak()
	}()
	ok = true
	return c, nil
}

// listen records the level of every packet of the agent's audio.
func (c *lightClient) listen(tr *pion.TrackRemote) {
	dec, err := opus.NewDecoder(16000, 1)
	if err != nil {
		return
	}
	pcm := make([]int16, 6*320)
	for {
		pkt, _, err := tr.ReadRTP()
		if err != nil {
			return
		}
		n, err := dec.Decode(pkt.Payload, pcm)
		if err != nil {
			continue
		}
		var sum float64
		for _, v := range pcm[:n] {
			f := float64(v) / 32768
			sum += f * f
		}
		lv := rtctest.Level{At: time.Now(), RMS: math.Sqrt(sum / float64(max(n, 1))), Timestamp: pkt.Timestamp}
		c.mu.Lock()
		c.levels = append(c.levels, lv)
		c.mu.Unlock()
	}
}

// speak sends a microphone packet every 20 ms: the queued ones, else
// silence.
func (c *lightClient) speak() {
	mic, _ := lightMic()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		pkt := mic.silence
		if len(c.mic) > 0 {
			pkt, c.mic = c.mic[0], c.mic[1:]
		}
		c.mu.Unlock()
		_ = c.track.WriteSample(pionmedia.Sample{Data: append([]byte(nil), pkt...), Duration: 20 * time.Millisecond})
	}
}

func (c *lightClient) SayPhrase(i int) {
	sp, _ := fleetSpeech()
	c.mu.Lock()
	c.mic = append(c.mic, sp.packets[i]...)
	c.mu.Unlock()
}

func (c *lightClient) Delete(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, base+c.location, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("DELETE %s: HTTP %d", c.location, resp.StatusCode)
	}
	return nil
}

func (c *lightClient) SayTone() {
	mic, _ := lightMic()
	c.mu.Lock()
	c.mic = append(c.mic, mic.tone...)
	c.mu.Unlock()
}

func (c *lightClient) SendText(text string) error {
	b, err := json.Marshal(map[string]any{"type": "text", "text": text})
	if err != nil {
		return err
	}
	return c.dc.SendText(string(b))
}

func (c *lightClient) Levels() []rtctest.Level {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.levels)
}

func (c *lightClient) Close() error {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	err := c.pc.Close()
	c.wg.Wait()
	return err
}
