package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TraceID is the trace of session id: the first 16 bytes of the SHA-256
// of the id. Every life of a session (a resume on another worker after a
// crash, a call put through) is in the same trace, and anyone holding the
// session id can find it.
func TraceID(session string) trace.TraceID {
	sum := sha256.Sum256([]byte(session))
	var id trace.TraceID
	copy(id[:], sum[:16])
	return id
}

// SessionSpanID is the span of the life of session id whose events
// begin at sequence number seq (1 for a fresh session; one past its
// snapshot's for a resumed one). Derived rather than random, so that a
// resumed life can link to an earlier one it knows only by its start.
func SessionSpanID(session string, seq uint64) trace.SpanID {
	h := sha256.New()
	h.Write([]byte("holdline session span\x00"))
	h.Write([]byte(session))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	h.Write(b[:])
	var id trace.SpanID
	copy(id[:], h.Sum(nil)[:8])
	if !id.IsValid() { // all zero: not a span id
		id[7] = 1
	}
	return id
}

// IDGenerator returns the span and trace ids generator the Tracer needs
// of its TracerProvider (NewProvider sets it): random ids, but for a
// session's root span, whose ids the session's id decides.
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type idGenerator struct{}

// rootKey marks a context whose root span takes the ids of rootIDs.
type rootKey struct{}

type rootIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withRootIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, rootKey{}, rootIDs{t, s})
}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if r, ok := ctx.Value(rootKey{}).(rootIDs); ok && r.trace.IsValid() && r.span.IsValid() {
		return r.trace, r.span
	}
	var t trace.TraceID
	for !t.IsValid() {
		binary.NativeEndian.PutUint64(t[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(t[8:], rand.Uint64())
	}
	return t, randomSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		binary.NativeEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}
