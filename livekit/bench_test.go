//go:build linux

package livekit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/fleetproc"
	"github.com/holdline/holdline/internal/livekittest"
	"github.com/holdline/holdline/internal/procstat"
	"github.com/holdline/holdline/livekit"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// Environment of BenchmarkLiveKitRooms.
const (
	// roomsEnv overrides the room counts: "50" or "10,50".
	roomsEnv = "HOLDLINE_BENCH_ROOMS"
	// roomsWindowEnv overrides the measured window: "20s", "1m".
	roomsWindowEnv = "HOLDLINE_BENCH_WINDOW"
	// roomsNiceEnv sets the callers' process's niceness (default 19; 0 to
	// let the callers compete with Holdline and livekit-server as equals).
	roomsNiceEnv = "HOLDLINE_BENCH_CLIENT_NICE"
	// roomFleetEnv carries the callers' configuration (JSON) to the child
	// process; TestLiveKitRoomFleet runs only when it is set.
	roomFleetEnv = "HOLDLINE_BENCH_LIVEKIT_FLEET"
)

var (
	benchRooms      = []int{10, 50}
	benchRoomWindow = 20 * time.Second
	roomDialers     = 8                      // callers joining at once
	roomStagger     = 3 * time.Second        // the callers' first turns spread over this
	roomTone        = 700 * time.Millisecond // a turn: a tone the scripted recogniser hears as the next line
	roomAnswerTime  = 3 * time.Second        // no turn is taken with less of the window left
	roomQuiet       = 2 * time.Second        // an answer (or the greeting) is over after this much quiet, listening
	roomThink       = 500 * time.Millisecond // from the end of an answer to the caller's next turn
	roomTurnMax     = 10 * time.Second       // the longest a caller waits for an answer before its next turn
	roomConnectBase = 30 * time.Second
	roomConnectPer  = 500 * time.Millisecond // per room, on top of roomConnectBase
	// The callers' lines, in order, one a turn: the recogniser of every
	// agent has them queued, more than a window's turns.
	roomLines = []string{"What times are available?", "Book a table for two at seven", "Hello"}
)

// roomFleetConfig is what the benchmark tells its callers' process.
type roomFleetConfig struct {
	URL       string        `json:"url"`
	APIKey    string        `json:"api_key"`
	APISecret string        `json:"api_secret"`
	Rooms     []string      `json:"rooms"`
	Window    time.Duration `json:"window"`
	Connect   time.Duration `json:"connect"` // to join every room and hear every greeting
	Stagger   time.Duration `json:"stagger"`
	Nice      int           `json:"nice"`
}

// roomFleetMsg is a line from the callers' process: "ready" once every
// caller has joined its room and heard its greeting to the end, "result"
// after the window, "error" when it gave up.
type roomFleetMsg struct {
	fleetproc.Status

	// result, over the window and all callers
	CPUSeconds  float64  `json:"cpu_s,omitempty"`
	WallSeconds float64  `json:"wall_s,omitempty"`
	Packets     int      `json:"packets,omitempty"`  // agent packets heard
	Turns       int      `json:"turns,omitempty"`    // tones the callers' microphones played
	Answered    int      `json:"answered,omitempty"` // turns after which the agent was heard
	Misses      []string `json:"misses,omitempty"`   // "room turn k" of the others
}

// benchRecorder is what a run of BenchmarkLiveKitRooms reports to: a
// *testing.B, or a test's smokeRecorder.
type benchRecorder interface {
	testing.TB
	StartTimer()
	StopTimer()
	ReportMetric(n float64, unit string)
}

