package carrier_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
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
	"github.com/holdline/holdline/tts/espeak"
)

// The secrets the rigs' carriers sign with (not secrets: tests).
const plivoToken = "test-plivo-token-not-a-secret"

var telnyxPub, telnyxKey = func() (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err)
	}
	return pub, key
}()

// carriers are the carriers whose routes the tests below run through.
var carriers = []carriertest.Carrier{carriertest.Telnyx, carriertest.Plivo}

// newCarrierRig serves carrier c's routes, verifying its signatures, and
// returns the phone's config that signs them.
func newCarrierRig(t *testing.T, newAgent runtime.AgentFunc, c carriertest.Carrier) (*rig, carriertest.Config) {
	t.Helper()
	if c == carriertest.Twilio || c == "" {
		return newRig(t, newAgent, carrier.WithTwilioAccount("ACx", authToken)), carriertest.Config{Carrier: carriertest.Twilio, AuthToken: authToken}
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	host, err := calls.New(newAgent, calls.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	tr := carrier.NewTransport(host, carrier.WithLogger(log))
	var h interface {
		ServeHTTP(w http.ResponseWriter, r *http.Request)
		Verifies() bool
	}
	cfg := carriertest.Config{Carrier: c}
	switch c {
	case carriertest.Telnyx:
		h = carrier.NewTelnyx(tr, carrier.WithTelnyxLogger(log), carrier.WithTelnyxPublicKey(telnyxPub))
		cfg.TelnyxKey = telnyxKey
	case carriertest.Plivo:
		h = carrier.NewPlivo(tr, carrier.WithPlivoLogger(log), carrier.WithPlivoAuthToken(plivoToken))
		cfg.AuthToken = plivoToken
	default:
		t.Fatalf("no carrier %q", c)
	}
	if !h.Verifies() {
		t.Fatalf("%s: the handler does not verify with its secret set", c)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		host.Close()
		srv.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return &rig{url: srv.URL, host: host, log: logs, tr: tr}, cfg
}

// sayingAgent says text in espeak-ng's voice at 8 kHz when the call comes
// up, as a real greeting sounds on a phone line.
func sayingAgent(rec *recorder, text string) runtime.AgentFunc {
	return func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := espeak.New(espeak.WithSampleRate(8000))
		if err != nil {
			return nil, nil, err
		}
		model := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
			return scripted.Response{TTFB: 20 * time.Millisecond, Text: text}
		})
		return &runtime.Agent{Name: "phone", Model: model, TTS: voice, STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				rec.attach(s)
				return s.GenerateReply(ctx, "")
			}}, nil, nil
	}
}

func needEspeak(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng is missing (make test installs it)")
	}
}

// A call through the carrier's webhook to its stream, on a line that
// echoes the agent back (120 ms, -6 dB): the greeting is heard whole, its
// own echo does not cut it, its marks come back played, and every frame
// Holdline sent is one the carrier takes.
func TestCarrierGreetingOverAnEchoingLine(t *testing.T) {
	needEspeak(t)
	for _, c := range carriers {
		t.Run(string(c), func(t *testing.T) {
			rec := &recorder{}
			r, cfg := newCarrierRig(t, sayingAgent(rec, "Thanks for calling Holdline Bistro. How can I help you today?"), c)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cfg.EchoDelay, cfg.EchoGainDB = 120*time.Millisecond, -6
			p := dialScripted(t, ctx, r, cfg)
			waitFor(t, ctx, "the greeting to play out", func() bool { _, ok := rec.first(events.PlayoutDone); return ok })
			done, _ := rec.first(events.PlayoutDone)
			first := p.FirstSound()
			if first.IsZero() {
				t.Fatal("the phone heard nothing")
			}
			if gap := p.LongestQuiet(first, time.Now()); gap > 900*time.Millisecond {
				t.Errorf("the greeting went quiet for %v in the middle: cut by its own echo?", gap)
			}
			if n := len(p.Clears()); n > 0 {
				t.Errorf("the greeting was cleared %d times with only its echo on the line", n)
			}
			if n := rec.count(events.PlayoutTruncate); n > 0 {
				t.Errorf("the greeting was truncated %d times", n)
			}
			played := 0
			for _, m := range p.Marks() {
				if m.Played {
					played++
				}
			}
			if played < 3 {
				t.Errorf("%d marks came back played; want one every 200 ms of a %v greeting", played, done.Played)
			}
			if done.Played < 2*time.Second || p.Received() < done.Played {
				t.Errorf("the greeting played %v, the phone received %v", done.Played, p.Received())
			}
			if bad := p.Refused(); len(bad) > 0 {
				t.Errorf("frames %s would refuse: %q", c, bad)
			}
		})
	}
}

