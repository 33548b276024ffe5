package scripted

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrClosed is returned by Recv on an LLM or TTS stream, and by Write and
// EndOfSpeech on an STT stream, once the stream is closed. (Recv on a closed
// STT stream returns io.EOF, as the stt.Stream contract asks.)
var ErrClosed = errors.New("scripted: stream closed")

// waitUntil blocks until due, ctx is done or stop is closed. It returns nil
// only when due was reached.
func waitUntil(ctx context.Context, stop <-chan struct{}, due time.Time) error {
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return ErrClosed
	}
}

// streamErr turns the result of a wait into what Recv reports: context
// errors are wrapped so callers can tell which provider gave up, ErrClosed
// is returned as is.
func streamErr(who string, err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("scripted: %s: %w", who, err)
}

// offset turns a per-second rate into the offset of the i-th event, computed
// from i rather than accumulated so that rounding never builds up.
func offset(i int, perSecond float64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / perSecond)
}
