package openai

import (
	"bytes"
	"context"
	"errors"
	"github.com/holdline/holdline/internal/openaihttp"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
)

// attempt is what the HTTP layer saw of one try; go-openai keeps neither
// the response headers of a failure nor whether the request was sent.
type attempt struct {
	sent       bool          // the HTTP client was called
	netErr     error         // the HTTP client failed (no response)
	retryAfter time.Duration // from a failure response, 0 if none
}

type attemptKey struct{}

// doer is the HTTPDoer given to go-openai. It notes into the attempt found
// in the request's context what go-openai would drop.
type doer struct{ c *http.Client }

func (d doer) Do(r *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(r)
	if a, ok := r.Context().Value(attemptKey{}).(*attempt); ok {
		a.sent = true
		a.netErr = err
		if resp != nil && resp.StatusCode >= 400 {
			a.retryAfter = retryAfter(resp.Header)
		}
	}
	if resp != nil && resp.StatusCode >= 400 {
		// go-openai reads an error body but never closes it; read it
		// here (bounded) and close it so the connection is released.
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, err
}

// maxErrorBody bounds the error body kept; OpenAI's are a few hundred
// bytes, a misconfigured proxy's HTML page may be more.
const maxErrorBody = 64 << 10

// retryAfter is how long the server asked to wait; 0 means it did not
// say (or said 0), and the backoff decides.
func retryAfter(h http.Header) time.Duration {
	return max(openaihttp.RetryAfter(h), 0)
}

// backoff is the wait before retry n (0-based): Retry-After if the server
// gave one, else base·2ⁿ with equal jitter (half fixed, half random, so
// clients that failed together spread out); at most max either way.
func (m *Model) backoff(n int, after time.Duration) time.Duration {
	limit := m.cfg.retryMax
	if after > 0 {
		return min(after, limit)
	}
	d := m.cfg.retryBase
	for i := 0; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// status returns the HTTP status of an error answer, 0 if err is not one.
func status(err error) int {
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0 {
		return apiErr.HTTPStatusCode
	}
	var reqErr *goopenai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode
	}
	return 0
}

// retryable reports whether a failure before the first token may be
// retried: 429, 5xx, or the connection failing.
func retryable(err error, a *attempt) bool {
	if s := status(err); s != 0 {
		return s == http.StatusTooManyRequests || s >= 500
	}
	if a != nil && a.netErr != nil {
		return true
	}
	return brokenConnection(err)
}

// brokenConnection reports whether a read error means the connection broke
// (rather than, say, the provider sending an error event).
func brokenConnection(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
