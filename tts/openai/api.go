package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/holdline/holdline/internal/openaihttp"
	"io"
	"mime"
	"net/http"
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

// APIError is an error answer from the API, with the API key redacted.
type APIError = openaihttp.APIError

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
		return nil, openaihttp.RetryAfter(resp.Header), openaihttp.ReadError(resp, s.cfg.apiKey)
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