// BenchmarkLiveKitRooms measures what a LiveKit room costs Holdline: for
// each N it starts livekit-server (livekittest), serves N rooms with
// livekit.Transport in this process (the booking agent on the demo model,
// a tone voice at 4 words a second, a scripted recogniser with the
// callers' lines queued), and has N callers, one a room, join from a
// child process (this test binary again, running TestLiveKitRoomFleet)
// and hear their greetings to the end. Then over a window (20 s) every
// caller takes turns, the first ones staggered over 3 s: a 700 ms tone on
// its microphone, which the agent's recogniser takes as the next of
// roomLines; the agent answers on its track, and half a second after the
// answer is over (2 s of quiet, the agent "listening") the caller takes its next turn, as long
// as 3 s of the window are left. It reports
//
//	holdline-cpu-%/room  this process's CPU (user+sys, getrusage) over the
//	                     window, in % of one core, per room
//	livekit-cpu-%/room   livekit-server's (its process group's, /proc/PID/stat)
//	caller-cpu-%/room    the callers' process's, for context
//	other-cpu-%          other processes' CPU: it skews everything
//	steal-cpu-%          CPU the hypervisor took from this VM (/proc/stat)
//	heap-KiB/room        Go heap in use with N rooms live minus before, per room
//	rss-KiB/room         this process's VmRSS likewise (libopus's C memory too)
//	livekit-rss-KiB/room livekit-server's VmRSS with N rooms minus when it was idle
//	turns                the callers' turns in the window (about 3 a caller in 20 s)
//	answered-%           the share of them after which the caller heard the
//	                     agent's track (before its next turn, or the window's
//	                     end); the misses are logged (MISSED) by room and turn
//	agent-turns          user turns the agents committed (events.UserTurn), a
//	                     cross-check of turns
//
// "Per room" divides by the rooms whose caller joined and heard its
// greeting (N unless the log says SHORT). Misses and saturation are
// logged rather than failed, so that the figures still print; the callers
// run at nice 19 (HOLDLINE_BENCH_CLIENT_NICE) so that Holdline and
// livekit-server get the CPU first, as on dedicated hosts.
//
// HOLDLINE_BENCH_ROOMS=50 (or 10,50) for other room counts,
// HOLDLINE_BENCH_WINDOW=30s for another window. One run per
// sub-benchmark, ignoring b.N; ns/op is the window:
//
//	HOLDLINE_BENCH_ROOMS=50 go test -run '^$' -bench BenchmarkLiveKitRooms -benchtime 1x ./livekit
func BenchmarkLiveKitRooms(b *testing.B) {
	ns := fleetproc.EnvCounts(b, roomsEnv, benchRooms)
	window := fleetproc.EnvDuration(b, roomsWindowEnv, benchRoomWindow, 3*time.Second)
	nice := fleetproc.EnvInt(b, roomsNiceEnv, 19, 0, 19)
	for _, n := range ns {
		b.Run(fmt.Sprintf("rooms=%d", n), func(b *testing.B) {
			benchRoomsOnce(b, n, window, nice)
		})
	}
}

// A tiny BenchmarkLiveKitRooms (2 rooms, a short window), so that it
// cannot rot: every turn must be answered.
func TestLiveKitRoomsBenchmarkRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2-room run of BenchmarkLiveKitRooms takes 15 s")
	}
	r := &smokeRecorder{T: t, metrics: map[string]float64{}}
	benchRoomsOnce(r, 2, 5*time.Second, 0)
	t.Logf("metrics: %v", r.metrics)
	if got := r.metrics["turns"]; got < 2 {
		t.Errorf("%v turns; want one a caller at least", got)
	}
	if got := r.metrics["answered-%"]; got != 100 {
		t.Errorf("%v%% of the turns answered; want 100", got)
	}
	for _, m := range []string{"holdline-cpu-%/room", "livekit-cpu-%/room", "heap-KiB/room", "rss-KiB/room"} {
		if v, ok := r.metrics[m]; !ok || v <= 0 {
			t.Errorf("%s = %v (reported %v); want more than 0", m, v, ok)
		}
	}
}

// smokeRecorder is a test as a benchRecorder: the metrics are kept.
type smokeRecorder struct {
	*testing.T
	metrics map[string]float64
}

func (r *smokeRecorder) StartTimer()                         {}
func (r *smokeRecorder) StopTimer()                          {}
func (r *smokeRecorder) ReportMetric(n float64, unit string) { r.metrics[unit] = n }

