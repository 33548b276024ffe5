//go:build linux

package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hraban/opus"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/internal/cheap"
	"github.com/holdline/holdline/internal/fleetproc"
	"github.com/holdline/holdline/internal/procstat"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/stt/pocketsphinx"
	"github.com/holdline/holdline/tts"
	"github.com/holdline/holdline/tts/espeak"
)

// Environment of BenchmarkLocalEngines, besides HOLDLINE_BENCH_SESSIONS and
// HOLDLINE_BENCH_WINDOW.
const (
	// benchRoundsEnv sets how many times the calls are made and ended
	// (default 1; 4 to see whether memory comes back).
	benchRoundsEnv = "HOLDLINE_BENCH_ROUNDS"
	// benchAdmissionEnv set to "default" runs the server with its
	// admission default for these engines instead of room for every
	// call, so that the calls beyond it are refused.
	benchAdmissionEnv = "HOLDLINE_BENCH_ADMISSION"
)

// speechGap is the quiet a benchmark caller leaves after each phrase: room
// for the agent's answer.
const speechGap = 4 * time.Second

// speechPhrases are what benchmark callers say, in turn.
var speechPhrases = []string{
	"Book a table for two at seven.",
	"Do you have a table for four at eight?",
	"What times are available?",
	"Yes, please.",
	"For six people.",
	"Thank you.",
}

// BenchmarkLocalEngines measures calls on the local engines as serve runs
// them without a cloud key: the booking agent on the demo model, one
// pocketsphinx recogniser with the agent's grammar shared by every call,
// and espeak-ng's voice. For each N (HOLDLINE_BENCH_SESSIONS, default 20)
// N WebRTC clients (pion, in a child process at nice 19) connect and hear
// their greeting; then through the window (HOLDLINE_BENCH_WINDOW, default
// 30s) each speaks a booking phrase, waits 4 s for the answer, and speaks
// the next, their starts staggered over the first 3 s; then every session
// is deleted. It reports
//
//	rss-KiB/session       VmRSS with the calls live, after they spoke, minus
//	                      the server's before the first call, per call
//	rss-after-%           VmRSS once every call of the last round has ended and
//	                      the idle decoders were freed, in % above the start
//	caller-turns          caller phrases the server made turns of
//	dropped-turns         caller turns lost: no final transcript in time
//	                      (holdline_stt_turns_dropped_total); must be 0
//	refused               calls the server refused (503)
//	replies               phrases after which the client heard the agent
//	server-cpu-%/session  the server's CPU over the window, % of one core
//	missed-frames         output frame periods skipped
//
// HOLDLINE_BENCH_ROUNDS=4 makes and ends the calls four times, to see
// whether the memory comes back; HOLDLINE_BENCH_ADMISSION=default runs the
// server with serve's admission default for these engines
// (server.LocalCallCost), so that calls beyond it are refused rather than
// degraded. HOLDLINE_BENCH_CLIENT=light uses clients that cost the machine
// a third as much (their Opus is encoded once for the fleet), for counts
// where rtctest clients would take the server's CPU.
//
//	go test -run '^$' -bench BenchmarkLocalEngines -benchtime 1x ./server
//	HOLDLINE_BENCH_ROUNDS=4 go test -run '^$' -bench LocalEngines -benchtime 1x ./server
func BenchmarkLocalEngines(b *testing.B) {
	rec, err := pocketsphinx.New(pocketsphinx.WithPhrases(booking.Phrases...))
	if errors.Is(err, pocketsphinx.ErrMissingLibrary) || errors.Is(err, pocketsphinx.ErrMissingModel) {
		b.Skipf("the local recogniser is not installed: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	voice, err := espeak.New()
	if err != nil {
		b.Skipf("espeak-ng is not installed: %v", err)
	}
	ns := fleetproc.EnvCounts(b, benchSessionsEnv, []int{20})
	window := fleetproc.EnvDuration(b, benchWindowEnv, 30*time.Second, 10*time.Second)
	rounds := fleetproc.EnvInt(b, benchRoundsEnv, 1, 1, math.MaxInt)
	client := "rtctest"
	switch v := os.Getenv(benchClientEnv); v {
	case "", "rtctest":
	case "light":
		client = v
	default:
		b.Fatalf("%s=%q: want rtctest or light", benchClientEnv, v)
	}
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		return booking.New(booking.NewRestaurant(8), booking.WithModel(booking.NewDemoModel()),
			booking.WithTTS(voice), booking.WithSTT(rec)), nil, nil
	}
	for _, n := range ns {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			// One measurement, whatever b.N: run with -benchtime 1x.
			localEnginesOnce(b, n, window, rounds, client, rec, newAgent)
		})
	}
}

