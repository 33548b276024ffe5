package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Retry policy. Speech is wanted now, so the backoff is short; a server
// asking for a longer wait than maxRetryWait is not waited for.
const (
	maxRetries   = 2
	retryBackoff = 200 * time.Millisecond
	maxRetryWait = 2 * time.Second
)

// APIError is an error answer from the API. Its Message never contains the
// API key: the real API quotes part of a wrong key back, so the key is
// redacted.
type APIError struct {
	StatusCode int
	// Type, Code and Param are from OpenAI's error body, empty when the
	// body is not one (a proxy's error page, say).
	Type, Code, Param string
	Message           string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" " + t)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Code != "" {
		b.WriteString(" (" + e.Code + ")")
	}
	return b.String()
}

// Temporary reports whether the request may succeed if tried again: rate
// limits and server errors.
func (e *APIError) Temporary() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// formatError is a 200 answer that is not audio; asking again would get
// the same.
type formatError struct{ contentType string }

func (e *formatError) Error() string {
	return fmt.Sprintf("answer of type %q, want raw PCM audio", e.contentType)
}

func retryable(err error) bool {
	if apiErr, ok := errors.AsType[*APIError](err); ok {
		return apiErr.Temporary()
	}
	// A transport error (reset, refused, cut short) before any audio:
	// nothing was heard yet, so asking again is safe.
	_, malformed := errors.AsType[*formatError](err)
	return !malformed
}

// post sends one request. wait is how long the server asked the client to
// wait before trying again, or -1 if it did not say.
func (s *Synthesizer) post(ctx context.Context, payload []byte) (body io.ReadCloser, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, -1, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.cfg.client.Do(req)
	if err != nil {
		return nil, -1, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, retryAfter(resp.Header), readAPIError(resp, s.cfg.apiKey)
	}
	// A JSON or HTML page here is not audio, whatever the status says;
	// playing it would be noise.
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt == "application/json" || strings.HasPrefix(mt, "text/") {
			resp.Body.Close()
			return nil, -1, &formatError{ct}
		}
	}
	return resp.Body, -1, nil
}

// readAPIError reads an error answer, redacting key from it.
func readAPIError(resp *http.Response, key string) *APIError {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{StatusCode: resp.StatusCode}
	var body struct {
		Error *struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil {
		e.Message, e.Type = body.Error.Message, body.Error.Type
		e.Code, e.Param = jsonString(body.Error.Code), jsonString(body.Error.Param)
	} else {
		// Not OpenAI's format: keep the start of whatever it is.
		msg := strings.Join(strings.Fields(string(raw)), " ")
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		e.Message = msg
	}
	if len(key) >= 8 {
		// A key shorter than that is a placeholder; replacing it would
		// mangle the message for nothing.
		for _, f := range []*string{&e.Message, &e.Param} {
			*f = strings.ReplaceAll(*f, key, "[redacted]")
		}
	}
	return e
}

// jsonString renders a field that may be a string, a number or null.
func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := strings.TrimSpace(string(raw)); t != "null" {
		return t
	}
	return ""
}

// retryAfter is how long the server asked to wait, from OpenAI's
// retry-after-ms header or the standard Retry-After, or -1.
func retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
			return time.Duration(secs * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(time.Until(t), 0)
		}
	}
	return -1
}
