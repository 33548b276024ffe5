package server_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// testAgents makes booking agents on the offline demo model with a scripted
// recogniser the test tells what the caller said, and a tone voice.
type testAgents struct {
	mu   sync.Mutex
	stts []*scripted.STT
}

func (a *testAgents) newAgent(context.Context) (*runtime.Agent, func(), error) {
	voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(4))
	if err != nil {
		return nil, nil, err
	}
	rec := scripted.NewSTT()
	a.mu.Lock()
	a.stts = append(a.stts, rec)
	a.mu.Unlock()
	return booking.New(booking.NewRestaurant(8), booking.WithModel(booking.NewDemoModel()), booking.WithTTS(voice), booking.WithSTT(rec)), nil, nil
}

// recogniser returns the recogniser of the i-th call's agent (the host
// makes one agent of its own first, at New).
func (a *testAgents) recogniser(i int) *scripted.STT {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stts[i+1]
}

func newServer(t *testing.T, opts ...server.Option) (*httptest.Server, *testAgents, *server.Server) {
	t.Helper()
	agents := &testAgents{}
	srv, err := server.New(agents.newAgent, append([]server.Option{server.WithAgentName("booking")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return hs, agents, srv
}

func kind(k events.Kind) func(events.Event) bool {
	return func(e events.Event) bool { return e.Kind == k }
}

func count(evs []events.Event, match func(events.Event) bool) int {
	n := 0
	for _, e := range evs {
		if match(e) {
			n++
		}
	}
	return n
}

func booked(e events.Event) bool {
	return e.Kind == events.ToolTerminal && e.Tool == "book_table"
}

// heardSince says whether agent audio louder than a whisper arrived after t.
func heardSince(c *rtctest.Client, t time.Time) bool {
	for _, l := range c.Levels() {
		if l.At.After(t) && l.RMS > 0.01 {
			return true
		}
	}
	return false
}

func TestCallFromAWebRTCClientBooksOnceBargesInAndResumes(t *testing.T) {
	hs, agents, srv := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Resumed || !strings.HasPrefix(c.Location, "/v1/sessions/s_") || c.ResumeToken == "" {
		t.Fatalf("answer: location %q, token %q, resumed %v", c.Location, c.ResumeToken, c.Resumed)
	}
	start := time.Now()
	if err := c.Wait(ctx, "the greeting's audio", func(c *rtctest.Client) bool { return heardSince(c, start) }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, kind(events.PlayoutDone)); err != nil {
		t.Fatal(err)
	}

	// The caller asks for a table.
	agents.recogniser(0).Say("book a table for two at seven")
	c.Say(rtctest.Tone(700*time.Millisecond, 0.3))
	if _, err := c.WaitEvent(ctx, booked); err != nil {
		t.Fatalf("%v; events: %v", err, kinds(c.Events()))
	}
	if e, err := c.WaitEvent(ctx, func(e events.Event) bool {
		return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "booked")
	}); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("agent: %s", e.Text)
	}

	// The caller interrupts a long answer.
	if err := c.SendText("What times are available?"); err != nil {
		t.Fatal(err)
	}
	asked, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.UserTurn && e.Text == "What times are available?" })
	if err != nil {
		t.Fatal(err)
	}
	turn, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutStarted && e.Seq > asked.Seq })
	if err != nil {
		t.Fatal(err)
	}
	playing := time.Now()
	if err := c.Wait(ctx, "the answer's audio", func(c *rtctest.Client) bool { return heardSince(c, playing) }); err != nil {
		t.Fatal(err)
	}
	agents.recogniser(0).Say("wait")
	c.Say(rtctest.Tone(600*time.Millisecond, 0.3))
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool {
		return e.Kind == events.PlayoutTruncate && e.Epoch == turn.Epoch
	}); err != nil {
		t.Fatalf("the answer was not cut: %v; events: %v", err, kinds(c.Events()))
	}
	onsets := c.Onsets()
	onset := onsets[len(onsets)-1]
	stop := lastLoud(c.Levels(), onset, 300*time.Millisecond)
	t.Logf("barge-in: the agent's audio stopped %v after the caller's onset", stop.Sub(onset).Round(time.Millisecond))

	// The page reloads: the connection goes, a new one resumes the session.
	before := c.Events()
	c.Close()
	if srv.Sessions() != 1 {
		t.Fatalf("%d sessions after the connection dropped; want the one, waiting", srv.Sessions())
	}
	r, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{ResumeToken: c.ResumeToken})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Resumed || r.Location != c.Location || r.ResumeToken == c.ResumeToken {
		t.Fatalf("resume: location %q (was %q), resumed %v, token rotated %v", r.Location, c.Location, r.Resumed, r.ResumeToken != c.ResumeToken)
	}
	// The history comes back with the new connection, then the session goes on.
	if err := r.Wait(ctx, "the history", func(r *rtctest.Client) bool { return len(r.Events()) >= len(before) }); err != nil {
		t.Fatal(err)
	}
	if err := r.SendText("Are you free at eight?"); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if _, err := r.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.UserTurn && e.Text == "Are you free at eight?" }); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx, "the agent's voice after the resume", func(r *rtctest.Client) bool { return heardSince(r, after) }); err != nil {
		t.Fatal(err)
	}
	evs := r.Events()
	if n := count(evs, booked); n != 1 {
		t.Errorf("book_table ran %d times; want once", n)
	}
	if count(evs, kind(events.SessionStarted)) != 1 {
		t.Errorf("the session started again instead of going on: %v", kinds(evs))
	}
	if count(evs, kind(events.TransportLost)) != 1 || count(evs, kind(events.TransportRestored)) != 1 {
		t.Errorf("want one transport_lost and one transport_restored: %v", kinds(evs))
	}
	if len(r.Captions()) == 0 && len(c.Captions()) == 0 {
		t.Error("no captions of the agent's speech")
	}
	if err := r.Delete(ctx, hs.URL, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, func() bool { return srv.Sessions() == 0 })
}