func localEnginesOnce(b *testing.B, n int, window time.Duration, rounds int, client string, rec *pocketsphinx.Recognizer, newAgent server.AgentFunc) {
	b.StopTimer()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []server.Option{server.WithAgentName("booking"), server.WithLogger(logger)}
	if os.Getenv(benchAdmissionEnv) == "default" {
		// As serve on the local engines.
		opts = append(opts, server.WithCallCost(server.LocalCallCost))
	} else {
		opts = append(opts, server.WithMaxSessions(n+10))
	}
	srv, err := server.New(newAgent, opts...)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		srv.Close()
	}()
	debug.FreeOSMemory()
	rss0 := procstat.RSSKiB(b)
	anon0 := rssAnonKiB(b)
	ch := cheap.Stats()
	var ms0 goruntime.MemStats
	goruntime.ReadMemStats(&ms0)
	b.Logf("start: %s; Go runtime holds %d KiB from the OS (heap in use %d KiB, idle unreleased %d KiB, stacks %d KiB, GC metadata %d KiB, spans %d KiB, other %d KiB); C heap %d KiB in use, %d KiB free, %d KiB mapped apart",
		rssParts(), (ms0.Sys-ms0.HeapReleased)/1024, ms0.HeapInuse/1024, (ms0.HeapIdle-ms0.HeapReleased)/1024, ms0.StackSys/1024, ms0.GCSys/1024, ms0.MSpanSys/1024, ms0.OtherSys/1024,
		ch.InUse/1024, ch.Free/1024, ch.Mapped/1024)

	var (
		liveMax           int64
		rssAfter          int64
		up, sent, replies int
		cpu, wall         float64
		missed            uint64
		refusedBefore     = scrape(b, hs.URL)["holdline_requests_rejected_total"]
		dropped0          = scrape(b, hs.URL)["holdline_stt_turns_dropped_total"]
		answers           float64
		anonAfter         int64
	)
	for r := range rounds {
		cfg := fleetConfig{URL: hs.URL, N: n, Client: client, Window: window, Connect: fleetConnectBase + time.Duration(n)*fleetConnectPer,
			Nice: benchClientNice, Speech: true, Delete: true}
		fleet := startFleet(b, cfg)
		up = fleetproc.Ready(b, fleet, cfg.Connect+30*time.Second).Connected
		turnsAtGreeted := scrape(b, hs.URL)["holdline_turns_total"]
		missed0 := srv.MissedFrames()
		cpu0 := procstat.CPUSeconds()
		start := time.Now()
		fleet.Send(b, "go")
		b.StartTimer()
		res := fleet.Next(b, window+time.Minute)
		b.StopTimer()
		if res.Type != "result" {
			b.Fatalf("client fleet: %s %s", res.Type, res.Error)
		}
		// Agent turns in the window: answers to the callers.
		answers += scrape(b, hs.URL)["holdline_turns_total"] - turnsAtGreeted
		cpu += procstat.CPUSeconds() - cpu0
		wall += time.Since(start).Seconds()
		missed += srv.MissedFrames() - missed0
		sent += res.Sent
		replies += res.Replies
		debug.FreeOSMemory()
		liveMax = max(liveMax, procstat.RSSKiB(b))

		fleet.Send(b, "bye")
		fleet.Wait(b)
		deadline := time.Now().Add(30 * time.Second)
		for srv.Sessions() > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if k := srv.Sessions(); k > 0 {
			b.Logf("round %d: %d sessions still live 30s after their deletion", r+1, k)
		}
		// Idle decoders are freed after their idle time.
		time.Sleep(pocketsphinx.DefaultIdleDecoder + time.Second)
		debug.FreeOSMemory()
		rssAfter = procstat.RSSKiB(b)
		anonAfter = rssAnonKiB(b)
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		inUse, idle := rec.Decoders()
		ch := cheap.Stats()
		b.Logf("round %d after: %s; Go runtime holds %d KiB from the OS (heap in use %d KiB, idle unreleased %d KiB, stacks %d KiB, GC metadata %d KiB, spans %d KiB, other %d KiB); C heap %d KiB in use, %d KiB free, %d KiB mapped apart; decoders %d in use, %d idle",
			r+1, rssParts(), (ms.Sys-ms.HeapReleased)/1024, ms.HeapInuse/1024, (ms.HeapIdle-ms.HeapReleased)/1024, ms.StackSys/1024, ms.GCSys/1024, ms.MSpanSys/1024, ms.OtherSys/1024,
			ch.InUse/1024, ch.Free/1024, ch.Mapped/1024, inUse, idle)
		b.Logf("round %d: %d calls; VmRSS %d KiB at the start, %d KiB live, %d KiB after", r+1, up, rss0, liveMax, rssAfter)
	}
	m := scrape(b, hs.URL)
	dropped := m["holdline_stt_turns_dropped_total"] - dropped0
	b.ReportMetric(float64(liveMax-rss0)/float64(max(up, 1)), "rss-KiB/session")
	b.ReportMetric(100*float64(rssAfter-rss0)/float64(rss0), "rss-after-%")
	b.ReportMetric(100*float64(anonAfter-anon0)/float64(anon0), "anon-after-%")
	b.ReportMetric(answers, "answers")
	b.ReportMetric(dropped, "dropped-turns")
	b.ReportMetric(m["holdline_requests_rejected_total"]-refusedBefore, "refused")
	b.ReportMetric(float64(sent), "phrases")
	b.ReportMetric(float64(replies), "replies")
	b.ReportMetric(100*cpu/wall/float64(max(up, 1)), "server-cpu-%/session")
	b.ReportMetric(float64(missed), "missed-frames")
}

