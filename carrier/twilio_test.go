package carrier_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/carrier"
	"github.com/holdline/holdline/carrier/carriertest"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

const authToken = "test-auth-token-not-a-secret"

// syncBuffer is a log that tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLog waits for the log to hold want.
func (s *syncBuffer) waitLog(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q:\n%s", want, s.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type rig struct {
	url  string
	host *calls.Host
	log  *syncBuffer
	tr   *carrier.Transport
	rec  *recorder
}

// recorder keeps the events of every session.
type recorder struct {
	mu   sync.Mutex
	evs  []events.Event
	sess []*runtime.Session
}

func (r *recorder) attach(s *runtime.Session) {
	sub := s.Subscribe(1024)
	r.mu.Lock()
	r.sess = append(r.sess, s)
	r.mu.Unlock()
	go func() {
		for e := range sub.C() {
			r.mu.Lock()
			r.evs = append(r.evs, e)
			r.mu.Unlock()
		}
	}()
}

func (r *recorder) first(kind events.Kind) (events.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if e.Kind == kind {
			return e, true
		}
	}
	return events.Event{}, false
}

func (r *recorder) count(kind events.Kind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// toneAgent says answer, in the scripted voice at 8 kHz, when the call
// comes up and after every caller turn; the scripted ears hear what
// heard queues.
func toneAgent(rec *recorder, answer string, ears *scripted.STT, tools ...runtime.Option) runtime.AgentFunc {
	return func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithRealtimeFactor(4))
		if err != nil {
			return nil, nil, err
		}
		model := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
			return scripted.Response{TTFB: 20 * time.Millisecond, Text: answer}
		})
		return &runtime.Agent{Name: "phone", Model: model, TTS: voice, STT: ears,
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				rec.attach(s)
				return s.GenerateReply(ctx, "")
			}}, nil, nil
	}
}