// A caller asks for a table through the carrier's stream: the agent's
// booking tool runs once, and its answer is heard.
func TestCarrierCallBooksOnce(t *testing.T) {
	needEspeak(t)
	ask := callerVoice(t, "Book a table for two at seven.")
	for _, c := range carriers {
		t.Run(string(c), func(t *testing.T) {
			var booked atomic.Int32
			book := tools.MustNew("book_table", "Book a table.",
				func(ctx context.Context, a struct {
					Party int    `json:"party"`
					Time  string `json:"time"`
				}) (string, error) {
					booked.Add(1)
					return fmt.Sprintf("booked for %d at %s", a.Party, a.Time), nil
				})
			rec := &recorder{}
			ears := scripted.NewSTT()
			newAgent := func(context.Context) (*runtime.Agent, func(), error) {
				model := scripted.NewLLM(
					scripted.Response{Text: "Holdline Bistro."},
					scripted.Response{Text: "Booking.", ToolCalls: []scripted.Call{{Name: "book_table", Args: map[string]any{"party": 2, "time": "19:00"}}}},
					scripted.Response{Text: "You are booked."},
				)
				voice, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithRealtimeFactor(4))
				if err != nil {
					return nil, nil, err
				}
				return &runtime.Agent{Name: "desk", Model: model, TTS: voice, STT: ears, Tools: []*tools.Tool{book},
					OnEnter: func(ctx context.Context, s *runtime.Session) error {
						rec.attach(s)
						return s.GenerateReply(ctx, "")
					}}, nil, nil
			}
			r, cfg := newCarrierRig(t, newAgent, c)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			p := dialScripted(t, ctx, r, cfg)
			waitFor(t, ctx, "the greeting to play out", func() bool { return rec.count(events.PlayoutDone) >= 1 })
			ears.Say("Book a table for two at seven.")
			p.Say(ask)
			waitFor(t, ctx, "the booking's answer to play out", func() bool { return rec.count(events.PlayoutDone) >= 3 })
			if n := booked.Load(); n != 1 {
				t.Errorf("book_table ran %d times; want once", n)
			}
			rec.mu.Lock()
			s := rec.sess[0]
			rec.mu.Unlock()
			cc, err := s.ChatContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var last string
			for _, it := range cc.Items {
				if it.Role == llm.RoleAssistant && it.Kind == llm.KindMessage {
					last = it.Text
				}
			}
			if last != "You are booked." {
				t.Errorf("the agent's last words %q", last)
			}
			if bad := p.Refused(); len(bad) > 0 {
				t.Errorf("frames %s would refuse: %q", c, bad)
			}
		})
	}
}

// A caller who talks over the agent's long answer on an echoing line gets
// the carrier's buffer cleared, and the context holds what the carrier
// marked played (Telnyx returns the voided marks; Plivo drops its
// checkpoints and says clearedAudio).
func TestBargeInThroughTelnyxAndPlivo(t *testing.T) {
	needEspeak(t)
	voice := callerVoice(t, "Wait, I want to change the time of my booking please.")
	for _, c := range carriers {
		t.Run(string(c), func(t *testing.T) {
			res := runBargeInOn(t, c, voice, 2*time.Second)
			t.Logf("onset→clear %v, context played %v, marked played %v: %q", res.toClear, res.truncated, res.marked, res.text)
			if !res.ok {
				t.Error(res.why)
			}
			if res.toClear < 0 {
				t.Error("no clear reached the phone")
			}
		})
	}
}

