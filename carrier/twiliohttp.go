package carrier

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/runtime/engine"
)

// Twilio's routes, as `holdline serve` mounts them.
const (
	TwilioVoicePath  = "/v1/twilio/voice"
	TwilioStreamPath = "/v1/twilio/stream"
)

// DefaultTwilioAPI is Twilio's REST API, where a transfer updates the call.
const DefaultTwilioAPI = "https://api.twilio.com"

// TwilioOption configures NewTwilio.
type TwilioOption func(*twilioConfig)

type twilioConfig struct {
	publicURL  *url.URL
	authToken  string
	accountSID string
	api        string
	client     *http.Client
	log        *slog.Logger
}

// WithPublicURL sets the URL Twilio reaches this server at
// (https://HOST): what webhook signatures are computed over and where the
// stream URL points. Without it, X-Forwarded-Proto and X-Forwarded-Host,
// else the request itself, say.
func WithPublicURL(u *url.URL) TwilioOption { return func(c *twilioConfig) { c.publicURL = u } }

// WithTwilioAccount sets the account's SID and auth token: with the token,
// every webhook's X-Twilio-Signature is verified; with both, a transfer
// updates the call through Twilio's REST API. The token is a secret: it
// is never logged.
func WithTwilioAccount(accountSID, authToken string) TwilioOption {
	return func(c *twilioConfig) { c.accountSID, c.authToken = accountSID, authToken }
}

// WithTwilioAPI sets the REST API's base URL (default DefaultTwilioAPI),
// for tests, and the client it is called with.
func WithTwilioAPI(base string, client *http.Client) TwilioOption {
	return func(c *twilioConfig) { c.api, c.client = strings.TrimRight(base, "/"), client }
}

// WithTwilioLogger sets the logger (default slog.Default()).
func WithTwilioLogger(l *slog.Logger) TwilioOption { return func(c *twilioConfig) { c.log = l } }

// TwilioHandler answers Twilio's voice webhook with TwiML that connects
// the call to a bidirectional media stream, and serves that stream on t.
type TwilioHandler struct {
	cfg twilioConfig
	t   *Transport
	mux *http.ServeMux
	wh  *webhook
}

