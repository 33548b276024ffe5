package carrier

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/coder/websocket"
)

// Plivo's routes, as `holdline serve` mounts them.
const (
	PlivoVoicePath  = "/v1/plivo/voice"
	PlivoStreamPath = "/v1/plivo/stream"
)

// PlivoOption configures NewPlivo.
type PlivoOption func(*plivoConfig)

type plivoConfig struct {
	publicURL *url.URL
	authToken string
	log       *slog.Logger
}

// WithPlivoPublicURL sets the URL Plivo reaches this server at
// (https://HOST): what signatures are computed over and where the stream
// URL points. Without it, X-Forwarded-Proto and X-Forwarded-Host, else
// the request itself, say.
func WithPlivoPublicURL(u *url.URL) PlivoOption { return func(c *plivoConfig) { c.publicURL = u } }

// WithPlivoAuthToken sets the account's auth token: every answer request's
// X-Plivo-Signature-V3 is then verified. The token is a secret: it is
// never logged.
func WithPlivoAuthToken(token string) PlivoOption {
	return func(c *plivoConfig) { c.authToken = token }
}

// WithPlivoLogger sets the logger (default slog.Default()).
func WithPlivoLogger(l *slog.Logger) PlivoOption { return func(c *plivoConfig) { c.log = l } }

// PlivoSignatureV3 is X-Plivo-Signature-V3 for a request to fullURL with
// form params and the nonce of X-Plivo-Signature-V3-Nonce, as Plivo
// documents it: HMAC-SHA256, keyed with the auth token, of the request
// string and then "." and the nonce, base64-encoded.
//
// The request string is the URL without its query, then, for a GET, "?"
// and every parameter (the query's and Plivo's) as name=value, sorted and
// joined with "&"; for a POST with parameters, "?", the query's parameters
// so (and "." after them, if there are any), then each POST parameter's
// name and value run together, sorted by name. A POST without parameters
// is the URL with its sorted query.
func PlivoSignatureV3(authToken, method, fullURL string, params url.Values, nonce string) string {
	u, err := url.Parse(fullURL)
	if err != nil {
		u = &url.URL{Opaque: fullURL}
	}
	base := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, Opaque: u.Opaque}).String()
	query := u.Query()
	var s strings.Builder
	s.WriteString(base)
	if strings.EqualFold(method, http.MethodGet) {
		for k, vs := range params {
			query[k] = append(query[k], vs...)
		}
		if q := sortedQuery(query); q != "" {
			s.WriteString("?" + q)
		}
	} else {
		q := sortedQuery(query)
		if len(params) > 0 {
			s.WriteString("?" + q)
			if q != "" {
				s.WriteString(".")
			}
			for _, k := range slices.Sorted(maps.Keys(params)) {
				vs := slices.Clone(params[k])
				slices.Sort(vs)
				for _, v := range vs {
					s.WriteString(k + v)
				}
			}
		} else if q != "" {
			s.WriteString("?" + q)
		}
	}
	m := hmac.New(sha256.New, []byte(authToken))
	io.WriteString(m, s.String()+"."+nonce)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// sortedQuery is name=value pairs sorted by name (values by value),
// joined with "&", unescaped, as Plivo signs them.
func sortedQuery(q url.Values) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		vs := slices.Clone(q[k])
		slices.Sort(vs)
		for _, v := range vs {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, "&")
}

// PlivoHandler answers a Plivo XML application's answer URL with XML that
// connects the call to a bidirectional stream (PlivoXML), and serves that
// stream on t.
type PlivoHandler struct {
	cfg plivoConfig
	t   *Transport
	mux *http.ServeMux
	wh  *webhook
}