// Webhooks that are not the carrier's are refused with 403 and the reason,
// start no call, and leave no secret in the log.
func TestCarrierWebhookSignatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    carriertest.Carrier
		edit func(*carriertest.Config)
		want string
	}{
		{"telnyx wrong", carriertest.Telnyx, func(c *carriertest.Config) { c.BadSignature = true }, "telnyx-signature-ed25519 does not match"},
		{"telnyx another key", carriertest.Telnyx, func(c *carriertest.Config) {
			_, other, _ := ed25519.GenerateKey(nil)
			c.TelnyxKey = other
		}, "telnyx-signature-ed25519 does not match"},
		{"telnyx missing", carriertest.Telnyx, func(c *carriertest.Config) { c.TelnyxKey = nil }, "no telnyx-signature-ed25519"},
		{"telnyx stale", carriertest.Telnyx, func(c *carriertest.Config) { c.SignedAt = time.Now().Add(-6 * time.Minute) }, "a replayed request"},
		{"telnyx from the future", carriertest.Telnyx, func(c *carriertest.Config) { c.SignedAt = time.Now().Add(10 * time.Minute) }, "a replayed request"},
		{"plivo wrong", carriertest.Plivo, func(c *carriertest.Config) { c.BadSignature = true }, "X-Plivo-Signature-V3 does not match"},
		{"plivo missing", carriertest.Plivo, func(c *carriertest.Config) { c.AuthToken = "" }, "no X-Plivo-Signature-V3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, cfg := newCarrierRig(t, toneAgent(&recorder{}, "Hello.", scripted.NewSTT()), tc.c)
			cfg.BaseURL = r.url
			// The right signature is taken, first.
			res, body, err := carriertest.Webhook(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusOK {
				t.Fatalf("a signed webhook: %d %q", res.StatusCode, body)
			}
			tc.edit(&cfg)
			res, body, err = carriertest.Webhook(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != http.StatusForbidden || !strings.Contains(body, tc.want) {
				t.Errorf("%d %q; want 403 saying %q", res.StatusCode, body, tc.want)
			}
			r.log.waitLog(t, string(tc.c)+" webhook refused")
			if strings.Contains(r.log.String(), plivoToken) {
				t.Error("the auth token is in the log")
			}
			if r.host.Len() != 0 {
				t.Errorf("%d calls after webhooks alone", r.host.Len())
			}
		})
	}
}

// Plivo's documented construction, computed independently (Python's hmac
// over the string Plivo's signature page assembles): a POST's URL with its
// query sorted, ".", its parameters' names and values sorted by name, then
// "." and the nonce.
func TestPlivoSignatureV3MatchesTheDocumentedScheme(t *testing.T) {
	params := url.Values{"CallUUID": {"97ceeb52-58b6-11e1-86da-77300b68f8bb"}, "From": {"14155550100"}, "To": {"14155550199"},
		"CallStatus": {"ringing"}, "Direction": {"inbound"}}
	const tok, nonce = "MAXXXXXXXXXXXXXXXXXX-token", "05429567804466091622"
	if got := carrier.PlivoSignatureV3(tok, "POST", "https://example.com/answer?foo=bar&a=1", params, nonce); got != "mTY5Ij9p4kMi/VisKtFgz+m3rXrH31k40ko4sY0cxY4=" {
		t.Errorf("with a query: %s", got)
	}
	if got := carrier.PlivoSignatureV3(tok, "POST", "https://example.com/answer", params, nonce); got != "iftVHn3iBzK1MiVUAKSHLTU1601QdHLGUqJPqk1oKRo=" {
		t.Errorf("without a query: %s", got)
	}
}

