//go:build linux

package carrier_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/carrier"
	"github.com/holdline/holdline/carrier/carriertest"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
)

// Many Twilio streams at once on this machine: scripted providers, the
// echo canceller on (the phone default), every agent talking all along.
// The phones run in a process of their own (this test binary, re-run), so
// that the CPU measured is the server's. It prints a table of CPU and
// memory per stream and the frames dropped, which must be 0. make test
// runs 10 streams; HOLDLINE_TWILIO_LOAD=200 runs 200:
//
//	HOLDLINE_TWILIO_LOAD=200 go test -run TestTwilioLoad -v ./carrier
func TestTwilioLoad(t *testing.T) {
	if os.Getenv(loadPhonesEnv) != "" {
		t.Skip("the phones' process")
	}
	n := 10
	if v := os.Getenv("HOLDLINE_TWILIO_LOAD"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("HOLDLINE_TWILIO_LOAD=%q: want a count of streams", v)
		}
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var mu sync.Mutex
	var sessions []*runtime.Session
	// A long answer, said again whenever the caller's turn ends: the
	// agents talk the whole time.
	answer := strings.Repeat("We are open from noon until eleven every day and on weekends we serve brunch from ten. ", 6)
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithRealtimeFactor(4))
		if err != nil {
			return nil, nil, err
		}
		model := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
			return scripted.Response{TTFB: 50 * time.Millisecond, Text: answer}
		})
		return &runtime.Agent{Name: "phone", Model: model, TTS: voice, STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				mu.Lock()
				sessions = append(sessions, s)
				mu.Unlock()
				return s.GenerateReply(ctx, "")
			}}, nil, nil
	}
	host, err := calls.New(newAgent, calls.WithLogger(log), calls.WithMaxCalls(n+10))
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	tr := carrier.NewTransport(host, carrier.WithLogger(log))
	h := carrier.NewTwilio(tr, carrier.WithTwilioLogger(log), carrier.WithTwilioAccount("ACx", authToken))
	srv := httptest.NewServer(h)
	defer srv.Close()

	hold := 12 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), hold+2*time.Minute)
	defer cancel()
	// The phones stand for Twilio's side, which is not on this machine:
	// they run at a lower priority, so that the server gets the CPU it
	// would have (its share is measured; theirs is reported).
	args := []string{os.Args[0], "-test.run", "^TestTwilioLoadPhones$", "-test.v"}
	if nice, err := exec.LookPath("nice"); err == nil {
		args = append([]string{nice, "-n", "10"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), loadPhonesEnv+"="+strconv.Itoa(n), "HOLDLINE_TWILIO_LOAD_URL="+srv.URL,
		"HOLDLINE_TWILIO_LOAD_HOLD="+hold.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	var m0 goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&m0)
	rss0 := rssAnon()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var report loadReport
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if j, ok := strings.CutPrefix(sc.Text(), "LOAD "); ok {
				_ = json.Unmarshal([]byte(j), &report)
			}
		}
		done <- cmd.Wait()
	}()
	for host.Len() < n {
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d streams came up:\n%s", host.Len(), n, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Settle, then measure with all of them up and talking.
	time.Sleep(2 * time.Second)
	// The player's counts over the window: how the server keeps up with
	// them all up (the ramp, 50 new calls a second, is not the question).
	frames := func() (missed, late uint64) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range sessions {
			missed += s.MissedFrames()
			late += s.LateFrames()
		}
		return missed, late
	}
	window := 5 * time.Second
	missed0, late0 := frames()
	cpu0, wall0 := cpuSeconds(), time.Now()
	time.Sleep(window)
	cpu, wall := cpuSeconds()-cpu0, time.Since(wall0).Seconds()
	up := host.Len()
	var m1 goruntime.MemStats
	goruntime.ReadMemStats(&m1)
	rss1 := rssAnon()
	missed, late := frames()
	missed, late = missed-missed0, late-late0
	allMissed, _ := frames()
	if err := <-done; err != nil {
		t.Fatalf("the phones: %v", err)
	}
	phonesCPU := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	for host.Len() > 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("\n| streams | up while measured | server CPU per stream | heap per stream | RSS (anon) per stream | frames dropped (socket behind) | player frames missed / late, in the window (whole run) | calls completed | audio received per phone |\n|---|---|---|---|---|---|---|---|---|\n| %d | %d | %.2f%% of a core | %.0f KiB | %d KiB | %d | %d / %d (%d missed) | %d/%d | %.1f s of %v |\n(the phones' process: %.1f s of CPU in all)",
		n, up, 100*cpu/wall/float64(up), (float64(m1.HeapInuse)-float64(m0.HeapInuse))/1024/float64(up), (rss1-rss0)/int64(up),
		tr.Dropped(), missed, late, allMissed, report.Completed, n, report.AudioPerPhone, hold, phonesCPU)
	if tr.Dropped() != 0 || missed != 0 || report.Completed != n || up != n {
		t.Errorf("dropped %d, missed %d, completed %d of %d, up %d:\n%s", tr.Dropped(), missed, report.Completed, n, up, logs.String())
	}
	// A phone hears the agent for most of its call (the agent talks all
	// along, between its turns' short gaps).
	if report.AudioPerPhone < hold.Seconds()/2 {
		t.Errorf("a phone received %.1f s of audio in %v", report.AudioPerPhone, hold)
	}
}

const loadPhonesEnv = "HOLDLINE_TWILIO_LOAD_PHONES"

type loadReport struct {
	Completed     int     `json:"completed"`
	AudioPerPhone float64 `json:"audio_per_phone"`
}

// TestTwilioLoadPhones is the phones of TestTwilioLoad, in their own
// process: they dial at 50 a second, stay on for the hold, hang up.
func TestTwilioLoadPhones(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(loadPhonesEnv))
	if n == 0 {
		t.Skip("run by TestTwilioLoad")
	}
	url := os.Getenv("HOLDLINE_TWILIO_LOAD_URL")
	hold, _ := time.ParseDuration(os.Getenv("HOLDLINE_TWILIO_LOAD_HOLD"))
	ctx, cancel := context.WithTimeout(t.Context(), hold+time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	completed := 0
	var audio time.Duration
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		wg.Go(func() {
			p, err := carriertest.Dial(ctx, carriertest.Config{BaseURL: url, AuthToken: authToken, CallSid: fmt.Sprintf("CAload%d", i)})
			if err != nil {
				t.Errorf("phone %d: %v", i, err)
				return
			}
			time.Sleep(hold)
			got := p.Received()
			hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
			defer hcancel()
			if err := p.Hangup(hctx); err != nil {
				t.Errorf("phone %d: hang-up: %v", i, err)
				return
			}
			mu.Lock()
			completed++
			audio += got
			mu.Unlock()
		})
	}
	wg.Wait()
	b, _ := json.Marshal(loadReport{Completed: completed, AudioPerPhone: audio.Seconds() / float64(max(1, completed))})
	fmt.Printf("LOAD %s\n", b)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// rssAnon is the process's anonymous resident memory, in KiB.
func rssAnon() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssAnon:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}