func benchRoomsOnce(b benchRecorder, n int, window time.Duration, nice int) {
	b.StopTimer()
	srv := livekittest.StartT(b)
	stagger := min(roomStagger, window/3)
	// The baseline: nothing of an earlier run left, memory given back.
	debug.FreeOSMemory()
	heap0, _ := procstat.HeapStats()
	rss0 := procstat.RSSKiB(b)
	lkRSS0 := procstat.RSSKiBOf(b, srv.PID())

	connect := roomConnectBase + time.Duration(n)*roomConnectPer
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// A turn takes 2 s at the least: the lines do not run out.
	agents := &testAgents{lines: make([]string, 4+int(window/time.Second))}
	for k := range agents.lines {
		agents.lines[k] = roomLines[k%len(roomLines)]
	}
	host, err := calls.New(agents.newAgent, calls.WithMaxCalls(n+10), calls.WithLogger(logger))
	if err != nil {
		b.Fatal(err)
	}
	defer host.Close()
	tr := livekit.NewTransport(host, livekit.WithLogger(logger), livekit.WithCallerTimeout(connect+time.Minute))

	// The agents join their rooms, then the callers theirs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rooms := make([]string, n)
	var serving sync.WaitGroup
	var serveMu sync.Mutex
	var serveErrs []string
	for i := range rooms {
		rooms[i] = fmt.Sprintf("bench-%d", i)
		job := livekit.Job{ID: "AJ_" + rooms[i], Room: rooms[i], URL: srv.URL, Token: agentToken(b, srv, rooms[i], "agent-"+rooms[i])}
		serving.Go(func() {
			if err := tr.Serve(ctx, job); err != nil && ctx.Err() == nil {
				serveMu.Lock()
				serveErrs = append(serveErrs, fmt.Sprintf("%s: %v", job.Room, err))
				serveMu.Unlock()
			}
		})
	}
	defer func() {
		cancel()
		done := make(chan struct{})
		go func() { serving.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Errorf("Serve did not return in 30s")
		}
	}()

	cfg := roomFleetConfig{URL: srv.URL, APIKey: srv.APIKey, APISecret: srv.APISecret, Rooms: rooms,
		Window: window, Connect: connect, Stagger: stagger, Nice: nice}
	spec, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	fleet := fleetproc.Start[roomFleetMsg](b, "TestLiveKitRoomFleet", roomFleetEnv+"="+string(spec), connect+window+2*time.Minute)
	msg := fleetproc.Ready(b, fleet, connect+30*time.Second)
	up := msg.Connected
	b.Logf("%d of %d callers joined and heard their greeting in %.1fs; %d calls live", up, n, msg.SetupSeconds, len(host.List()))
	userTurns0 := countAll(host, kind(events.UserTurn))

	// The window.
	lk0 := procstat.Group(srv.PID())
	exclude := append(slices.Collect(maps.Keys(lk0)), fleet.PID())
	cpu0 := procstat.CPUSeconds()
	steal0 := procstat.StolenCPU(b)
	others0 := procstat.Others(exclude...)
	start := time.Now()
	fleet.Send(b, "go")
	b.StartTimer()
	time.Sleep(window)
	b.StopTimer()
	cpu1 := procstat.CPUSeconds()
	steal1 := procstat.StolenCPU(b)
	lk1 := procstat.Group(srv.PID())
	others1 := procstat.Others(exclude...)
	wall := time.Since(start).Seconds()

	res := fleet.Next(b, 30*time.Second)
	if res.Type != "result" {
		b.Fatalf("callers: %s %s", res.Type, res.Error)
	}
	userTurns := countAll(host, kind(events.UserTurn)) - userTurns0
	live := len(host.List())
	// Memory with every room still live.
	debug.FreeOSMemory()
	heap1, _ := procstat.HeapStats()
	rss1 := procstat.RSSKiB(b)
	lkRSS1 := procstat.RSSKiBOf(b, srv.PID())
	fleet.Send(b, "bye")
	fleet.Wait(b)

	perRoom := func(v float64) float64 { return v / float64(max(up, 1)) }
	holdlineCPU := 100 * (cpu1 - cpu0) / wall
	lkCPU := 100 * lk1.Since(lk0) / wall
	callerCPU := 100 * res.CPUSeconds / res.WallSeconds
	others := 100 * others1.Since(others0) / wall
	steal := 100 * (steal1 - steal0) / wall
	answered := 100 * float64(res.Answered) / float64(max(res.Turns, 1))
	b.ReportMetric(perRoom(holdlineCPU), "holdline-cpu-%/room")
	b.ReportMetric(perRoom(lkCPU), "livekit-cpu-%/room")
	b.ReportMetric(perRoom(callerCPU), "caller-cpu-%/room")
	b.ReportMetric(others, "other-cpu-%")
	b.ReportMetric(steal, "steal-cpu-%")
	b.ReportMetric(perRoom(float64(heap1)-float64(heap0))/1024, "heap-KiB/room")
	b.ReportMetric(perRoom(float64(rss1-rss0)), "rss-KiB/room")
	b.ReportMetric(perRoom(float64(lkRSS1-lkRSS0)), "livekit-rss-KiB/room")
	b.ReportMetric(float64(res.Turns), "turns")
	b.ReportMetric(answered, "answered-%")
	b.ReportMetric(float64(userTurns), "agent-turns")
	b.Logf("window %.1fs: Holdline %.0f%% of a core, livekit-server %.0f%%, callers %.0f%%, other processes %.0f%%, stolen %.0f%%; heap %+d KiB, RSS %+d KiB, livekit-server RSS %+d KiB; %d/%d turns answered (%d user turns at the agents), %d agent packets heard; %d calls live",
		wall, holdlineCPU, lkCPU, callerCPU, others, steal, (int64(heap1)-int64(heap0))/1024, rss1-rss0, lkRSS1-lkRSS0,
		res.Answered, res.Turns, userTurns, res.Packets, live)
	if len(res.Misses) > 0 {
		b.Logf("MISSED: %d turns unanswered: %s", len(res.Misses), strings.Join(res.Misses, ", "))
	}
	if busy := holdlineCPU + lkCPU + callerCPU + others + steal; busy > 90*float64(runtime.NumCPU()) {
		b.Logf("SATURATED: %.0f%% of %d cores busy; the figures are what each got, not what it needed", busy, runtime.NumCPU())
	}
	if steal > 5 {
		b.Logf("NOISY: the hypervisor took %.0f%% of a core", steal)
	}
	if live != up {
		b.Logf("SHORT: %d calls live at the end of the window; want %d", live, up)
	}
	serveMu.Lock()
	defer serveMu.Unlock()
	if len(serveErrs) > 0 {
		b.Logf("Serve failed in %d rooms: %s", len(serveErrs), strings.Join(serveErrs, "; "))
	}
}