// Plivo may send several signatures in one header: one matching is enough.
func TestPlivoTakesOneOfSeveralSignatures(t *testing.T) {
	r, _ := newCarrierRig(t, toneAgent(&recorder{}, "Hello.", scripted.NewSTT()), carriertest.Plivo)
	form := url.Values{"CallUUID": {"c1"}, "From": {"14155550100"}, "To": {"14155550199"}, "CallStatus": {"ringing"}}
	u := r.url + carrier.PlivoVoicePath
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"bogus, " + carrier.PlivoSignatureV3(plivoToken, "POST", u, form, "123"), http.StatusOK},
		{"bogus,also-bogus", http.StatusForbidden},
	} {
		req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Plivo-Signature-V3", tc.header)
		req.Header.Set("X-Plivo-Signature-V3-Nonce", "123")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("X-Plivo-Signature-V3 %q: %d, want %d", tc.header, res.StatusCode, tc.want)
		}
	}
}

// Plivo calls the answer URL again at hang-up when the application has no
// hangup URL: that gets an empty 200, and no call starts.
func TestPlivoHangupCallbackStartsNothing(t *testing.T) {
	r, cfg := newCarrierRig(t, toneAgent(&recorder{}, "Hello.", scripted.NewSTT()), carriertest.Plivo)
	cfg.BaseURL, cfg.CallStatus = r.url, "completed"
	res, body, err := carriertest.Webhook(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || body != "" {
		t.Errorf("the hang-up callback got %d %q; want an empty 200", res.StatusCode, body)
	}
	if r.host.Len() != 0 || strings.Contains(r.log.String(), "call answered") {
		t.Errorf("the hang-up callback was answered as a call (%d calls):\n%s", r.host.Len(), r.log.String())
	}
	// A forged hang-up is refused like any forged request.
	cfg.BadSignature = true
	if res, _, _ := carriertest.Webhook(t.Context(), cfg); res == nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("a forged hang-up callback was not refused")
	}
}