// scrape reads the server's Prometheus metrics, summing the series of each
// name over their labels.
func scrape(tb testing.TB, base string) map[string]float64 {
	tb.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "{")
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			rest = line[i+1:]
		}
		if v, err := strconv.ParseFloat(rest, 64); err == nil {
			out[name] += v
		}
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		tb.Fatal(err)
	}
	return out
}

// speechScript is what the fleet's clients say in the window.
type speechScript struct {
	wg     *sync.WaitGroup
	durs   []time.Duration // of each phrase
	sentAt [][]time.Time   // per client, when each phrase began
	which  [][]int         // per client, which phrase
	mu     *sync.Mutex
}

// fleetSpeech is the speechPhrases in espeak-ng's voice at 48 kHz, and
// encoded once as a light client's Opus packets, made once per process.
var fleetSpeech = sync.OnceValues(func() (spokenPhrases, error) {
	var sp spokenPhrases
	voice, err := espeak.New(espeak.WithSampleRate(48000))
	if err != nil {
		return sp, err
	}
	enc, err := opus.NewEncoder(48000, 1, opus.AppVoIP)
	if err != nil {
		return sp, err
	}
	buf := make([]byte, 1500)
	for _, p := range speechPhrases {
		x, err := synthesize(context.Background(), voice, p)
		if err != nil {
			return sp, fmt.Errorf("%q: %w", p, err)
		}
		x = append(x, make([]int16, 960*5)...) // 100 ms of quiet after
		var pkts [][]byte
		for off := 0; off+960 <= len(x); off += 960 {
			n, err := enc.Encode(x[off:off+960], buf)
			if err != nil {
				return sp, err
			}
			pkts = append(pkts, append([]byte(nil), buf[:n]...))
		}
		sp.pcm = append(sp.pcm, x)
		sp.packets = append(sp.packets, pkts)
		sp.durs = append(sp.durs, time.Duration(len(x))*time.Second/48000)
	}
	return sp, nil
})

type spokenPhrases struct {
	pcm     [][]int16 // 48 kHz
	packets [][][]byte
	durs    []time.Duration
}

// speakFleet makes each client speak the phrases in turn from its start
// (staggered over stagger) until end, a phrase every speechGap after the
// last ended.
func speakFleet(ctx context.Context, clients []fleetClient, start, end time.Time, stagger time.Duration) (speechScript, error) {
	sp, err := fleetSpeech()
	if err != nil {
		return speechScript{}, err
	}
	durs := sp.durs
	sc := speechScript{wg: &sync.WaitGroup{}, durs: durs, sentAt: make([][]time.Time, len(clients)), which: make([][]int, len(clients)), mu: &sync.Mutex{}}
	for i, c := range clients {
		sc.wg.Go(func() {
			at := start.Add(time.Duration(i) * stagger / time.Duration(len(clients)))
			for k := i; ; k++ {
				p := k % len(durs)
				if at.Add(durs[p]).After(end) || !fleetproc.SleepUntil(ctx, at) {
					return
				}
				sc.mu.Lock()
				sc.sentAt[i] = append(sc.sentAt[i], time.Now())
				sc.which[i] = append(sc.which[i], p)
				sc.mu.Unlock()
				c.SayPhrase(p)
				at = at.Add(durs[p] + speechGap)
			}
		})
	}
	return sc, nil
}

// wait waits for the clients to finish and counts the phrases spoken and
// those the agent answered: the client heard it after the phrase ended and
// before the next began (or the window ended).
func (sc speechScript) wait(clients []fleetClient, end time.Time) (sent, replies int) {
	sc.wg.Wait()
	for i, c := range clients {
		levels := c.Levels()
		for k, at := range sc.sentAt[i] {
			sent++
			from := at.Add(sc.durs[sc.which[i][k]])
			until := end
			if k+1 < len(sc.sentAt[i]) {
				until = sc.sentAt[i][k+1]
			}
			for _, l := range levels {
				if l.At.After(from) && l.At.Before(until) && l.RMS > 0.01 {
					replies++
					break
				}
			}
		}
	}
	return sent, replies
}

// synthesize returns the whole of text in voice's audio.
func synthesize(ctx context.Context, voice *espeak.Synthesizer, text string) ([]int16, error) {
	st, err := voice.Synthesize(ctx, text)
	if err != nil {
		return nil, err
	}
	return tts.ReadAll(st)
}

// rssParts is the resident memory by kind, from /proc/self/status: anonymous
// (heaps) and file-backed (mapped libraries and models).
func rssParts() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "RssAnon:") || strings.HasPrefix(l, "RssFile:") {
			parts = append(parts, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(parts, ", ")
}

// rssAnonKiB is the anonymous part of the resident memory: what the
// process's heaps hold, without the pages of the program and libraries it
// has run, which the kernel shares and can drop.
func rssAnonKiB(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssAnon:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("no RssAnon in /proc/self/status")
	return 0
}
