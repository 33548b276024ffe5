package sip_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/internal/baresiptest"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/stt/pocketsphinx"
	"github.com/holdline/holdline/tts/espeak"
)

// bookingAgent is the booking agent on this machine's engines
// (pocketsphinx, espeak-ng), its sessions' events recorded in rec.
func bookingAgent(rec *recorder) sip.AgentFunc {
	return func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := espeak.New()
		if err != nil {
			return nil, nil, err
		}
		ears, err := pocketsphinx.New(pocketsphinx.WithPhrases(booking.Phrases...))
		if err != nil {
			return nil, nil, err
		}
		agent := booking.New(booking.NewRestaurant(10), booking.WithModel(booking.NewDemoModel()), booking.WithSTT(ears), booking.WithTTS(voice))
		enter := agent.OnEnter
		agent.OnEnter = func(ctx context.Context, s *runtime.Session) error {
			rec.attach(s)
			if enter != nil {
				return enter(ctx, s)
			}
			return nil
		}
		return agent, func() { ears.Close() }, nil
	}
}

// booked says whether the agent has spoken a booking.
func (r *recorder) booked() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if e.Kind == events.PlayoutDone && strings.Contains(e.Text, "booked") {
			return true
		}
	}
	return false
}

// bookings counts book_table's runs, failing the test for one that did
// not succeed, and returns what the caller was heard saying.
func (r *recorder) bookings(t *testing.T) (runs int, heard []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if e.Kind == events.UserTurn {
			heard = append(heard, e.Text)
		}
		if e.Kind == events.ToolTerminal && e.Tool == "book_table" {
			runs++
			if e.State != "succeeded" {
				t.Errorf("book_table %s", e.State)
			}
		}
	}
	return runs, heard
}

// baresip, a real softphone, calls the booking agent running on this
// machine's engines: the caller's words are recognised by pocketsphinx,
// book_table runs once, and the agent's answer is spoken back down the
// line.
func TestBaresipCallsTheBookingAgent(t *testing.T) {
	baresip := baresiptest.Need(t)
	rec := &recorder{}
	newAgent := bookingAgent(rec)
	_, addr := serveAgent(t, newAgent)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The greeting takes about 7 s: the caller speaks after it, then
	// listens to the booking.
	home, _ := baresiptest.Home(t, "Book a table for two at seven.", 8, 25)
	cmd := exec.CommandContext(ctx, baresip, "-f", home, "-e", "/dial sip:agent@"+addr.String(), "-t", "60")
	var out baresiptest.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for !rec.booked() {
		select {
		case err := <-done:
			t.Fatalf("baresip ended (%v) before the booking was spoken: %v\n%s", err, rec.kinds(), out.String())
		case <-ctx.Done():
			t.Fatalf("no booking spoken: %v\n%s", rec.kinds(), out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	runs, heard := rec.bookings(t)
	t.Logf("baresip's caller was heard as %q; book_table ran %d time(s)", heard, runs)
	if runs != 1 {
		t.Errorf("book_table ran %d times; want once", runs)
	}
	if !strings.Contains(out.String(), "Call established") {
		t.Errorf("baresip never saw the call established:\n%s", out.String())
	}
}

// Holdline calls baresip (holdline call's path): baresip answers on its
// own, the agent speaks into the call, and baresip's hang-up when its
// caller file ends is Holdline's end of the call.
func TestCallPlacedToBaresip(t *testing.T) {
	baresip := baresiptest.Need(t)
	srv, _, rec := startServer(t)
	home, port := baresiptest.Home(t, "Hello?", 1, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, baresip, "-f", home, "-t", "30")
	var out baresiptest.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	time.Sleep(500 * time.Millisecond) // baresip binds its port
	start := time.Now()
	if err := srv.Call(ctx, fmt.Sprintf("sip:baresip@127.0.0.1:%d", port)); err != nil {
		t.Fatalf("Call: %v\n%s", err, out.String())
	}
	t.Logf("baresip answered and hung up after %v", time.Since(start).Round(100*time.Millisecond))
	if !rec.find(events.PlayoutStarted, "") {
		t.Errorf("the agent never spoke into the call: %v", rec.kinds())
	}
	// Its "Hello?" comes over the greeting: heard as speech, or judged as
	// a possible barge-in.
	if !rec.find(events.SpeechStarted, "") && !rec.find(events.BargeInSuspected, "") {
		t.Errorf("baresip's caller was never heard: %v", rec.kinds())
	}
}
