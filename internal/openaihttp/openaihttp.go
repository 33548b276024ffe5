// Package openaihttp holds what every client of OpenAI's HTTP API in
// Holdline reads the same way: its error answers, with the API key
// redacted, and how long it asks a client to wait before trying again.
package openaihttp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
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

// ReadError reads an error answer, redacting key from it.
func ReadError(resp *http.Response, key string) *APIError {
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

// RetryAfter is how long the server asked to wait, from OpenAI's
// retry-after-ms header or the standard Retry-After (seconds or an HTTP
// date), or -1 when it did not say.
func RetryAfter(h http.Header) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
			return time.Duration(secs * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(time.Until(t), 0)
		}
	}
	return -1
}