// countAll counts the events that match in all of host's calls.
func countAll(host *calls.Host, match func(events.Event) bool) int {
	total := 0
	for _, info := range host.List() {
		if c := host.Lookup(info.ID); c != nil {
			total += count(c, match)
		}
	}
	return total
}

// TestLiveKitRoomFleet is BenchmarkLiveKitRooms's callers' process: a
// livekittest.Caller in every room of HOLDLINE_BENCH_LIVEKIT_FLEET. It
// says "ready" when all have joined and heard their greeting to the end,
// runs the window's turns on "go", reports what the callers heard and its
// own CPU, and leaves on "bye", when its stdin closes, or on its own a
// while after the window. Without HOLDLINE_BENCH_LIVEKIT_FLEET it skips.
func TestLiveKitRoomFleet(t *testing.T) {
	spec := os.Getenv(roomFleetEnv)
	if spec == "" {
		t.Skip("the callers' process of BenchmarkLiveKitRooms; it runs only as that benchmark's child")
	}
	var cfg roomFleetConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil || len(cfg.Rooms) == 0 || cfg.Window <= 0 {
		t.Fatalf("%s=%s: %v", roomFleetEnv, spec, err)
	}
	run := fleetproc.Begin(t, cfg.Nice, cfg.Connect+cfg.Window+time.Minute)
	ctx := run.Ctx
	srv := &livekittest.Server{URL: cfg.URL, APIKey: cfg.APIKey, APISecret: cfg.APISecret}

	// Join every room and hear every greeting to its end.
	callers := make([]*livekittest.Caller, len(cfg.Rooms))
	defer func() {
		var wg sync.WaitGroup
		for _, c := range callers {
			if c != nil {
				wg.Go(c.Close)
			}
		}
		wg.Wait()
	}()
	cctx, ccancel := context.WithTimeout(ctx, cfg.Connect)
	defer ccancel()
	ready := fleetproc.Connect(t, cctx, len(cfg.Rooms), roomDialers, func(ctx context.Context, i int) error {
		room := cfg.Rooms[i]
		c, err := livekittest.DialCaller(ctx, srv, room, fmt.Sprintf("caller-%d", i))
		if err == nil {
			callers[i] = c
		}
		return err
	}, func(ctx context.Context, i int) error {
		err := callers[i].Wait(ctx, "the greeting to its end", answerOver("agent-"+cfg.Rooms[i], time.Time{}))
		if err != nil {
			callers[i].Close()
			callers[i] = nil
		}
		return err
	})
	fleetproc.Emit(roomFleetMsg{Status: ready})

	if !run.Commands.Await("go", time.Minute) {
		t.Fatal("no go from the benchmark")
	}
	cpu0 := procstat.CPUSeconds()
	start := time.Now()
	end := start.Add(cfg.Window)
	// The turns: a tone, the agent's answer, a pause, the next tone; the
	// first ones staggered.
	var script sync.WaitGroup
	for i, c := range callers {
		if c == nil {
			continue
		}
		script.Go(func() {
			agent := "agent-" + cfg.Rooms[i]
			at := start.Add(time.Duration(i) * cfg.Stagger / time.Duration(len(callers)))
			for fleetproc.SleepUntil(ctx, at) && end.Sub(at) >= roomAnswerTime {
				spoke := time.Now()
				c.Say(rtctest.Tone(roomTone, 0.3))
				// The answer over, or no answer in time: the next turn.
				wctx, wcancel := context.WithTimeout(ctx, roomTurnMax)
				_ = c.Wait(wctx, "the answer", answerOver(agent, spoke.Add(roomTone)))
				wcancel()
				at = time.Now().Add(roomThink)
			}
		})
	}
	fleetproc.SleepUntil(ctx, end)
	cpu1 := procstat.CPUSeconds()
	wall := time.Since(start).Seconds()
	script.Wait()

	// A turn is answered when the agent is heard after the tone's end
	// and before the caller's next turn (the last turn's answer may end
	// after the window: the callers wait for it, up to roomTurnMax).
	res := roomFleetMsg{Status: fleetproc.Status{Type: "result"}, CPUSeconds: cpu1 - cpu0, WallSeconds: wall}
	now := time.Now()
	for i, c := range callers {
		if c == nil {
			continue
		}
		agent := "agent-" + cfg.Rooms[i]
		levels := c.Levels(agent)
		for _, l := range levels {
			if !l.At.Before(start) && !l.At.After(end) {
				res.Packets++
			}
		}
		onsets, offsets := c.Onsets(), c.Offsets()
		for k, off := range offsets {
			if off.Before(start) || off.After(end) {
				continue
			}
			res.Turns++
			until := now
			for _, on := range onsets {
				if on.After(off) {
					until = on
					break
				}
			}
			if heardBetween(levels, off, until) {
				res.Answered++
			} else {
				res.Misses = append(res.Misses, fmt.Sprintf("%s turn %d", cfg.Rooms[i], k+1))
			}
		}
	}
	fleetproc.Emit(res)
	run.Commands.Await("bye", 30*time.Second)
}

// answerOver is a condition for Caller.Wait: the caller heard agent after
// from, and since then agent has been quiet and in lk.agent.state
// "listening" for roomQuiet. (An answer with tool calls has pauses
// between its parts, in which the state is "listening" or "thinking"
// for a moment.)
func answerOver(agent string, from time.Time) func(*livekittest.Caller) bool {
	return func(c *livekittest.Caller) bool {
		var loud time.Time
		for _, l := range c.Levels(agent) {
			if l.At.After(from) && l.RMS > rtctest.Loud {
				loud = l.At
			}
		}
		if loud.IsZero() || time.Since(loud) < roomQuiet {
			return false
		}
		var state livekittest.StateChange
		for _, s := range c.AgentStates() {
			if s.Identity == agent {
				state = s
			}
		}
		return state.State == livekit.StateListening && time.Since(state.At) >= roomQuiet
	}
}

func heardBetween(levels []rtctest.Level, from, until time.Time) bool {
	for _, l := range levels {
		if l.At.After(from) && l.At.Before(until) && l.RMS > rtctest.Loud {
			return true
		}
	}
	return false
}
