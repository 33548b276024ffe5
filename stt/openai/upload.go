package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/holdline/holdline/internal/openaihttp"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"time"

	"github.com/holdline/holdline/media"
)

// APIError is an error answer from the API, with the API key redacted.
type APIError = openaihttp.APIError

// transcribe uploads one utterance, retrying rate limits, server errors
// and broken connections up to maxRetries times while ctx allows.
func (r *Recognizer) transcribe(ctx context.Context, samples []int16, rate int) (string, error) {
	body, ctype, err := r.encode(samples, rate)
	if err != nil {
		return "", err
	}
	for attempt := 0; ; attempt++ {
		text, wait, err := r.post(ctx, body, ctype)
		if err == nil {
			return text, nil
		}
		if attempt == maxRetries || ctx.Err() != nil || !retryable(err) {
			return "", err
		}
		if wait < 0 {
			wait = retryBackoff << attempt
			wait = wait/2 + rand.N(wait/2+1) // jitter, so streams do not retry in step
		}
		if wait > maxRetryWait {
			return "", err // the caller cannot wait that long for a reply
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return "", err // would time out waiting: the real cause is err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("%w (while waiting to retry after: %v)", ctx.Err(), err)
		}
	}
}

func retryable(err error) bool {
	if apiErr, ok := errors.AsType[*APIError](err); ok {
		return apiErr.Temporary()
	}
	// A transport error (reset, refused, cut short): the upload is
	// idempotent, so trying again is safe.
	_, malformed := errors.AsType[*decodeError](err)
	return !malformed
}

// decodeError is a 200 answer that could not be read as a transcript;
// asking again would get the same.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return "decoding the transcript: " + e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// encode builds the multipart form of one upload, once, so that retries
// send the same bytes.
func (r *Recognizer) encode(samples []int16, rate int) ([]byte, string, error) {
	if rate > uploadRate {
		rs, err := media.NewResampler(rate, uploadRate)
		if err != nil {
			return nil, "", err
		}
		samples = rs.Process(make([]int16, 0, rs.OutputLen(len(samples))), samples)
		rate = uploadRate
	}
	var body bytes.Buffer
	body.Grow(2*len(samples) + 1024)
	mw := multipart.NewWriter(&body)
	fields := [][2]string{
		{"model", r.cfg.model},
		{"response_format", "json"},
		{"language", r.cfg.language},
		{"prompt", r.cfg.prompt},
	}
	for _, f := range fields {
		if f[1] == "" {
			continue
		}
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return nil, "", err
		}
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", `form-data; name="file"; filename="utterance.wav"`)
	h.Set("Content-Type", "audio/wav")
	part, err := mw.CreatePart(h)
	if err != nil {
		return nil, "", err
	}
	if err := media.WriteWAV(part, samples, rate); err != nil {
		return nil, "", err
	}
	if err := mw.Close(); err != nil {
		return nil, "", err
	}
	return body.Bytes(), mw.FormDataContentType(), nil
}

// post sends one attempt. wait is how long the server asked the client to
// wait before trying again, or -1 if it did not say.
func (r *Recognizer) post(ctx context.Context, body []byte, ctype string) (text string, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", -1, err
	}
	req.Header.Set("Authorization", "Bearer "+r.cfg.apiKey)
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Accept", "application/json")
	resp, err := r.cfg.client.Do(req)
	if err != nil {
		return "", -1, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", openaihttp.RetryAfter(resp.Header), openaihttp.ReadError(resp, r.cfg.apiKey)
	}
	var out struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		if ctx.Err() != nil {
			return "", -1, err // cut short, not malformed
		}
		return "", -1, &decodeError{err}
	}
	return out.Text, -1, nil
}
