package sip_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/baresiptest"
)

// baresip, a real softphone, calls a worker that then drains: the worker
// REFERs it to the front door with the handoff token, baresip calls
// there, and the other worker takes the conversation over without a
// word; the first worker hangs up its leg.
func TestBaresipFollowsADrainingWorkersMove(t *testing.T) {
	baresip := baresiptest.Need(t)
	p := newDrainPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	home, _ := baresiptest.Home(t, "", 1, 30)
	cmd := exec.CommandContext(ctx, baresip, "-f", home, "-e", "/dial sip:agent@"+p.addrA, "-t", "40")
	var out baresiptest.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(15 * time.Second); !p.recs[0].find(events.Idle, ""); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("A's call never became idle after the greeting\nbaresip:\n%s", out.String())
		}
	}
	rep, err := p.a.Host().Drain(ctx, calls.WithMoves(true), calls.WithDrainTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 1 {
		t.Fatalf("drain report %+v; want the call moved\nbaresip:\n%s", rep, out.String())
	}
	infos := p.b.Host().List()
	if len(infos) != 1 || infos[0].Origin != "moved" {
		t.Fatalf("B's calls %+v; want the moved one\nbaresip:\n%s", infos, out.String())
	}
	// baresip's own account of it: the transfer, and the call to B up.
	for deadline := time.Now().Add(5 * time.Second); strings.Count(out.String(), "Call established") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("baresip never established the call to B:\n%s", out.String())
		}
	}
}
