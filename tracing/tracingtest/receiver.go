// Package tracingtest has an in-process OTLP/HTTP trace receiver, for
// tests of what Holdline exports: it decodes the protobuf wire format
// the exporters send (gzip or not) and keeps the spans.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Path is where OTLP/HTTP sends traces.
const Path = "/v1/traces"

// maxBody bounds one request's body, decompressed.
const maxBody = 64 << 20

// Span is a received span, its ids in hex.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Start, End                time.Time
	Attrs                     map[string]any
	Events                    []Event
	Links                     []Link
	StatusError               bool
	StatusMessage             string
	// Resource and Scope are what the span was sent with.
	Resource map[string]any
	Scope    string
}

// Event is a span's event.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]any
}

// Link is a span's link to another span.
type Link struct {
	TraceID, SpanID string
	Attrs           map[string]any
}

// Receiver is an OTLP/HTTP trace receiver on 127.0.0.1.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
	gzipped  int
	bytes    int64
	arrived  chan struct{} // closed and replaced when spans arrive
}

// NewReceiver starts a receiver; Close it.
func NewReceiver() *Receiver {
	r := &Receiver{arrived: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, r.serve)
	r.srv = httptest.NewServer(mux) // 127.0.0.1
	return r
}

// URL is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) URL() string { return r.srv.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	gz := req.Header.Get("Content-Encoding") == "gzip"
	if gz {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, convert(s, res, ss.GetScope().GetName()))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.requests++
	r.bytes += int64(len(b))
	if gz {
		r.gzipped++
	}
	close(r.arrived)
	r.arrived = make(chan struct{})
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests returns how many export requests arrived, how many of them
// gzipped, and their bytes (decompressed).
func (r *Receiver) Requests() (n, gzipped int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, r.gzipped, r.bytes
}

// WaitFor waits until ok holds of the spans received, or timeout.
func (r *Receiver) WaitFor(timeout time.Duration, ok func([]Span) bool) ([]Span, error) {
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		spans, arrived := append([]Span(nil), r.spans...), r.arrived
		r.mu.Unlock()
		if ok(spans) {
			return spans, nil
		}
		select {
		case <-arrived:
		case <-deadline:
			return spans, fmt.Errorf("tracingtest: %d spans after %v, not what was waited for", len(spans), timeout)
		}
	}
}

func convert(s *tracepb.Span, res map[string]any, scope string) Span {
	out := Span{
		TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		ParentID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
		Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
		Attrs: attrs(s.GetAttributes()), Resource: res, Scope: scope,
		StatusError:   s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
		StatusMessage: s.GetStatus().GetMessage(),
	}
	for _, e := range s.GetEvents() {
		out.Events = append(out.Events, Event{Name: e.GetName(), Time: time.Unix(0, int64(e.GetTimeUnixNano())), Attrs: attrs(e.GetAttributes())})
	}
	for _, l := range s.GetLinks() {
		out.Links = append(out.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId()), Attrs: attrs(l.GetAttributes())})
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}
