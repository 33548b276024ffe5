package livekit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/livekit/protocol/auth"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/livekit"
)

// lkPage is what test/browser/livekit.mjs prints: what LiveKit's own
// JavaScript client saw in the room.
type lkPage struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	Page  struct {
		Version        string
		Connected      bool
		Error          *string
		Identity       string
		MicTrackSid    string
		AgentKindAgent *int
		Participants   map[string]struct {
			Kind       int
			IsAgent    bool
			Attributes map[string]string
		}
		States []struct {
			At       int
			Identity string
			State    string
			Initial  bool
		}
		Streams []struct {
			ID, Sender, Topic string
			At, DoneAt        int
			Attributes        map[string]string // the header's
			EndAttributes     map[string]string // with the trailer's, once done
			Text              string
			Done              bool
			Error             *string
			Chunks            []struct {
				At   int
				Text string
			}
		}
		AgentTracks []struct {
			At                          int
			Identity, Sid, Source, Kind string
		}
		FirstHeardMs *int
		PeakRMS      float64
		Levels       []struct {
			At  int
			RMS float64
		}
		Events []string
	} `json:"page"`
}

// needBrowserCaller returns node and test/browser when Chromium, node,
// playwright-core, livekit-client, espeak-ng and sox are there; else the
// test is skipped (failed under make test, which installs them).
func needBrowserCaller(t *testing.T) (node, dir string) {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		need.Missingf(t, "%s is missing: make test-deps installs it", what)
	}
	for _, bin := range []string{"/usr/bin/chromium", "node", "espeak-ng", "sox"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing(bin)
		}
	}
	node, _ = exec.LookPath("node")
	dir, _ = filepath.Abs("../test/browser")
	for _, mod := range []string{"playwright-core", "livekit-client"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", mod)); err != nil {
			missing(mod + " (npm ci in test/browser)")
		}
	}
	return node, dir
}