// NewTwilio returns the handler of Twilio's routes (TwilioVoicePath,
// TwilioStreamPath) whose calls run on t.
func NewTwilio(t *Transport, opts ...TwilioOption) *TwilioHandler {
	cfg := twilioConfig{api: DefaultTwilioAPI, client: &http.Client{Timeout: 15 * time.Second}, log: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	h := &TwilioHandler{cfg: cfg, t: t, mux: http.NewServeMux(), wh: newWebhook(Twilio.Name(), cfg.publicURL, cfg.log, calls.NewToken)}
	t.host.AddTransport(Twilio.Name())
	h.mux.HandleFunc("POST "+TwilioVoicePath, h.voice)
	h.mux.HandleFunc("GET "+TwilioStreamPath, h.stream)
	return h
}

// Verifies says whether webhooks are verified (an auth token is set).
func (h *TwilioHandler) Verifies() bool { return h.cfg.authToken != "" }

// ServeHTTP serves Twilio's routes.
func (h *TwilioHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// TwilioSignature is X-Twilio-Signature for a POST to fullURL with form
// params, as Twilio documents it: HMAC-SHA1, keyed with the auth token,
// of the URL followed by each parameter's name and value, sorted by name,
// base64-encoded.
func TwilioSignature(authToken, fullURL string, params url.Values) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	m := hmac.New(sha1.New, []byte(authToken))
	io.WriteString(m, fullURL)
	for _, k := range keys {
		vs := slices.Clone(params[k])
		slices.Sort(vs)
		for _, v := range vs {
			io.WriteString(m, k)
			io.WriteString(m, v)
		}
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// twiml is the webhook's answer: connect the call to the stream.
type twiml struct {
	XMLName xml.Name `xml:"Response"`
	Connect struct {
		Stream struct {
			URL    string `xml:"url,attr"`
			Params []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"Parameter"`
		} `xml:"Stream"`
	} `xml:"Connect"`
}

// voice answers the voice webhook.
func (h *TwilioHandler) voice(w http.ResponseWriter, r *http.Request) {
	if h.wh.draining(w, h.t) {
		return
	}
	_, form, ok := h.wh.readForm(w, r)
	if !ok {
		return
	}
	if h.cfg.authToken != "" {
		full := h.wh.fullURL(r)
		got := r.Header.Get("X-Twilio-Signature")
		want := TwilioSignature(h.cfg.authToken, full, form)
		switch {
		case got == "":
			h.wh.refuse(w, http.StatusForbidden, "no X-Twilio-Signature: not a request from Twilio")
			return
		case !hmac.Equal([]byte(got), []byte(want)):
			h.wh.refuse(w, http.StatusForbidden, "X-Twilio-Signature does not match "+full+
				" (is the webhook URL in Twilio's console this one? set --public-url to the URL Twilio calls; is TWILIO_AUTH_TOKEN this account's?)")
			return
		}
	}
	callSID := form.Get("CallSid")
	if callSID == "" {
		h.wh.refuse(w, http.StatusBadRequest, "no CallSid in the webhook")
		return
	}
	tok := h.wh.mint(streamGrant{callID: callSID, accountID: form.Get("AccountSid"), from: form.Get("From"), to: form.Get("To")})

	var doc twiml
	doc.Connect.Stream.URL = h.wh.streamURL(r, TwilioStreamPath)
	for _, p := range [][2]string{{ParamFrom, form.Get("From")}, {ParamTo, form.Get("To")}, {"callSid", callSID}, {ParamToken, tok}} {
		doc.Connect.Stream.Params = append(doc.Connect.Stream.Params, struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		}{p[0], p[1]})
	}
	out, err := xml.Marshal(doc)
	if err != nil {
		h.wh.refuse(w, http.StatusInternalServerError, err.Error())
		return
	}
	h.cfg.log.Info("twilio call answered: connecting its stream", "call", callSID)
	reply(w, "text/xml", append([]byte(xml.Header), out...))
}

// stream serves the media stream the webhook's TwiML pointed to.
func (h *TwilioHandler) stream(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		h.cfg.log.Warn("twilio stream: not a WebSocket", "err", err)
		return
	}
	_ = h.t.Serve(r.Context(), conn, Stream{Codec: Twilio, Admit: h.admit})
}

// admit takes the stream token the webhook minted (webhook.redeem), and
// gives the line Twilio's transfer when the account is known.
func (h *TwilioHandler) admit(_ context.Context, start Event) (Admission, error) {
	g, err := h.wh.redeem(start)
	if err != nil {
		return Admission{}, err
	}
	adm := Admission{Facts: map[string]string{"from": g.from, "to": g.to}}
	account := h.cfg.accountSID
	if account == "" {
		account = g.accountID
	}
	if account != "" && h.cfg.authToken != "" {
		adm.Transfer = func(ctx context.Context, req engine.TransferRequest) error {
			return h.transfer(ctx, account, g.callID, req)
		}
	}
	return adm, nil
}

// ErrTransferFailed wraps a transfer Twilio refused; the call goes on.
var ErrTransferFailed = errors.New("carrier: transfer failed")

// transfer redirects the call to a <Dial> of the target through the REST
// API: Twilio leaves the stream (it sends stop) and dials. A sip: target
// carries the handoff token as a header, for a Holdline worker there.
func (h *TwilioHandler) transfer(ctx context.Context, account, callSID string, req engine.TransferRequest) error {
	var dial strings.Builder
	dial.WriteString("<Response><Dial>")
	target := req.Target
	if strings.HasPrefix(target, "sip:") || strings.HasPrefix(target, "sips:") {
		if req.Token != "" {
			sep := "?"
			if strings.Contains(target, "?") {
				sep = "&"
			}
			target += sep + "X-Holdline-Handoff=" + url.QueryEscape(req.Token)
		}
		dial.WriteString("<Sip>")
		xml.EscapeText(&dial, []byte(target))
		dial.WriteString("</Sip>")
	} else {
		dial.WriteString("<Number>")
		xml.EscapeText(&dial, []byte(strings.TrimPrefix(target, "tel:")))
		dial.WriteString("</Number>")
	}
	dial.WriteString("</Dial></Response>")
	u := h.cfg.api + "/2010-04-01/Accounts/" + url.PathEscape(account) + "/Calls/" + url.PathEscape(callSID) + ".json"
	body := url.Values{"Twiml": {dial.String()}}.Encode()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTransferFailed, err)
	}
	hr.SetBasicAuth(account, h.cfg.authToken)
	hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := h.cfg.client.Do(hr)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTransferFailed, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("%w: Twilio answered %s: %s", ErrTransferFailed, res.Status, e.Message)
	}
	return nil
}