// lastLoud returns the time of the last loud packet of agent audio after
// onset that is followed by at least quiet of silence.
func lastLoud(levels []rtctest.Level, onset time.Time, quiet time.Duration) time.Time {
	last := onset
	for _, l := range levels {
		if l.At.Before(onset) {
			continue
		}
		if l.RMS > 0.01 {
			if l.At.Sub(last) > quiet {
				break
			}
			last = l.At
		}
	}
	return last
}

func kinds(evs []events.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(string(e.Kind))
		if e.Text != "" {
			b.WriteString("(" + e.Text + ")")
		}
		b.WriteString(" ")
	}
	return b.String()
}

func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("condition not met before the deadline")
		}
	}
}

func post(t *testing.T, url, contentType, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

const videoOnlyOffer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:96 VP8/90000\r\n"
const pcmuOnlyOffer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:0 PCMU/8000\r\n"

func TestBadOffersAreRefusedWithAReason(t *testing.T) {
	hs, _, srv := newServer(t)
	url := hs.URL + "/v1/sessions"
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		reason                  string
	}{
		{"malformed SDP", "application/sdp", "this is not SDP", 400, "not SDP"},
		{"empty body", "application/sdp", "", 400, "empty body"},
		{"no audio", "application/sdp", videoOnlyOffer, 400, "no audio"},
		{"no Opus", "application/sdp", pcmuOnlyOffer, 400, "no Opus"},
		{"JSON instead of SDP", "application/json", `{"sdp":"v=0"}`, 415, "application/sdp"},
		{"huge body", "application/sdp", strings.Repeat("a", 70<<10), 413, "over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason := post(t, url, tc.contentType, tc.body)
			if status != tc.status || !strings.Contains(reason, tc.reason) {
				t.Errorf("%d %q; want %d with %q", status, reason, tc.status, tc.reason)
			}
		})
	}
	if n := srv.Sessions(); n != 0 {
		t.Errorf("%d sessions left by refused offers", n)
	}
}

func TestResumeTokensUnknownAndExpired(t *testing.T) {
	hs, _, srv := newServer(t, server.WithResumeTTL(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st *rtctest.ErrStatus
	_, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{ResumeToken: "no-such-token"})
	if !errors.As(err, &st) || st.Status != http.StatusNotFound {
		t.Fatalf("unknown token: %v; want 404", err)
	}

	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A token that was used to resume no longer works: it rotated.
	r, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{ResumeToken: c.ResumeToken})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	_, err = rtctest.Dial(ctx, hs.URL, rtctest.Options{ResumeToken: c.ResumeToken})
	if !errors.As(err, &st) || st.Status != http.StatusNotFound {
		t.Fatalf("replayed token: %v; want 404", err)
	}
	// Not resumed within the TTL: the session ends and its token says so.
	r.Close()
	waitFor(t, ctx, func() bool { return srv.Sessions() == 0 })
	_, err = rtctest.Dial(ctx, hs.URL, rtctest.Options{ResumeToken: r.ResumeToken})
	if !errors.As(err, &st) || st.Status != http.StatusGone {
		t.Fatalf("expired token: %v; want 410", err)
	}
}

