package tracing

import (
	"github.com/holdline/holdline/calls"
	"go.opentelemetry.io/otel/trace"
)

// FactSessionSpan is the checkpoint fact that names the session span of
// the life that wrote the checkpoint: what the next life links to.
const FactSessionSpan = "trace_session_span"

// Observer traces a call of a calls.Host: pass it to calls.WithObserver.
// A call resumed from a checkpoint continues its session's trace, its
// session span linked to that of the life that wrote the checkpoint.
func (t *Tracer) Observer(w calls.Watch) (calls.Observer, map[string]string) {
	start := w.Seq + 1
	opts := []SessionOption{WithTransport(w.Kind), WithStart(start)}
	if prev, err := trace.SpanIDFromHex(w.Facts[FactSessionSpan]); err == nil {
		opts = append(opts, WithPrevious(prev))
	}
	s := t.Session(w.ID, opts...)
	return s, map[string]string{FactSessionSpan: s.SpanID().String()}
}
