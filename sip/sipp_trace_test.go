package sip_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/tracing"
	"github.com/holdline/holdline/tracing/tracingtest"
)

// The cost of tracing under load: the load run's calls (sipp, the
// recorded caller's RTP, the agent's greeting) with tracing off, then on,
// exporting over OTLP/HTTP to an in-process receiver; for each, the
// server's CPU per call while every call is up, and over the whole run
// (ramp-up to the last span flushed) per call. Short by default (10
// calls, a 3 s window, in make test); HOLDLINE_SIP_LOAD_TRACE=100 runs 100
// calls with the load run's 5 s window (HOLDLINE_SIP_LOAD_AEC=0 turns echo
// cancellation off, as for TestSippLoad). The receiver decodes the spans
// in this process: its CPU counts against tracing.
func TestSippLoadTracingCost(t *testing.T) {
	needSipp(t)
	n, window := 10, 3*time.Second
	if v, _ := strconv.Atoi(os.Getenv("HOLDLINE_SIP_LOAD_TRACE")); v > 0 {
		n, window = v, 5*time.Second
	}
	aec := os.Getenv("HOLDLINE_SIP_LOAD_AEC") != "0"
	var off, on loadCost
	t.Run("off", func(t *testing.T) { off = sippLoadCost(t, n, window, aec, false) })
	t.Run("on", func(t *testing.T) { on = sippLoadCost(t, n, window, aec, true) })
	if t.Failed() {
		return
	}
	t.Logf("%d calls (echo cancellation %v): tracing off %.2f%% of a core per call with every call up, %.1f ms CPU per call over the run; "+
		"on %.2f%% and %.1f ms (%d spans, %.0f a call, %d KiB of OTLP): tracing costs %+.2f points of a core per call up, %+.1f ms CPU per call",
		n, aec, off.windowShare*100, off.perCall*1000, on.windowShare*100, on.perCall*1000, on.spans, float64(on.spans)/float64(n), on.bytes/1024,
		(on.windowShare-off.windowShare)*100, (on.perCall-off.perCall)*1000)
}

type loadCost struct {
	windowShare float64 // of a core per call, with every call up
	perCall     float64 // CPU seconds per call, ramp-up to the end
	spans       int
	bytes       int64
}

func sippLoadCost(t *testing.T, n int, window time.Duration, aec, traced bool) loadCost {
	var opts []sip.Option
	if !aec {
		opts = append(opts, sip.WithSessionOptions(engine.WithInput(engine.InputConfig{Rate: 8000, NoEchoCancellation: true})))
	}
	var (
		rcv *tracingtest.Receiver
		tp  *sdktrace.TracerProvider
	)
	if traced {
		rcv = tracingtest.NewReceiver()
		defer rcv.Close()
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(rcv.URL()+tracingtest.Path))
		if err != nil {
			t.Fatal(err)
		}
		tp = tracing.NewProvider(exp, nil)
		defer tp.Shutdown(context.Background())
		opts = append(opts, sip.WithObserver(tracing.New(tp).Observer))
	}
	srv, addr, _ := startServer(t, opts...)
	rampUp := time.Duration(n) * time.Second / 50
	hold := rampUp + window + 4*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), hold+2*time.Minute)
	defer cancel()

	cpu0 := cpuSeconds()
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	dir := t.TempDir()
	sf := filepath.Join(dir, "load.xml")
	_ = os.WriteFile(sf, fmt.Appendf(nil, loadScenario, hold.Milliseconds()), 0o644)
	cmd := exec.CommandContext(ctx, needSipp(t), "-sf", sf, "-i", "127.0.0.1", "-p", fmt.Sprint(freePort(t)),
		"-mi", "127.0.0.1", "-mp", fmt.Sprint(sippMediaPort(t)), "-nostdin", "-m", fmt.Sprint(n), "-l", fmt.Sprint(n),
		"-r", "50", "-timeout", fmt.Sprint(int((hold+time.Minute).Seconds()))+"s", "-timeout_error", addr.String())
	cmd.Dir = dir
	go func() {
		out, err := cmd.CombinedOutput()
		done <- result{out, err}
	}()
	deadline := time.Now().Add(rampUp + 30*time.Second)
	for srv.Calls() < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := srv.Calls(); got < n {
		t.Fatalf("only %d of %d calls up", got, n)
	}
	time.Sleep(time.Second) // past the greetings' start
	w0, wall0 := cpuSeconds(), time.Now()
	time.Sleep(window)
	var c loadCost
	c.windowShare = (cpuSeconds() - w0) / time.Since(wall0).Seconds() / float64(srv.Calls())
	r := <-done
	if r.err != nil {
		t.Fatalf("sipp: %v\n%s", r.err, r.out)
	}
	for srv.Calls() > 0 && time.Now().Before(deadline.Add(hold)) {
		time.Sleep(20 * time.Millisecond)
	}
	roots := func() int {
		k := 0
		for _, s := range rcv.Spans() {
			if s.Name == tracing.SpanSession {
				k++
			}
		}
		return k
	}
	if traced {
		// The calls' observers end their session spans as the calls'
		// events end, just after the calls leave the host: send what is
		// queued until the last is in.
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatal(err)
			}
			if roots() >= n || time.Now().After(end) {
				break
			}
		}
	}
	c.perCall = (cpuSeconds() - cpu0) / float64(n)
	if traced {
		_, _, c.bytes = rcv.Requests()
		c.spans = len(rcv.Spans())
		if k := roots(); k != n {
			t.Errorf("%d session spans received for %d calls", k, n)
		}
	}
	return c
}
