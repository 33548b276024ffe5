package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES say otherwise.
const DefaultServiceName = "holdline"

// defaultEndpoint is where the OTLP/HTTP exporter sends traces when only
// OTEL_TRACES_EXPORTER=otlp is set.
const defaultEndpoint = "https://localhost:4318/v1/traces"

// Enabled reports whether the standard environment variables ask for
// traces: OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set, or OTEL_TRACES_EXPORTER names an exporter (otlp); OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turns them off whatever else is set.
func Enabled() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false
	case "":
	default:
		return true // otlp; another one is asked for, and FromEnv says it is not supported
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Exporter is the process's trace pipeline: a TracerProvider whose batch
// processor (bounded queue: spans past it are dropped, never waited for)
// sends spans over OTLP/HTTP.
type Exporter struct {
	tp       *sdktrace.TracerProvider
	endpoint string
}

// newExporter makes the OTLP/HTTP exporter; a variable so that a test can
// see whether one is made at all.
var newExporter = func(ctx context.Context) (sdktrace.SpanExporter, error) {
	return otlptracehttp.New(ctx)
}

// FromEnv sets up the trace pipeline the standard environment variables
// describe (see Enabled; the exporter reads OTEL_EXPORTER_OTLP_* itself:
// endpoint, headers, compression, timeout, certificates), or returns nil
// and no error when they ask for none: then nothing is made, no exporter
// and no provider. opts add to the provider's options (a sampler).
func FromEnv(ctx context.Context, opts ...sdktrace.TracerProviderOption) (*Exporter, error) {
	if !Enabled() {
		return nil, nil
	}
	if exp := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))); exp != "" && exp != "otlp" {
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%s: only otlp (or none) is supported", exp)
	}
	if p := protocol(); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL=%s: only http/protobuf is supported", p)
	}
	res, err := newResource(ctx)
	if err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	return &Exporter{tp: NewProvider(exp, res, opts...), endpoint: Endpoint()}, nil
}

// NewProvider returns a TracerProvider for the Tracer: spans batched to
// exp (the batch processor's bounded defaults: 2048 spans queued, 512 a
// batch, every 5 s), ids from IDGenerator, resource res (nil: the SDK's
// default).
func NewProvider(exp sdktrace.SpanExporter, res *resource.Resource, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	o := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithIDGenerator(IDGenerator())}
	if res != nil {
		o = append(o, sdktrace.WithResource(res))
	}
	return sdktrace.NewTracerProvider(append(o, opts...)...)
}

// newResource is the process's resource: service.name "holdline" unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another, what they
// add, and the SDK's own.
func newResource(ctx context.Context) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithFromEnv(), // last: the environment's names win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	return res, nil
}

// TracerProvider is the pipeline's provider, for New.
func (x *Exporter) TracerProvider() trace.TracerProvider { return x.tp }

// Endpoint is where spans go, without credentials or query.
func (x *Exporter) Endpoint() string { return x.endpoint }

// Shutdown sends the spans still queued and stops the pipeline, waiting
// no longer than ctx allows.
func (x *Exporter) Shutdown(ctx context.Context) error {
	if err := x.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
}

// ShutdownTimeout bounds the flush at Shutdown when serve stops.
const ShutdownTimeout = 5 * time.Second

func protocol() string {
	if p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return strings.ToLower(strings.TrimSpace(p))
	}
	return strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")))
}

// Endpoint is the URL the OTLP/HTTP exporter sends traces to by the
// environment, as the exporter decides it (the traces endpoint as is, or
// the base endpoint with /v1/traces), stripped of user, password and
// query so that it can be printed.
func Endpoint() string {
	raw := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if raw == "" {
		if base := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			raw = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	if raw == "" {
		raw = defaultEndpoint
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(an endpoint that does not parse as a URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