// NewPlivo returns the handler of Plivo's routes (PlivoVoicePath,
// PlivoStreamPath) whose calls run on t. Its stream tokens are hex, as
// Plivo's extraHeaders take only letters and digits, and good once.
func NewPlivo(t *Transport, opts ...PlivoOption) *PlivoHandler {
	cfg := plivoConfig{log: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	h := &PlivoHandler{cfg: cfg, t: t, mux: http.NewServeMux(), wh: newWebhook(Plivo.Name(), cfg.publicURL, cfg.log, hexToken)}
	t.host.AddTransport(Plivo.Name())
	h.mux.HandleFunc("POST "+PlivoVoicePath, h.voice)
	h.mux.HandleFunc("GET "+PlivoStreamPath, h.stream)
	return h
}

// Verifies says whether answer requests are verified (an auth token is
// set).
func (h *PlivoHandler) Verifies() bool { return h.cfg.authToken != "" }

// ServeHTTP serves Plivo's routes.
func (h *PlivoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// verify checks X-Plivo-Signature-V3, which may hold several signatures,
// comma-separated (one matching is enough), and says why not.
func (h *PlivoHandler) verify(r *http.Request, form url.Values) string {
	got := r.Header.Get("X-Plivo-Signature-V3")
	nonce := r.Header.Get("X-Plivo-Signature-V3-Nonce")
	if got == "" || nonce == "" {
		return "no X-Plivo-Signature-V3 or X-Plivo-Signature-V3-Nonce: not a request from Plivo"
	}
	full := h.wh.fullURL(r)
	want := PlivoSignatureV3(h.cfg.authToken, r.Method, full, form, nonce)
	for _, sig := range strings.Split(got, ",") {
		if hmac.Equal([]byte(strings.TrimSpace(sig)), []byte(want)) {
			return ""
		}
	}
	return "X-Plivo-Signature-V3 does not match " + full +
		" (is the answer URL in Plivo's console this one? set --public-url to the URL Plivo calls; is PLIVO_AUTH_TOKEN this account's?)"
}

// voice answers the answer URL.
func (h *PlivoHandler) voice(w http.ResponseWriter, r *http.Request) {
	if h.wh.draining(w, h.t) {
		return
	}
	_, form, ok := h.wh.readForm(w, r)
	if !ok {
		return
	}
	if h.cfg.authToken != "" {
		if why := h.verify(r, form); why != "" {
			h.wh.refuse(w, http.StatusForbidden, why)
			return
		}
	}
	callUUID := form.Get("CallUUID")
	if form.Get("CallStatus") == "completed" {
		// Plivo calls the answer URL again at hang-up when the
		// application has no hangup URL: the call is over, there is
		// nothing to answer, and nothing starts.
		h.cfg.log.Info("plivo hang-up callback: nothing to do", "call", callUUID)
		w.WriteHeader(http.StatusOK)
		return
	}
	if callUUID == "" {
		h.wh.refuse(w, http.StatusBadRequest, "no CallUUID in the answer request")
		return
	}
	from, to := alnumOnly(form.Get("From")), alnumOnly(form.Get("To"))
	tok := h.wh.mint(streamGrant{callID: callUUID, from: from, to: to})
	doc, err := PlivoXML(h.wh.streamURL(r, PlivoStreamPath), map[string]string{ParamFrom: from, ParamTo: to, ParamToken: tok})
	if err != nil {
		h.wh.refuse(w, http.StatusInternalServerError, err.Error())
		return
	}
	h.cfg.log.Info("plivo call answered: connecting its stream", "call", callUUID)
	reply(w, "application/xml", doc)
}

// alnumOnly keeps s's ASCII letters and digits: what Plivo's extraHeaders
// carry ("+14155550100" goes as "14155550100", as Plivo itself gives
// numbers).
func alnumOnly(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// stream serves the media stream the answer's <Stream> pointed to.
func (h *PlivoHandler) stream(w http.ResponseWriter, r *http.Request) {
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		h.cfg.log.Warn("plivo stream: not a WebSocket", "err", err)
		return
	}
	_ = h.t.Serve(r.Context(), conn, Stream{Codec: Plivo, Admit: h.wh.admit})
}