// speechWAV is text spoken by espeak-ng as a 48 kHz WAV for Chromium's
// fake microphone, with before and after seconds of silence around it.
func speechWAV(t *testing.T, text string, before, after float64) string {
	t.Helper()
	dir := t.TempDir()
	raw, wav := filepath.Join(dir, "raw.wav"), filepath.Join(dir, "caller.wav")
	if out, err := exec.Command("espeak-ng", "-v", "en-us+edward", "-w", raw, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	if out, err := exec.Command("sox", raw, "-r", "48000", "-c", "1", "-b", "16", wav,
		"pad", fmt.Sprint(before), fmt.Sprint(after)).CombinedOutput(); err != nil {
		t.Fatalf("sox: %v: %s", err, out)
	}
	return wav
}

// LiveKit's own JavaScript client (npm livekit-client) in headless
// Chromium joins a room a Holdline agent serves, as a browser app built on
// it would: it hears the agent's greeting on the agent's track, sees the
// agent as an AGENT participant, follows lk.agent.state through speaking
// and listening, receives the greeting's words on lk.transcription under
// the agent's identity ending final, and its fake microphone's spoken
// request comes back transcribed under its own identity, then answered.
func TestLiveKitClientInABrowserHearsSeesAndReadsTheAgent(t *testing.T) {
	node, dir := needBrowserCaller(t)
	r := newRig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	const room, caller = "browser", "browser-caller"
	agentID := "agent-" + room
	r.serve(t, ctx, room)

	tok, err := auth.NewAccessToken(r.srv.APIKey, r.srv.APISecret).
		SetIdentity(caller).
		SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: room}).
		SetValidFor(10 * time.Minute).
		ToJWT()
	if err != nil {
		t.Fatal(err)
	}

	// The page and livekit-client's bundle, from 127.0.0.1.
	bundle := filepath.Join(dir, "node_modules", "livekit-client", "dist", "livekit-client.umd.js")
	mux := http.NewServeMux()
	mux.HandleFunc("/livekit.html", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, filepath.Join(dir, "livekit.html"))
	})
	mux.HandleFunc("/livekit-client.umd.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, bundle) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pages := &http.Server{Handler: mux}
	go pages.Serve(ln)
	defer pages.Close()

	// The caller waits out the greeting (about 5 s), then asks; the WAV
	// loops only after the test is over.
	wav := speechWAV(t, "Book a table for two at seven.", 8, 60)

	// The browser runs in the background; node and the Chromium it
	// starts are one process group, killed as one.
	cmd := exec.Command(node, filepath.Join(dir, "livekit.mjs"), "http://"+ln.Addr().String()+"/livekit.html", r.srv.URL, tok, wav, "70")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- cmd.Wait() }()
	killed := false
	kill := func() {
		if !killed {
			killed = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	browserDone := false
	defer func() {
		if !browserDone {
			kill()
			<-ran
			t.Logf("browser log:\n%s", stderr.String())
		}
	}()

	// The agent's side: once its greeting starts, the recogniser is told
	// what the page's microphone will say (it is silent until then).
	hc := r.call(t, ctx)
	waitEvent(t, ctx, hc, "the greeting playing", kind(events.PlayoutStarted))
	r.agents.last().Say("book a table for two at seven")
	greeting := waitEvent(t, ctx, hc, "the greeting played", kind(events.PlayoutDone))
	t.Logf("the greeting played %v after the browser started: %q", time.Since(start).Round(time.Millisecond), greeting.Text)

	var runErr error
	select {
	case runErr = <-ran:
	case <-ctx.Done():
		kill()
		runErr = <-ran
	}
	browserDone = true
	// Whatever Chromium left behind in the group.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	elapsed := time.Since(start)
	var res lkPage
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Logf("browser log:\n%s", stderr.String())
		t.Fatalf("livekit.mjs: %v (%v); output %q", err, runErr, stdout.String())
	}
	p := res.Page
	defer func() {
		if t.Failed() {
			t.Logf("browser log:\n%s", stderr.String())
			t.Logf("the page's events:\n%s", strings.Join(p.Events, "\n"))
		}
	}()
	if !res.OK {
		t.Fatalf("in the browser: %s", res.Error)
	}
	t.Logf("livekit-client %s in Chromium, %v in all; first heard the agent at %v ms, peak RMS %.3f",
		p.Version, elapsed.Round(time.Millisecond), deref(p.FirstHeardMs), p.PeakRMS)
	if p.Error != nil || !p.Connected || p.Identity != caller {
		t.Fatalf("the page connected %v as %q: %v", p.Connected, p.Identity, deref(p.Error))
	}

	// The agent, as LiveKit's client and components see it.
	agent, ok := p.Participants[agentID]
	if !ok {
		t.Fatalf("the page never saw %s: %v", agentID, p.Participants)
	}
	if p.AgentKindAgent == nil || agent.Kind != *p.AgentKindAgent || !agent.IsAgent {
		t.Errorf("the agent's kind in the browser is %d (isAgent %v); want ParticipantKind.AGENT (%v)", agent.Kind, agent.IsAgent, deref(p.AgentKindAgent))
	}

	// Its voice: one microphone track, heard above a whisper.
	var agentTrack string
	for _, tr := range p.AgentTracks {
		if tr.Identity == agentID && tr.Kind == "audio" {
			agentTrack = tr.Sid
			if tr.Source != "microphone" {
				t.Errorf("the agent's track %s has source %q; want microphone", tr.Sid, tr.Source)
			}
		}
	}
	if agentTrack == "" {
		t.Errorf("the page subscribed to no audio track of the agent's: %+v", p.AgentTracks)
	}
	if p.FirstHeardMs == nil || p.PeakRMS < 0.05 {
		t.Errorf("the agent's greeting was not heard: first heard %v ms, peak RMS %.3f", deref(p.FirstHeardMs), p.PeakRMS)
	}
	var levels []string
	for i, l := range p.Levels {
		if i%5 == 0 {
			levels = append(levels, fmt.Sprintf("%.1fs:%.2f", float64(l.At)/1000, l.RMS))
		}
	}
	t.Logf("the agent's level at the page (RMS, every 500 ms): %s", strings.Join(levels, " "))

	// lk.agent.state, in the order the page saw it.
	var states []string
	seen := map[string]bool{}
	for _, s := range p.States {
		if s.Identity == agentID {
			states = append(states, fmt.Sprintf("%s@%d", s.State, s.At))
			seen[s.State] = true
		}
	}
	t.Logf("lk.agent.state at the page: %s", strings.Join(states, " "))
	for _, s := range []string{livekit.StateSpeaking, livekit.StateListening} {
		if !seen[s] {
			t.Errorf("the page never saw lk.agent.state %q: %v", s, states)
		}
	}
	if final := agent.Attributes[livekit.AttrAgentState]; final != livekit.StateListening {
		t.Errorf("lk.agent.state at the end is %q; want %q", final, livekit.StateListening)
	}

	// lk.transcription: the greeting's words under the agent's identity,
	// ending final, tied to the agent's track; then the caller's words
	// under the caller's, tied to the page's microphone.
	var texts []string
	for _, s := range p.Streams {
		texts = append(texts, fmt.Sprintf("\n  %s@%d done=%v header %v end %v %q", s.Sender, s.At, s.Done, s.Attributes, s.EndAttributes, s.Text))
		if s.Error != nil {
			t.Errorf("reading stream %s: %s", s.ID, *s.Error)
		}
		if s.Topic != livekit.TopicTranscription || s.Attributes[livekit.AttrSegmentID] == "" {
			t.Errorf("stream %s: topic %q, attributes %v", s.ID, s.Topic, s.Attributes)
		}
	}
	t.Logf("lk.transcription at the page:%s", strings.Join(texts, ""))
	find := func(sender, text string) int {
		for i, s := range p.Streams {
			if s.Sender == sender && s.Done && s.EndAttributes[livekit.AttrTranscriptionDone] == "true" &&
				strings.EqualFold(strings.Trim(strings.TrimSpace(s.Text), ".!?"), strings.Trim(strings.TrimSpace(text), ".!?")) {
				return i
			}
		}
		return -1
	}
	g := find(agentID, greeting.Text)
	if g < 0 {
		t.Errorf("the greeting %q never arrived whole and final under %s", greeting.Text, agentID)
	} else {
		s := p.Streams[g]
		if tr := s.Attributes[livekit.AttrTranscribedTrack]; tr != agentTrack {
			t.Errorf("the greeting's stream is for track %q; the agent's track is %q", tr, agentTrack)
		}
		if len(s.Chunks) < 2 {
			t.Errorf("the greeting came in %d chunk(s); want its words as they were played", len(s.Chunks))
		}
		if p.FirstHeardMs != nil && s.At > *p.FirstHeardMs+2000 {
			t.Errorf("the greeting's stream opened at %d ms, its audio was heard at %d ms", s.At, *p.FirstHeardMs)
		}
	}
	c := find(caller, "book a table for two at seven")
	if c < 0 {
		t.Errorf("the page's spoken request never came back final under %s", caller)
	} else {
		s := p.Streams[c]
		if tr := s.Attributes[livekit.AttrTranscribedTrack]; tr != p.MicTrackSid {
			t.Errorf("the caller's words are for track %q; the page's microphone is %q", tr, p.MicTrackSid)
		}
	}
	// The booking's answer, as the agent played it, arrived whole and
	// final after the caller's words.
	if n := count(hc, booked); n != 1 {
		t.Errorf("book_table ran %d times; want once", n)
	}
	var answer string
	evs, _, _ := hc.Events(0)
	for _, e := range evs {
		if e.Kind == events.PlayoutDone && strings.Contains(e.Text, "booked") {
			answer = e.Text
		}
	}
	if a := find(agentID, answer); answer == "" || a < c {
		t.Errorf("the booking's answer %q did not arrive final after the caller's words", answer)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
