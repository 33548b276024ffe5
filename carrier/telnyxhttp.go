package carrier

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/holdline/holdline/calls"
)

// Telnyx's routes, as `holdline serve` mounts them.
const (
	TelnyxVoicePath  = "/v1/telnyx/voice"
	TelnyxStreamPath = "/v1/telnyx/stream"
)

// TelnyxSignatureTolerance is how old (or how far ahead) a webhook's
// telnyx-timestamp may be: a signed request replayed later is refused.
const TelnyxSignatureTolerance = 5 * time.Minute

// TelnyxOption configures NewTelnyx.
type TelnyxOption func(*telnyxConfig)

type telnyxConfig struct {
	publicURL *url.URL
	publicKey ed25519.PublicKey
	log       *slog.Logger
	now       func() time.Time
}

// WithTelnyxPublicURL sets the URL Telnyx reaches this server at
// (https://HOST), where the stream URL points. Without it,
// X-Forwarded-Proto and X-Forwarded-Host, else the request itself, say.
func WithTelnyxPublicURL(u *url.URL) TelnyxOption { return func(c *telnyxConfig) { c.publicURL = u } }

// WithTelnyxPublicKey sets the account's public key (ParseTelnyxPublicKey
// reads it as the portal shows it): every webhook's
// telnyx-signature-ed25519 is then verified, and its telnyx-timestamp must
// be within TelnyxSignatureTolerance.
func WithTelnyxPublicKey(k ed25519.PublicKey) TelnyxOption {
	return func(c *telnyxConfig) { c.publicKey = k }
}

// WithTelnyxLogger sets the logger (default slog.Default()).
func WithTelnyxLogger(l *slog.Logger) TelnyxOption { return func(c *telnyxConfig) { c.log = l } }

// ParseTelnyxPublicKey reads an account's public key as Telnyx's portal
// shows it: 32 bytes, base64.
func ParseTelnyxPublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("carrier: telnyx public key is not base64: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("carrier: telnyx public key is %d bytes, want an Ed25519 key's %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// TelnyxSignedPayload is what Telnyx signs for a webhook: the
// telnyx-timestamp header, "|", and the raw body.
func TelnyxSignedPayload(timestamp string, body []byte) []byte {
	return append([]byte(timestamp+"|"), body...)
}

// TelnyxHandler answers a TeXML application's voice webhook with TeXML
// that connects the call to a bidirectional RTP media stream
// (TelnyxTeXML), and serves that stream on t.
type TelnyxHandler struct {
	cfg telnyxConfig
	t   *Transport
	mux *http.ServeMux
	wh  *webhook
}

// NewTelnyx returns the handler of Telnyx's routes (TelnyxVoicePath,
// TelnyxStreamPath) whose calls run on t.
//
// A stream token is good once: Telnyx's stream is not reconnected to the
// same call (a dropped stream is a lost call, as for every carrier), so a
// second start with the token is refused as a replay.
func NewTelnyx(t *Transport, opts ...TelnyxOption) *TelnyxHandler {
	cfg := telnyxConfig{log: slog.Default(), now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	h := &TelnyxHandler{cfg: cfg, t: t, mux: http.NewServeMux(), wh: newWebhook(Telnyx.Name(), cfg.publicURL, cfg.log, calls.NewToken)}
	t.host.AddTransport(Telnyx.Name())
	h.mux.HandleFunc("POST "+TelnyxVoicePath, h.voice)
	h.mux.HandleFunc("GET "+TelnyxStreamPath, h.stream)
	return h
}

// Verifies says whether webhooks are verified (a public key is set).
func (h *TelnyxHandler) Verifies() bool { return h.cfg.publicKey != nil }

// ServeHTTP serves Telnyx's routes.
func (h *TelnyxHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// verify checks the webhook's signature and its age, and says why not.
func (h *TelnyxHandler) verify(r *http.Request, body []byte) string {
	sig64 := r.Header.Get("telnyx-signature-ed25519")
	ts := r.Header.Get("telnyx-timestamp")
	if sig64 == "" || ts == "" {
		return "no telnyx-signature-ed25519 or telnyx-timestamp: not a request from Telnyx"
	}
	sig, err := base64.StdEncoding.DecodeString(sig64)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "telnyx-signature-ed25519 is not a base64 Ed25519 signature"
	}
	if !ed25519.Verify(h.cfg.publicKey, TelnyxSignedPayload(ts, body), sig) {
		return "telnyx-signature-ed25519 does not match the body and telnyx-timestamp (is TELNYX_PUBLIC_KEY this account's, as the portal shows it?)"
	}
	// The signature covers the timestamp: a signed request is good only
	// near the time it was signed, so that it cannot be replayed later.
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "telnyx-timestamp " + strconv.Quote(ts) + " is not Unix seconds"
	}
	if age := h.cfg.now().Sub(time.Unix(sec, 0)); age > TelnyxSignatureTolerance || age < -TelnyxSignatureTolerance {
		return fmt.Sprintf("telnyx-timestamp is %v off this server's clock, more than %v: a replayed request (or a clock far off)",
			age.Round(time.Second), TelnyxSignatureTolerance)
	}
	return ""
}

// voice answers the voice webhook: Telnyx posts the call as a form (From,
// To, CallSid), as Twilio does.
func (h *TelnyxHandler) voice(w http.ResponseWriter, r *http.Request) {
	if h.wh.draining(w, h.t) {
		return
	}
	body, form, ok := h.wh.readForm(w, r)
	if !ok {
		return
	}
	if h.cfg.publicKey != nil {
		if why := h.verify(r, body); why != "" {
			h.wh.refuse(w, http.StatusForbidden, why)
			return
		}
	}
	callSid := form.Get("CallSid")
	if callSid == "" {
		h.wh.refuse(w, http.StatusBadRequest, "no CallSid in the webhook (is the number's application a TeXML application?)")
		return
	}
	from, to := form.Get("From"), form.Get("To")
	// The stream's start names its call by call_control_id, which is the
	// TeXML webhook's CallSid: the token is for that call.
	tok := h.wh.mint(streamGrant{callID: callSid, accountID: form.Get("AccountSid"), from: from, to: to})
	doc := TelnyxTeXML(h.wh.streamURL(r, TelnyxStreamPath), map[string]string{ParamFrom: from, ParamTo: to, ParamToken: tok})
	h.cfg.log.Info("telnyx call answered: connecting its stream", "call", callSid)
	reply(w, "text/xml", doc)
}

// stream serves the media stream the webhook's TeXML pointed to.
func (h *TelnyxHandler) stream(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		h.cfg.log.Warn("telnyx stream: not a WebSocket", "err", err)
		return
	}
	_ = h.t.Serve(r.Context(), conn, Stream{Codec: Telnyx, Admit: h.wh.admit})
}