func newRig(t *testing.T, newAgent runtime.AgentFunc, opts ...carrier.TwilioOption) *rig {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	host, err := calls.New(newAgent, calls.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	tr := carrier.NewTransport(host, carrier.WithLogger(log))
	h := carrier.NewTwilio(tr, append([]carrier.TwilioOption{carrier.WithTwilioLogger(log)}, opts...)...)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		host.Close()
		srv.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &rig{url: srv.URL, host: host, log: logs, tr: tr}
}

func TestTwiMLConnectsTheCallToItsStream(t *testing.T) {
	r := newRig(t, toneAgent(&recorder{}, "Hello.", scripted.NewSTT()), carrier.WithTwilioAccount("ACx", authToken))
	ctx := t.Context()
	res, body, err := carriertest.Webhook(ctx, carriertest.Config{BaseURL: r.url, AuthToken: authToken, CallSid: "CA1", From: "+1555&<0100>"})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/xml" {
		t.Fatalf("webhook answered %d %s: %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	var doc carriertest.TwiML
	if err := xml.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	if want := "ws://" + strings.TrimPrefix(r.url, "http://") + carrier.TwilioStreamPath; doc.Connect.Stream.URL != want {
		t.Errorf("stream URL %q, want %q", doc.Connect.Stream.URL, want)
	}
	got := map[string]string{}
	for _, p := range doc.Connect.Stream.Params {
		got[p.Name] = p.Value
	}
	if got["from"] != "+1555&<0100>" || got["to"] != "+15550199" || got["callSid"] != "CA1" || len(got["token"]) < 20 {
		t.Errorf("parameters %v", got)
	}
}

func TestStreamURLFollowsThePublicURLAndTheProxy(t *testing.T) {
	pu, _ := url.Parse("https://agent.example.com")
	for _, tc := range []struct {
		name    string
		opts    []carrier.TwilioOption
		headers map[string]string
		want    string
	}{
		{"public URL", []carrier.TwilioOption{carrier.WithPublicURL(pu)}, map[string]string{"X-Forwarded-Host": "other"}, "wss://agent.example.com/v1/twilio/stream"},
		{"proxy", nil, map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "proxied.example.com"}, "wss://proxied.example.com/v1/twilio/stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, toneAgent(&recorder{}, "Hello.", scripted.NewSTT()), tc.opts...)
			req, _ := http.NewRequest("POST", r.url+carrier.TwilioVoicePath, strings.NewReader("CallSid=CA2"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !strings.Contains(string(b), `url="`+tc.want+`"`) {
				t.Errorf("TwiML %s; want the stream at %s", b, tc.want)
			}
		})
	}
}

// A signed webhook behind --public-url verifies against the public URL.
func TestWebhookSignature(t *testing.T) {
	r := newRig(t, toneAgent(&recorder{}, "Hello.", scripted.NewSTT()), carrier.WithTwilioAccount("ACx", authToken))
	ctx := t.Context()
	res, body, err := carriertest.Webhook(ctx, carriertest.Config{BaseURL: r.url, AuthToken: authToken, BadSignature: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "X-Twilio-Signature does not match") {
		t.Errorf("a forged signature: %d %q; want 403 saying why", res.StatusCode, body)
	}
	res, body, err = carriertest.Webhook(ctx, carriertest.Config{BaseURL: r.url})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "no X-Twilio-Signature") {
		t.Errorf("no signature: %d %q; want 403 saying why", res.StatusCode, body)
	}
	r.log.waitLog(t, "twilio webhook refused")
	if strings.Contains(r.log.String(), authToken) {
		t.Error("the auth token is in the log")
	}
}

// Twilio's documented example: the signature of a webhook with its params.
func TestTwilioSignatureMatchesTheDocumentedScheme(t *testing.T) {
	params := url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+12349013030"}, "Digits": {"1234"}, "From": {"+12349013030"}, "To": {"+18005551212"}}
	// The value Twilio's security page gives for this request (and
	// Python's hmac module agrees).
	got := carrier.TwilioSignature("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", params)
	if got != "0/KCTR6DLpKmkAf8muzZqo1nDgQ=" {
		t.Errorf("signature %s", got)
	}
}

// dialScripted places a call to a rig whose agent speaks.
func dialScripted(t *testing.T, ctx context.Context, r *rig, cfg carriertest.Config) *carriertest.Phone {
	t.Helper()
	cfg.BaseURL = r.url
	p, err := carriertest.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Hangup(hctx)
	})
	return p
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The agent's greeting plays, marks come back as it plays, and the
// playout clock is what the marks said: the whole greeting.
func TestGreetingPlaysWithMarks(t *testing.T) {
	rec := &recorder{}
	r := newRig(t, toneAgent(rec, "Thanks for calling, how can I help you today?", scripted.NewSTT()), carrier.WithTwilioAccount("ACx", authToken))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	p := dialScripted(t, ctx, r, carriertest.Config{AuthToken: authToken})
	waitFor(t, ctx, "the greeting to play out", func() bool { _, ok := rec.first(events.PlayoutDone); return ok })
	done, _ := rec.first(events.PlayoutDone)
	marks := p.Marks()
	played := 0
	for _, m := range marks {
		if m.Played {
			played++
		}
	}
	if len(marks) < 3 || played == 0 {
		t.Errorf("%d marks sent, %d played; want a mark every 200 ms of a %v greeting", len(marks), played, done.Played)
	}
	if got := p.Received(); got < done.Played {
		t.Errorf("the phone received %v of audio, the greeting played %v", got, done.Played)
	}
	if len(p.Clears()) != 0 {
		t.Errorf("cleared %d times with no one talking", len(p.Clears()))
	}
}

// Bad input from a carrier: each is logged clearly, the stream is closed
// with a reason where the protocol is broken, and the server goes on.
func TestBadInputFromTheCarrier(t *testing.T) {
	rec := &recorder{}
	r := newRig(t, toneAgent(rec, "Hello there.", scripted.NewSTT()), carrier.WithTwilioAccount("ACx", authToken))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	streamURL := "ws" + strings.TrimPrefix(r.url, "http") + carrier.TwilioStreamPath

	// mint returns a fresh stream token for callSid.
	mint := func(callSid string) map[string]string {
		_, body, err := carriertest.Webhook(ctx, carriertest.Config{BaseURL: r.url, AuthToken: authToken, CallSid: callSid})
		if err != nil {
			t.Fatal(err)
		}
		var doc carriertest.TwiML
		if err := xml.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, p := range doc.Connect.Stream.Params {
			m[p.Name] = p.Value
		}
		return m
	}
	open := func() *carriertest.Phone {
		p, err := carriertest.Open(ctx, streamURL, carriertest.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	closedWith := func(p *carriertest.Phone, want string) {
		t.Helper()
		go func() {
			for {
				if _, _, err := p.Conn().Read(ctx); err != nil {
					return
				}
			}
		}()
		// The phone's reader is not running: read until the close.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if strings.Contains(r.log.String(), want) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("no log of %q", want)
	}

	t.Run("media before start", func(t *testing.T) {
		p := open()
		_ = p.Send(ctx, map[string]any{"event": "media", "media": map[string]any{"payload": base64.StdEncoding.EncodeToString(carriertest.MuLaw20ms)}})
		closedWith(p, "media before start")
	})
	t.Run("no token", func(t *testing.T) {
		p := open()
		_ = p.Start(ctx, "CA9", map[string]string{})
		closedWith(p, "no stream token")
	})
	t.Run("forged token", func(t *testing.T) {
		p := open()
		_ = p.Start(ctx, "CA9", map[string]string{"token": "forged"})
		closedWith(p, "stream token unknown, used or expired")
	})
	t.Run("token of another call", func(t *testing.T) {
		params := mint("CA10")
		p := open()
		_ = p.Start(ctx, "CA11", params)
		closedWith(p, "minted for call CA10, used by CA11")
	})
	t.Run("reused token", func(t *testing.T) {
		params := mint("CA12")
		p := open()
		if err := p.Start(ctx, "CA12", params); err != nil {
			t.Fatal(err)
		}
		r.log.waitLog(t, "call started")
		// Counted before the second start: its refusal may be logged
		// before Start returns.
		n := strings.Count(r.log.String(), "stream token unknown, used or expired")
		q := open()
		_ = q.Start(ctx, "CA12", params)
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(r.log.String(), "stream token unknown, used or expired") == n && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if strings.Count(r.log.String(), "stream token unknown, used or expired") == n {
			t.Error("a token used twice was not refused")
		}
		_ = p.Send(ctx, map[string]any{"event": "stop"})
	})
	t.Run("garbage on a live stream", func(t *testing.T) {
		params := mint("CA13")
		p := open()
		if err := p.Start(ctx, "CA13", params); err != nil {
			t.Fatal(err)
		}
		p.Run(ctx)
		for _, raw := range []string{
			`{not json`,
			`{"event":"bogus"}`,
			`{"event":"media","media":{"payload":"!!!not base64"}}`,
			`{"event":"media","media":{"payload":"` + base64.StdEncoding.EncodeToString(carriertest.MuLaw20ms[:100]) + `"}}`,
			`{"event":"mark","mark":{"name":"never-sent"}}`,
		} {
			if err := p.SendRaw(ctx, []byte(raw)); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range []string{"not JSON", "an unknown event", "not base64", "not 20 ms", "a mark that was not sent"} {
			r.log.waitLog(t, want)
		}
		if err := p.Start(ctx, "CA13", params); err != nil {
			t.Fatal(err)
		}
		code, reason, err := p.WaitClosed(ctx)
		if err != nil || code != websocket.StatusPolicyViolation || reason != "a second start on the stream" {
			t.Errorf("a second start closed the stream with %v %q (%v); want 1008 saying why", code, reason, err)
		}
	})
	// The server is still up: a good call works.
	p := dialScripted(t, ctx, r, carriertest.Config{AuthToken: authToken})
	waitFor(t, ctx, "audio on a good call after the bad ones", func() bool { return p.Received() > 0 })
}

// The caller hanging up (stop) ends the call; the agent hanging up ends
// the stream with its reason.
func TestHangups(t *testing.T) {
	rec := &recorder{}
	r := newRig(t, toneAgent(rec, "Hello.", scripted.NewSTT()), carrier.WithTwilioAccount("ACx", authToken))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	p := dialScripted(t, ctx, r, carriertest.Config{AuthToken: authToken})
	waitFor(t, ctx, "the call", func() bool { return r.host.Len() == 1 })
	if err := p.Hangup(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the call to end", func() bool { return r.host.Len() == 0 })
	r.log.waitLog(t, "reason=\"the caller hung up\"")

	q := dialScripted(t, ctx, r, carriertest.Config{AuthToken: authToken})
	waitFor(t, ctx, "the second call", func() bool { return r.host.Len() == 1 })
	rec.mu.Lock()
	s := rec.sess[len(rec.sess)-1]
	rec.mu.Unlock()
	if err := s.End(ctx, "the agent said goodbye"); err != nil {
		t.Fatal(err)
	}
	code, reason, err := q.WaitClosed(ctx)
	if err != nil || code != websocket.StatusNormalClosure || reason != "the agent said goodbye" {
		t.Errorf("the agent's hang-up closed the stream with %v %q (%v)", code, reason, err)
	}
}

func TestStreamDropIsALostConnection(t *testing.T) {
	rec := &recorder{}
	r := newRig(t, toneAgent(rec, "Hello.", scripted.NewSTT()), carrier.WithTwilioAccount("ACx", authToken))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	p := dialScripted(t, ctx, r, carriertest.Config{AuthToken: authToken})
	waitFor(t, ctx, "the call", func() bool { return r.host.Len() == 1 })
	// The call is running (its agent greets): a stream dropped before
	// then ends a session that never ran, and has no connection to lose.
	waitFor(t, ctx, "the greeting", func() bool { _, ok := rec.first(events.TurnStarted); return ok })
	p.Conn().CloseNow()
	waitFor(t, ctx, "the call to end", func() bool { return r.host.Len() == 0 })
	r.log.waitLog(t, "the stream dropped")
	// The recorder reads the session's events on a goroutine of its own:
	// the event may land just after the call is gone from the host.
	waitFor(t, ctx, "a "+string(events.TransportLost)+" event", func() bool { _, ok := rec.first(events.TransportLost); return ok })
}

// The agent's transfer updates the call through Twilio's REST API with a
// <Dial> of the target, and the stream ends with the transfer as reason.
func TestTransferThroughTheRESTAPI(t *testing.T) {
	type got struct {
		path, user, pass, twiml string
	}
	reqs := make(chan got, 4)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		_ = r.ParseForm()
		reqs <- got{r.URL.Path, u, p, r.PostForm.Get("Twiml")}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"sid":"CA1","status":"in-progress"}`)
	}))
	defer api.Close()
	transfer := tools.MustNew("transfer_to_billing", "Put the caller through to billing.",
		func(ctx context.Context, _ struct{}) (string, error) {
			if err := runtime.Transfer(ctx, "sip:billing@example.com"); err != nil {
				return "", err
			}
			return "transferred", nil
		})
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		model := scripted.NewLLM(scripted.Response{Text: "Putting you through.", ToolCalls: []scripted.Call{{Name: "transfer_to_billing"}}})
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000))
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{Name: "desk", Model: model, TTS: voice, STT: scripted.NewSTT(), Tools: []*tools.Tool{transfer},
			OnEnter: func(ctx context.Context, s *runtime.Session) error { return s.GenerateReply(ctx, "") }}, nil, nil
	}
	r := newRig(t, newAgent, carrier.WithTwilioAccount("ACacct", authToken), carrier.WithTwilioAPI(api.URL, api.Client()))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	p := dialScripted(t, ctx, r, carriertest.Config{AuthToken: authToken, CallSid: "CAxfer"})
	select {
	case g := <-reqs:
		if g.path != "/2010-04-01/Accounts/ACacct/Calls/CAxfer.json" || g.user != "ACacct" || g.pass != authToken {
			t.Errorf("REST call to %s as %s", g.path, g.user)
		}
		if g.twiml != "<Response><Dial><Sip>sip:billing@example.com</Sip></Dial></Response>" {
			t.Errorf("Twiml %q", g.twiml)
		}
	case <-ctx.Done():
		t.Fatal("no REST call")
	}
	code, reason, err := p.WaitClosed(ctx)
	if err != nil || code != websocket.StatusNormalClosure || reason != "transferred to sip:billing@example.com" {
		t.Errorf("the stream closed with %v %q (%v)", code, reason, err)
	}
	if strings.Contains(r.log.String(), authToken) {
		t.Error("the auth token is in the log")
	}
}

// A transfer Twilio refuses is an error the agent sees; the call goes on.
func TestTransferRefusedByTwilio(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"code":20404,"message":"The requested resource was not found"}`)
	}))
	defer api.Close()
	errs := make(chan error, 1)
	transfer := tools.MustNew("transfer_to_billing", "Put the caller through to billing.",
		func(ctx context.Context, _ struct{}) (string, error) {
			err := runtime.Transfer(ctx, "+15550123")
			errs <- err
			return "not transferred", nil
		})
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		model := scripted.NewLLM(scripted.Response{Text: "Putting you through.", ToolCalls: []scripted.Call{{Name: "transfer_to_billing"}}}, scripted.Response{Text: "Sorry."})
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000))
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{Name: "desk", Model: model, TTS: voice, STT: scripted.NewSTT(), Tools: []*tools.Tool{transfer},
			OnEnter: func(ctx context.Context, s *runtime.Session) error { return s.GenerateReply(ctx, "") }}, nil, nil
	}
	r := newRig(t, newAgent, carrier.WithTwilioAccount("ACacct", authToken), carrier.WithTwilioAPI(api.URL, api.Client()))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	dialScripted(t, ctx, r, carriertest.Config{AuthToken: authToken})
	select {
	case err := <-errs:
		if !errors.Is(err, carrier.ErrTransferFailed) || !strings.Contains(err.Error(), "not found") {
			t.Errorf("transfer error %v", err)
		}
	case <-ctx.Done():
		t.Fatal("no transfer")
	}
	if r.host.Len() != 1 {
		t.Errorf("%d calls after a failed transfer; want the call to go on", r.host.Len())
	}
}

// A key the caller presses reaches the session as on any phone line.
func TestDTMFReachesTheSession(t *testing.T) {
	rec := &recorder{}
	r := newRig(t, toneAgent(rec, "Hello.", scripted.NewSTT()), carrier.WithTwilioAccount("ACx", authToken))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	p := dialScripted(t, ctx, r, carriertest.Config{AuthToken: authToken})
	waitFor(t, ctx, "the session", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.sess) == 1 })
	if err := p.DTMF(ctx, "5"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the key press", func() bool { e, ok := rec.first(events.DTMF); return ok && e.Text == "5" })
}