func TestBearerTokenRequiredWhenSet(t *testing.T) {
	hs, _, _ := newServer(t, server.WithToken("s3cret"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st *rtctest.ErrStatus
	for _, tok := range []string{"", "wrong"} {
		_, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{Token: tok})
		if !errors.As(err, &st) || st.Status != http.StatusUnauthorized || !strings.Contains(st.Reason, "bearer token") {
			t.Errorf("token %q: %v; want 401 with a reason", tok, err)
		}
	}
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := http.Get(hs.URL + c.Location + "/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("events without the token: %d; want 401", resp.StatusCode)
	}
	resp, err = http.Get(hs.URL + "/v1/config")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"auth_required":true`) {
		t.Errorf("config %s does not say a token is required", b)
	}
}

// readSSE reads Server-Sent Events from body until n have arrived.
func readSSE(t *testing.T, body io.Reader, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.id != "" {
				out = append(out, cur)
				if len(out) == n {
					return out
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	t.Fatalf("the stream ended after %d events: %v", len(out), sc.Err())
	return nil
}

type sseEvent struct{ id, kind, data string }

func TestEventsStreamAndTypedInputOverHTTP(t *testing.T) {
	hs, _, _ := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{NoHello: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+c.Location+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	first := readSSE(t, resp.Body, 3)
	if first[0].kind != string(events.SessionStarted) || first[0].id != "1" || !strings.Contains(first[0].data, `"kind":"session_started"`) {
		t.Errorf("first event: %+v", first[0])
	}

	// Typed input over HTTP is a turn like any other.
	status, reason := post(t, hs.URL+c.Location+"/input", "application/json", `{"text":"Are you free at eight?"}`)
	if status != http.StatusAccepted {
		t.Fatalf("input: %d %s", status, reason)
	}
	if status, _ := post(t, hs.URL+c.Location+"/input", "application/json", `{}`); status != http.StatusBadRequest {
		t.Errorf("empty input: %d; want 400", status)
	}
	for {
		e := readSSE(t, resp.Body, 1)[0]
		if e.kind == string(events.UserTurn) && strings.Contains(e.data, "Are you free at eight?") {
			break
		}
	}

	// A reconnecting reader gets what came after the last event it saw.
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+c.Location+"/events", nil)
	req.Header.Set("Last-Event-ID", "2")
	again, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Body.Close()
	if e := readSSE(t, again.Body, 1)[0]; e.id != "3" || e.kind != first[2].kind {
		t.Errorf("after Last-Event-ID 2 came %+v; want event 3 (%s)", e, first[2].kind)
	}
	resp2, err := http.Get(hs.URL + "/v1/sessions/nope/events")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound {
		t.Errorf("events of an unknown session: %d; want 404", resp2.StatusCode)
	}
}

func TestMetricsCountTurnsToolsAndLatency(t *testing.T) {
	hs, _, _ := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendText("Book a table for two at seven"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "booked") }); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := string(b)
	for _, want := range []string{
		`holdline_sessions_active{transport="webrtc"} 1`,
		`holdline_tool_outcomes_total{state="succeeded",tool="book_table"} 1`,
		`holdline_response_latency_seconds_count`,
		`holdline_tool_duration_seconds_count{tool="book_table"} 1`,
		`holdline_output_frames_missed_total{transport="webrtc"}`,
		`holdline_stt_turns_dropped_total 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(m, "holdline_turns_total 0\n") {
		t.Error("no turns counted")
	}
	for _, stage := range []string{"first_token", "voice_first_audio", "played", "overhead"} {
		re := regexp.MustCompile(`holdline_turn_stage_seconds_count\{agent="[^"]+",model="[^"]+",stage="` + stage + `",voice="[^"]+"\} [1-9]`)
		if !re.MatchString(m) {
			t.Errorf("no turn took stage %s: the turn_metrics events did not reach the histogram", stage)
		}
	}
}

// TestServerFullOfCallsItsEnginesCannotServeRefusesMore checks the
// admission default: with calls that each take more than the machine's
// share, the server admits one, and refuses the next with 503, a
// Retry-After and a reason; an explicit cap overrides the default.
func TestServerFullOfCallsItsEnginesCannotServeRefusesMore(t *testing.T) {
	if got := calls.AdmissionDefault(calls.LocalCallCost, 2); got != 56 {
		t.Errorf("local engines on 2 cores admit %d calls; want 56 (80%% of 2 cores at a thirty-fifth of a core each)", got)
	}
	if got := calls.AdmissionDefault(0, 2); got != server.DefaultMaxSessions {
		t.Errorf("no call cost: %d; want DefaultMaxSessions", got)
	}
	hs, _, srv := newServer(t, server.WithCallCost(16))
	if srv.MaxSessions() != 1 {
		t.Fatalf("a call taking 16 cores: %d sessions admitted; want 1", srv.MaxSessions())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := http.Post(hs.URL+"/v1/sessions", "application/sdp", strings.NewReader("v=0\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "engines") {
		t.Errorf("a second call: %d, Retry-After %q, %s; want 503 with Retry-After saying the engines are full", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	_, _, capped := newServer(t, server.WithCallCost(16), server.WithMaxSessions(3))
	if capped.MaxSessions() != 3 {
		t.Errorf("WithMaxSessions(3) with a call cost: %d admitted; want 3", capped.MaxSessions())
	}
}
