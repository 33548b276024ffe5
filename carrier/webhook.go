package carrier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// streamTokenTTL is how long the webhook's stream token is good for:
// carriers open the stream as soon as they have the answer.
const streamTokenTTL = time.Minute

// maxWebhookBody bounds a webhook's body: a carrier's form is a few hundred
// bytes.
const maxWebhookBody = 64 << 10

// Why a stream token is refused.
var (
	ErrNoStreamToken  = errors.New("no stream token in start's parameters")
	ErrBadStreamToken = errors.New("stream token unknown, used or expired")
)

// webhook is what every carrier's handler does around its own answer and
// signature: where the carrier reached us, refusing a request with its
// reason logged, and the one-time stream tokens that tie a stream to the
// webhook that answered its call. A carrier's handler is its signature
// check, its form's names and its answer; the rest is here.
type webhook struct {
	carrier   string // for logs: "twilio"
	publicURL *url.URL
	log       *slog.Logger
	newToken  func() string

	mu     sync.Mutex
	tokens map[string]streamGrant
}

// streamGrant is what the webhook knew of the call it minted a stream
// token for.
type streamGrant struct {
	callID, accountID, from, to string
	expires                     time.Time
}

func newWebhook(carrier string, publicURL *url.URL, log *slog.Logger, newToken func() string) *webhook {
	if log == nil {
		log = slog.Default()
	}
	return &webhook{carrier: carrier, publicURL: publicURL, log: log, newToken: newToken, tokens: map[string]streamGrant{}}
}

// hexToken is a stream token of letters and digits only (32 hex digits,
// 128 bits), for carriers that carry nothing else (Plivo's extraHeaders).
func hexToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// base is the scheme and host the carrier reached: the public URL, else
// the proxy's forwarded headers, else the request.
func (w *webhook) base(r *http.Request) (scheme, host string) {
	if u := w.publicURL; u != nil {
		return u.Scheme, u.Host
	}
	scheme, host = "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p != "" {
		scheme = strings.ToLower(strings.TrimSpace(strings.Split(p, ",")[0]))
	}
	if fh := r.Header.Get("X-Forwarded-Host"); fh != "" {
		host = strings.TrimSpace(strings.Split(fh, ",")[0])
	}
	return scheme, host
}

// fullURL is the URL the carrier called, as it signed it.
func (w *webhook) fullURL(r *http.Request) string {
	scheme, host := w.base(r)
	return scheme + "://" + host + r.URL.RequestURI()
}

// streamURL is the WebSocket URL of path on the host the carrier reached:
// wss:// behind https.
func (w *webhook) streamURL(r *http.Request, path string) string {
	scheme, host := w.base(r)
	ws := "ws"
	if scheme == "https" || scheme == "wss" {
		ws = "wss"
	}
	return ws + "://" + host + path
}

// readForm reads a form-encoded webhook, bounded, and returns its raw body
// too (what a signature over the body is computed on). On an error the
// request has been refused.
func (w *webhook) readForm(rw http.ResponseWriter, r *http.Request) ([]byte, url.Values, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxWebhookBody))
	if err != nil {
		w.refuse(rw, http.StatusBadRequest, "the webhook's body cannot be read: "+err.Error())
		return nil, nil, false
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		w.refuse(rw, http.StatusBadRequest, "the webhook's form cannot be read: "+err.Error())
		return nil, nil, false
	}
	// r.PostForm too, for code that reads the request as net/http does.
	r.PostForm = form
	return body, form, true
}

// refuse answers a request that is not served, and logs why. The reason
// never holds a secret: it goes to the carrier and the log.
func (w *webhook) refuse(rw http.ResponseWriter, code int, reason string) {
	w.log.Warn(w.carrier+" webhook refused", "status", code, "reason", reason)
	http.Error(rw, reason, code)
}

// draining refuses a call on a draining worker with 503 and Retry-After,
// so that a load balancer in front sends the carrier's webhook to another
// worker (and a carrier without one tries its fallback URL); it reports
// whether it did.
func (w *webhook) draining(rw http.ResponseWriter, t *Transport) bool {
	if !t.host.Draining() {
		return false
	}
	rw.Header().Set("Retry-After", "2")
	w.refuse(rw, http.StatusServiceUnavailable, "this worker is draining: another takes the call")
	return true
}

// mint returns a new stream token for the call g names, good once for
// streamTokenTTL. Expired tokens go as new ones come.
func (w *webhook) mint(g streamGrant) string {
	tok := w.newToken()
	now := time.Now()
	g.expires = now.Add(streamTokenTTL)
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, old := range w.tokens {
		if now.After(old.expires) {
			delete(w.tokens, k)
		}
	}
	w.tokens[tok] = g
	return tok
}

// redeem takes the stream token in start's parameters: once only, for the
// call it was minted for (where the start names its call). A token is
// spent by its first stream, accepted or not: a carrier that reconnects a
// dropped stream gets no second one, and the call ends with the stream
// (Holdline's calls do not survive their stream; see Serve).
func (w *webhook) redeem(start Event) (streamGrant, error) {
	tok := start.Params[ParamToken]
	if tok == "" {
		return streamGrant{}, ErrNoStreamToken
	}
	w.mu.Lock()
	g, ok := w.tokens[tok]
	delete(w.tokens, tok)
	w.mu.Unlock()
	switch {
	case !ok || time.Now().After(g.expires):
		return streamGrant{}, ErrBadStreamToken
	case g.callID != start.CallID:
		return streamGrant{}, fmt.Errorf("%w: minted for call %s, used by %s", ErrBadStreamToken, g.callID, start.CallID)
	}
	return g, nil
}

// admit is a Stream's Admit for a carrier that needs nothing but the
// token: the call's parties become its facts.
func (w *webhook) admit(_ context.Context, start Event) (Admission, error) {
	g, err := w.redeem(start)
	if err != nil {
		return Admission{}, err
	}
	return Admission{Facts: map[string]string{"from": g.from, "to": g.to}}, nil
}

// reply writes an answer document.
func reply(rw http.ResponseWriter, contentType string, doc []byte) {
	rw.Header().Set("Content-Type", contentType)
	rw.Write(doc)
}
