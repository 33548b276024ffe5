//go:build linux

package server_test

import (
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
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/interceptor"
	pion "github.com/pion/webrtc/v4"
	pionmedia "github.com/pion/webrtc/v4/pkg/media"

	"github.com/holdline/holdline/internal/fleetproc"
	"github.com/holdline/holdline/internal/procstat"
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
	// ready: dialling and greetings, and how many clients made it.
	fleetproc.Status

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
	ns := fleetproc.EnvCounts(b, benchSessionsEnv, benchSessions)
	window := fleetproc.EnvDuration(b, benchWindowEnv, benchWindow, 2*time.Second)
	nice := fleetproc.EnvInt(b, benchNiceEnv, benchClientNice, 0, 19)
	client := "rtctest"
	switch v := os.Getenv(benchClientEnv); v {
	case "", "rtctest":
	case "light":
		client = v
	default:
		b.Fatalf("%s=%q: want rtctest or light", benchClientEnv, v)
	}
	complexity := fleetproc.EnvInt(b, benchOpusEnv, -1, 0, 10)
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

func benchSessionsOnce(b *testing.B, n int, run benchRun) {
	window := run.window
	b.StopTimer()
	// The baseline: nothing of an earlier run left, memory given back.
	debug.FreeOSMemory()
	heap0, live0 := procstat.HeapStats()
	rss0 := procstat.RSSKiB(b)

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

	msg := fleetproc.Ready(b, fleet, cfg.Connect+30*time.Second)
	up := msg.Connected
	b.Logf("%d of %d clients connected and greeted in %.1fs; %d sessions live", up, n, msg.SetupSeconds, srv.Sessions())

	// The window.
	missed0, late0 := srv.MissedFrames(), srv.LateFrames()
	cpu0 := procstat.CPUSeconds()
	steal0 := procstat.StolenCPU(b)
	others0 := procstat.Others(fleet.PID())
	start := time.Now()
	fleet.Send(b, "go")
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
	cpu1 := procstat.CPUSeconds()
	steal1 := procstat.StolenCPU(b)
	others1 := procstat.Others(fleet.PID())
	wall := time.Since(start).Seconds()
	missed := srv.MissedFrames() - missed0
	late := srv.LateFrames() - late0
	live := srv.Sessions()

	res := fleet.Next(b, 30*time.Second)
	if res.Type != "result" {
		b.Fatalf("client fleet: %s %s", res.Type, res.Error)
	}
	// Memory with every session still live.
	debug.FreeOSMemory()
	heap1, live1 := procstat.HeapStats()
	rss1 := procstat.RSSKiB(b)
	if path := os.Getenv(benchHeapEnv); path != "" {
		writeHeapProfile(b, fmt.Sprintf("%s.%d", path, n))
	}
	fleet.Send(b, "bye")
	fleet.Wait(b)

	perSession := func(v float64) float64 { return v / float64(up) }
	serverCPU := 100 * (cpu1 - cpu0) / wall
	b.ReportMetric(perSession(serverCPU), "server-cpu-%/session")
	b.ReportMetric(serverCPU, "server-cpu-%")
	clientCPU := 100 * res.CPUSeconds / res.WallSeconds
	b.ReportMetric(perSession(clientCPU), "client-cpu-%/session")
	// The rest of the machine: other processes, or a hypervisor taking the
	// CPU, skew everything.
	steal := 100 * (steal1 - steal0) / wall
	others := 100 * others1.Since(others0) / wall
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

// startFleet starts the client process: this test binary again, running
// TestBenchClientFleet with cfg.
func startFleet(b *testing.B, cfg fleetConfig) *fleetproc.Child[fleetMsg] {
	spec, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return fleetproc.Start[fleetMsg](b, "TestBenchClientFleet", fleetEnv+"="+string(spec), cfg.Connect+cfg.Window+2*time.Minute)
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
	run := fleetproc.Begin(t, cfg.Nice, cfg.Connect+cfg.Window+time.Minute)
	ctx, await := run.Ctx, run.Commands.Await

	// Connect everyone and wait for every greeting.
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
	ready := fleetproc.Connect(t, cctx, cfg.N, fleetDialers, func(ctx context.Context, i int) error {
		c, err := dial(ctx, cfg.URL)
		if err == nil {
			clients[i] = c
		}
		return err
	}, func(ctx context.Context, i int) error {
		err := waitLoud(ctx, clients[i])
		if err != nil {
			clients[i].Close()
			clients[i] = nil
		}
		return err
	})
	clients = slices.DeleteFunc(clients, func(c fleetClient) bool { return c == nil })
	fleetproc.Emit(fleetMsg{Status: ready})

	if !await("go", time.Minute) {
		t.Fatal("no go from the benchmark")
	}
	cpu0 := procstat.CPUSeconds()
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
			fleetproc.Fail(t, "speech: %v", err)
		}
	}
	for i, c := range clients {
		if cfg.Speech {
			break
		}
		script.Go(func() {
			at := start.Add(time.Duration(i) * stagger / time.Duration(len(clients)))
			if !fleetproc.SleepUntil(ctx, at) {
				return
			}
			c.SayTone()
			if !fleetproc.SleepUntil(ctx, at.Add(fleetToneToText)) {
				return
			}
			if err := c.SendText(fleetLines[i%len(fleetLines)]); err == nil {
				sentAt[i] = time.Now()
			}
		})
	}
	fleetproc.SleepUntil(ctx, end)
	cpu1 := procstat.CPUSeconds()
	wall := time.Since(start).Seconds()
	script.Wait()

	res := fleetMsg{Status: fleetproc.Status{Type: "result"}, CPUSeconds: cpu1 - cpu0, WallSeconds: wall}
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
	fleetproc.Emit(res)
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
