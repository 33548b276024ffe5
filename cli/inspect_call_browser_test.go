package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/examples/support"
	"github.com/holdline/holdline/stt/pocketsphinx"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// A real call to the support desk on this machine's engines (pocketsphinx
// with the desk's phrases, espeak-ng's voice, the demo models), with a
// caller who speaks in espeak-ng's voice over WebRTC: the front desk
// hands the caller to billing, the caller talks over billing's answer
// (a confirmed barge-in that cuts it), billing's refund, a mutation,
// waits for its preamble to play and runs once, and the caller says
// goodbye. holdline inspect reads the call from its session URL, and the
// page, in headless Chromium, shows the handoff, the barge-in, the
// deferred refund, the cut answer and each turn's breakdown; a screenshot
// of it is kept with the test's artifacts (go test -artifacts).
func TestBrowserInspectARecordedSupportCall(t *testing.T) {
	node, dir := needChromium(t)
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		missingForBrowser(t, "espeak-ng")
	}
	if r, err := pocketsphinx.New(pocketsphinx.WithPhrases(support.Phrases...)); err != nil {
		if errors.Is(err, pocketsphinx.ErrMissingLibrary) || errors.Is(err, pocketsphinx.ErrMissingModel) {
			missingForBrowser(t, "pocketsphinx: "+err.Error())
		}
		t.Fatal(err)
	} else {
		r.Close()
	}

	const (
		account = "I was charged twice on account B12."
		refund  = "Yes, refund one please."
		done    = "That is all, thank you."
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	speech, err := callerSpeech(ctx, []string{account, refund, done})
	if err != nil {
		t.Fatal(err)
	}
	url := serveForBrowserWith(t, ctx, "", "--agent", "support", "--stt", "pocketsphinx", "--tts", "espeak",
		"--store", "file:"+filepath.Join(t.TempDir(), "sessions.db"))
	c, err := rtctest.Dial(ctx, url, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer func() {
		if t.Failed() {
			t.Logf("the call's events:\n%s", eventLog(c.Events()))
		}
	}()

	// holdline inspect follows the session from its URL until it ends.
	out := t.ArtifactDir()
	page := filepath.Join(out, "call.html")
	inspected := make(chan error, 1)
	var said bytes.Buffer
	go func() {
		inspected <- run(ctx, []string{"inspect", url + c.Location, "-o", page, "--idle", "30s"}, strings.NewReader(""), &said, &said)
	}()

	// wait waits, at most d, for the first event after seq mark that
	// matches; the call's events are logged if it never comes.
	wait := func(what string, mark uint64, d time.Duration, match func(events.Event) bool) events.Event {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		e, err := c.WaitEvent(wctx, func(e events.Event) bool { return e.Seq > mark && match(e) })
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return e
	}
	kind := func(k events.Kind) func(events.Event) bool {
		return func(e events.Event) bool { return e.Kind == k }
	}
	spoken := func(line string) time.Duration { return time.Duration(len(speech[line])) * time.Second / 48000 }

	greeting := wait("the greeting", 0, 20*time.Second, kind(events.PlayoutDone))
	if !strings.Contains(greeting.Text, "How can I help?") {
		t.Fatalf("the greeting was %q", greeting.Text)
	}

	// The account: the front desk looks it up, opens a ticket and hands
	// the caller to billing.
	c.Say(speech[account])
	heard := wait("the caller's first turn", greeting.Seq, spoken(account)+10*time.Second, kind(events.UserTurn))
	ho := wait("the handoff", heard.Seq, 15*time.Second, kind(events.Handoff))
	if ho.Text != "front-desk -> billing" {
		t.Errorf("handoff %q; want front-desk -> billing", ho.Text)
	}
	// Billing's first turn is the first to start after the handoff (the
	// front desk's line about the transfer still plays first): the caller
	// says yes over it, half a second in.
	first := wait("billing's first turn", ho.Seq, 15*time.Second, kind(events.TurnStarted))
	answer := wait("billing's answer playing", first.Seq, 15*time.Second, func(e events.Event) bool {
		return e.Kind == events.PlayoutStarted && e.Epoch >= first.Epoch
	})
	time.Sleep(500 * time.Millisecond)
	c.Say(speech[refund])
	barge := wait("the barge-in", answer.Seq, spoken(refund)+10*time.Second, kind(events.BargeInConfirmed))
	cut := wait("billing's answer, cut", answer.Seq, 10*time.Second, func(e events.Event) bool {
		return e.Kind == events.PlayoutTruncate && e.Epoch == answer.Epoch
	})
	yes := wait("the caller's yes", answer.Seq, spoken(refund)+10*time.Second, kind(events.UserTurn))
	if !strings.Contains(strings.ToLower(yes.Text), "refund") {
		t.Errorf("the caller's turn was heard as %q", yes.Text)
	}

	// The refund is a mutation: it waits for its preamble to play, then
	// runs, once.
	deferred := wait("the refund, deferred", yes.Seq, 15*time.Second, func(e events.Event) bool {
		return e.Kind == events.ToolDeferred && e.Tool == "refund"
	})
	preamble := wait("the refund's preamble played", yes.Seq, 15*time.Second, func(e events.Event) bool {
		return e.Kind == events.PlayoutDone && e.Epoch == deferred.Epoch
	})
	started := wait("the refund started", deferred.Seq, 15*time.Second, func(e events.Event) bool {
		return e.Kind == events.ToolStarted && e.CallID == deferred.CallID
	})
	if started.Seq < preamble.Seq {
		t.Errorf("the refund started (event %d) before its preamble %q had played (event %d)", started.Seq, preamble.Text, preamble.Seq)
	}
	refunded := wait("the refund's end", started.Seq, 15*time.Second, func(e events.Event) bool {
		return e.Kind == events.ToolTerminal && e.CallID == deferred.CallID
	})
	if refunded.State != "succeeded" {
		t.Errorf("the refund ended %s", refunded.State)
	}
	confirm := wait("billing confirms the refund", refunded.Seq, 15*time.Second, func(e events.Event) bool {
		return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "is refunded")
	})

	// Goodbye.
	c.Say(speech[done])
	bye := wait("the caller's goodbye", confirm.Seq, spoken(done)+10*time.Second, kind(events.UserTurn))
	wait("billing's goodbye", bye.Seq, 15*time.Second, func(e events.Event) bool {
		return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "Goodbye")
	})
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	if err := c.Delete(dctx, url, ""); err != nil {
		t.Fatalf("ending the call: %v", err)
	}

	// What the call did, from its events: each tool once, the refund run
	// once, the barge-in confirmed over billing's answer.
	evs := c.Events()
	runs := map[string]int{}
	for _, e := range evs {
		switch {
		case e.Kind == events.ToolStarted:
			runs[e.Tool]++
		case e.Kind == events.ToolTerminal && e.State != "succeeded":
			t.Errorf("%s ended %s: %s", e.Tool, e.State, e.Error)
		}
	}
	if runs["refund"] != 1 || runs["transfer_to_billing"] != 1 || runs["open_ticket"] != 1 {
		t.Errorf("tools run %v; want open_ticket, transfer_to_billing and refund once each", runs)
	}
	if barge.Epoch != answer.Epoch || barge.Reason == "" {
		t.Errorf("barge-in %+v; want one with its reason, over billing's answer (epoch %d)", barge, answer.Epoch)
	}
	t.Logf("handoff %q; barge-in (%s) cut %q after %v; refund deferred until %q played, ran: %s",
		ho.Text, barge.Reason, cut.Text, cut.Played.Round(time.Millisecond), preamble.Text, refunded.State)

	select {
	case err := <-inspected:
		if err != nil {
			t.Fatalf("inspect: %v\n%s", err, said.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("inspect did not stop when the session ended")
	}
	// The page has every event the caller's side saw, and the session's
	// end, which came after the call was hung up.
	inPage := map[uint64]events.Kind{}
	var last events.Event
	for _, e := range eventsInPage(t, readFile(t, page)) {
		inPage[e.Seq] = e.Kind
		last = e
	}
	for _, e := range evs {
		if inPage[e.Seq] != e.Kind {
			t.Errorf("inspect's page lacks event %d (%s)", e.Seq, e.Kind)
		}
	}
	if last.Kind != events.SessionEnded {
		t.Errorf("inspect's page ends with %s; want session_ended", last.Kind)
	}

	// The page, in Chromium.
	bctx, bcancel := context.WithTimeout(ctx, 45*time.Second)
	defer bcancel()
	cmd := exec.CommandContext(bctx, node, filepath.Join(dir, "inspect-call.mjs"), page, filepath.Join(out, "call.png"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res struct {
		OK                 bool
		Error              string
		Errors, Requests   []string
		Kinds              []string
		Seqs, FileSeqs     []int
		Lanes              map[string][]string
		Turns              int
		Tip, TipAfter      string
		Screenshot         string
		CanvasWidth, Width int
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("inspect-call.mjs: %v (%v); output %q; log:\n%s", err, runErr, stdout.String(), stderr.String())
	}
	if !res.OK {
		t.Fatalf("in the browser: %s\n%s", res.Error, stderr.String())
	}
	if len(res.Errors) > 0 || len(res.Requests) > 0 {
		t.Errorf("the page had errors %v and asked for %v", res.Errors, res.Requests)
	}
	for _, k := range []string{"handoff", "barge_in_confirmed", "tool_deferred", "tool_started", "playout_truncated", "turn_metrics"} {
		if !slices.Contains(res.Kinds, k) {
			t.Errorf("the page lacks %s: it shows %v", k, res.Kinds)
		}
	}
	if !slices.Equal(res.Seqs, res.FileSeqs) || len(res.Seqs) != len(inPage) {
		t.Errorf("the page shows events %v; its file has %v", res.Seqs, res.FileSeqs)
	}
	if !slices.Contains(res.Lanes["session"], "handoff") || !slices.Contains(res.Lanes["barge"], "barge_in_confirmed") ||
		!slices.Contains(res.Lanes["tools"], "tool_deferred") {
		t.Errorf("the page's lanes: %v", res.Lanes)
	}
	if res.Turns == 0 {
		t.Error("the page shows no turn's breakdown")
	}
	if !strings.Contains(res.Tip, "barge_in_confirmed") || !strings.Contains(res.Tip, barge.Reason) {
		t.Errorf("hovering the barge-in showed %q; want its kind and reason %q", res.Tip, barge.Reason)
	}
	if res.TipAfter != "" {
		t.Errorf("a tip is still open for the screenshot: %q", res.TipAfter)
	}
	t.Logf("screenshot %s; page %s", res.Screenshot, page)
	// HOLDLINE_INSPECT_CALL=PREFIX keeps the page and the screenshot as
	// PREFIX.html and PREFIX.png, for an issue or a review, without
	// -artifacts.
	if prefix := os.Getenv("HOLDLINE_INSPECT_CALL"); prefix != "" {
		for src, dst := range map[string]string{res.Screenshot: prefix + ".png", page: prefix + ".html"} {
			b, err := os.ReadFile(src)
			if err == nil {
				err = os.WriteFile(dst, b, 0o644)
			}
			if err != nil {
				t.Errorf("keeping %s: %v", dst, err)
			}
		}
	}
}

// eventLog is events one a line, for a failing test's log.
func eventLog(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%4d %8.3fs e%d %-20s %s %s %s %s %s %s\n", e.Seq, e.At.Seconds(), e.Epoch, e.Kind, e.Tool, e.CallID, e.State, e.Reason, e.Text, e.Error)
	}
	return b.String()
}
