package sip_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/sip"
)

// The CPU cost of SRTP under load: n calls placed by one Holdline server
// to another, both ends in this process, with plain RTP and with SRTP;
// for each, this process's CPU (getrusage) over a window with every call
// up, per call (both its ends: two legs, two sessions). The runs go RTP,
// SRTP, SRTP, RTP and each mode's two are averaged, so that what one run
// leaves behind (garbage, a warmer cache) weighs on both modes alike.
// Short by default (20 calls, a 2 s window); HOLDLINE_SRTP_LOAD=200 runs
// 200 calls with a 5 s window. HOLDLINE_SIP_LOAD_AEC=0 turns echo
// cancellation off, as for TestSippLoad: two sessions a call with it on
// need about twice the cores the README's sipp load does.
func TestSRTPLoadCost(t *testing.T) {
	n, window := 20, 2*time.Second
	if v, _ := strconv.Atoi(os.Getenv("HOLDLINE_SRTP_LOAD")); v > 0 {
		n, window = v, 5*time.Second
	}
	aec := os.Getenv("HOLDLINE_SIP_LOAD_AEC") != "0"
	var plain, secure []float64
	for i, mode := range []sip.SRTPMode{sip.SRTPOff, sip.SRTPRequired, sip.SRTPRequired, sip.SRTPOff} {
		name, into := "rtp", &plain
		if mode != sip.SRTPOff {
			name, into = "srtp", &secure
		}
		t.Run(fmt.Sprintf("%s-%d", name, i+1), func(t *testing.T) {
			share := goToGoLoad(t, n, window, aec, mode)
			t.Logf("%.3f%% of a core per call", share*100)
			*into = append(*into, share)
		})
	}
	if t.Failed() {
		return
	}
	p, s := (plain[0]+plain[1])/2, (secure[0]+secure[1])/2
	t.Logf("%d calls server to server (echo cancellation %v), CPU per call (both ends) with every call up: RTP %.3f%% of a core (runs %.3f, %.3f), SRTP %.3f%% (runs %.3f, %.3f): SRTP costs %+.3f points (%+.1f%%)",
		n, aec, p*100, plain[0]*100, plain[1]*100, s*100, secure[0]*100, secure[1]*100, (s-p)*100, (s-p)/p*100)
}

// goToGoLoad places n calls from one server to another with SRTP mode
// mode on both, and returns the process's CPU per call, as a share of a
// core, over window with all of them up.
func goToGoLoad(t *testing.T, n int, window time.Duration, aec bool, mode sip.SRTPMode) float64 {
	opts := []sip.Option{sip.WithSRTP(mode), sip.WithMaxCalls(n + 10)}
	if !aec {
		opts = append(opts, sip.WithSessionOptions(engine.WithInput(engine.InputConfig{Rate: 8000, NoEchoCancellation: true})))
	}
	callee, addr, _ := startServer(t, opts...)
	caller, _, _ := startServer(t, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	// Placed at 50 a second, as the sipp load run does.
	for range n {
		wg.Go(func() {
			if err := caller.Call(ctx, "sip:agent@"+addr.String()); err != nil {
				errs <- err
			}
		})
		time.Sleep(20 * time.Millisecond)
	}
	up := func(m []sip.CallMedia) bool {
		if len(m) != n {
			return false
		}
		for _, c := range m {
			if c.PacketsIn == 0 || c.SRTP != (mode != sip.SRTPOff) {
				return false
			}
		}
		return true
	}
	waitMedia(t, callee, 30*time.Second, "every call up with media", up)
	waitMedia(t, caller, 10*time.Second, "every placed call up with media", up)
	c0, wall0 := cpuSeconds(), time.Now()
	time.Sleep(window) // the measurement window
	share := (cpuSeconds() - c0) / time.Since(wall0).Seconds() / float64(n)
	for _, m := range append(sip.Media(callee), sip.Media(caller)...) {
		if m.SRTPFailed != 0 || m.Bad != 0 {
			t.Errorf("a call refused packets: %+v", m)
		}
	}
	if got := callee.Calls(); got != n {
		t.Errorf("%d of %d calls still up after the window", got, n)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Call: %v", err)
	}
	callsOver(t, callee, caller)
	return share
}