// Bad streams: forged, reused and foreign tokens are refused with the
// reason; malformed frames are logged and skipped; a second start closes
// the stream with 1008 and why; the server goes on, and hang-ups end calls.
func TestCarrierBadStreams(t *testing.T) {
	for _, c := range carriers {
		t.Run(string(c), func(t *testing.T) {
			r, base := newCarrierRig(t, toneAgent(&recorder{}, "Hello there.", scripted.NewSTT()), c)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			base.BaseURL = r.url
			// mint returns the stream's URL and a fresh token's
			// parameters for call.
			mint := func(call string) (string, map[string]string) {
				cfg := base
				cfg.CallSid = call
				res, body, err := carriertest.Webhook(ctx, cfg)
				if err != nil || res.StatusCode != 200 {
					t.Fatalf("webhook: %v %q", err, body)
				}
				u, params, err := carriertest.ParseAnswer(c, body)
				if err != nil {
					t.Fatal(err)
				}
				return u, params
			}
			streamURL, _ := mint("warmup1")
			open := func() *carriertest.Phone {
				p, err := carriertest.Open(ctx, streamURL, base)
				if err != nil {
					t.Fatal(err)
				}
				go func() { <-ctx.Done(); p.Conn().CloseNow() }()
				return p
			}
			refusals := func() int { return strings.Count(r.log.String(), "stream refused") }
			refused := func(t *testing.T, n int, want string) {
				t.Helper()
				waitFor(t, ctx, "a refusal saying "+want, func() bool { return refusals() > n })
				if !strings.Contains(r.log.String(), want) {
					t.Errorf("refused without saying %q", want)
				}
			}

			t.Run("forged token", func(t *testing.T) {
				n := refusals()
				_ = open().Start(ctx, "call9", map[string]string{"token": "forged"})
				refused(t, n, "stream token unknown, used or expired")
			})
			t.Run("no token", func(t *testing.T) {
				n := refusals()
				_ = open().Start(ctx, "call9", map[string]string{"from": "1"})
				refused(t, n, "no stream token")
			})
			t.Run("token of another call", func(t *testing.T) {
				_, params := mint("call10")
				n := refusals()
				_ = open().Start(ctx, "call11", params)
				refused(t, n, "minted for call call10, used by call11")
			})
			t.Run("reused token", func(t *testing.T) {
				_, params := mint("call12")
				p := open()
				if err := p.Start(ctx, "call12", params); err != nil {
					t.Fatal(err)
				}
				waitFor(t, ctx, "the call", func() bool { return r.host.Len() == 1 })
				n := refusals()
				_ = open().Start(ctx, "call12", params)
				refused(t, n, "stream token unknown, used or expired")
				p.Run(ctx)
				if err := p.Hangup(ctx); err != nil {
					t.Fatal(err)
				}
				waitFor(t, ctx, "the call to end", func() bool { return r.host.Len() == 0 })
			})
			t.Run("garbage on a live stream", func(t *testing.T) {
				_, params := mint("call13")
				p := open()
				if err := p.Start(ctx, "call13", params); err != nil {
					t.Fatal(err)
				}
				p.Run(ctx)
				mark := `{"event":"mark","mark":{"name":"never-sent"}}`
				if c == carriertest.Plivo {
					mark = `{"event":"playedStream","name":"never-sent"}`
				}
				for _, raw := range []string{`{not json`, `{"event":"bogus"}`, `{"event":"media","media":{"payload":"!!!not base64"}}`, mark} {
					if err := p.SendRaw(ctx, []byte(raw)); err != nil {
						t.Fatal(err)
					}
				}
				for _, want := range []string{"bad JSON", "an unknown event", "not base64", "a mark that was not sent"} {
					r.log.waitLog(t, want)
				}
				if err := p.Start(ctx, "call13", params); err != nil {
					t.Fatal(err)
				}
				code, reason, err := p.WaitClosed(ctx)
				if err != nil || code != websocket.StatusPolicyViolation || reason != "a second start on the stream" {
					t.Errorf("a second start closed the stream with %v %q (%v); want 1008 saying why", code, reason, err)
				}
			})
			// The server is still up: a good call works, and the caller
			// hanging up (Telnyx's stop, Plivo's close) ends it.
			waitFor(t, ctx, "the bad calls to end", func() bool { return r.host.Len() == 0 })
			p := dialScripted(t, ctx, r, base)
			waitFor(t, ctx, "audio on a good call after the bad ones", func() bool { return p.Received() > 0 })
			if err := p.Hangup(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, "the good call to end", func() bool { return r.host.Len() == 0 })
			r.log.waitLog(t, `reason="the caller hung up"`)
			if strings.Contains(r.log.String(), "the stream dropped") {
				t.Error("a hang-up was taken for a dropped stream")
			}
		})
	}
}

// A draining worker refuses a carrier's voice webhook with 503 and
// Retry-After, so that the load balancer in front (or the carrier's
// fallback URL) sends the call to another worker; no call starts here.
func TestDrainingWorkerRefusesTheCarriersWebhook(t *testing.T) {
	for _, c := range []carriertest.Carrier{carriertest.Twilio, carriertest.Telnyx, carriertest.Plivo} {
		t.Run(string(c), func(t *testing.T) {
			rec := &recorder{}
			r, cfg := newCarrierRig(t, sayingAgent(rec, "Hello."), c)
			r.host.BeginDrain()
			cfg.BaseURL = r.url
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p, err := carriertest.Dial(ctx, cfg)
			if err == nil {
				p.Conn().CloseNow()
				t.Fatal("a draining worker took the call")
			}
			if !strings.Contains(err.Error(), "503") {
				t.Errorf("the webhook's refusal: %v; want 503", err)
			}
			if n := r.host.Len(); n != 0 {
				t.Errorf("%d calls on the draining worker", n)
			}
		})
	}
}
