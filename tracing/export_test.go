package tracing

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// otelVars are the variables FromEnv reads; each test sets its own.
var otelVars = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
}

// countExporters replaces the OTLP exporter with an in-memory one and
// counts how many are made.
func countExporters(t *testing.T) *int {
	n := new(int)
	old := newExporter
	newExporter = func(context.Context) (sdktrace.SpanExporter, error) {
		*n++
		return tracetest.NewInMemoryExporter(), nil
	}
	t.Cleanup(func() { newExporter = old })
	return n
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		on       bool
		endpoint string
		err      string
	}{
		{name: "nothing set", env: nil},
		{name: "an endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true, endpoint: "http://collector:4318/v1/traces"},
		{name: "a traces endpoint, with credentials not printed", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://user:pw@otel.example.com/x/traces?api_key=secret"},
			on: true, endpoint: "https://otel.example.com/x/traces"},
		{name: "the exporter named", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, endpoint: "https://localhost:4318/v1/traces"},
		{name: "the SDK disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}},
		{name: "no traces exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}},
		{name: "gRPC asked for", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "http/protobuf"},
		{name: "another exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "only otlp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range otelVars {
				t.Setenv(k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			made := countExporters(t)
			x, err := FromEnv(context.Background())
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("FromEnv error %v, want one saying %q", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if !tc.on {
				if x != nil || *made != 0 {
					t.Fatalf("FromEnv made %v and %d exporters; want nothing with tracing off", x, *made)
				}
				return
			}
			if x == nil || *made != 1 {
				t.Fatalf("FromEnv made %v and %d exporters; want one", x, *made)
			}
			defer x.Shutdown(context.Background())
			if x.Endpoint() != tc.endpoint {
				t.Errorf("Endpoint() = %q, want %q", x.Endpoint(), tc.endpoint)
			}
		})
	}
}

func TestResourceNamesHoldlineUnlessTheEnvironmentSaysOtherwise(t *testing.T) {
	for _, tc := range []struct{ env, attrs, want string }{
		{"", "", DefaultServiceName},
		{"bistro", "", "bistro"},
		{"", "service.name=desk,team=voice", "desk"},
	} {
		t.Setenv("OTEL_SERVICE_NAME", tc.env)
		t.Setenv("OTEL_RESOURCE_ATTRIBUTES", tc.attrs)
		res, err := newResource(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, kv := range res.Attributes() {
			if kv.Key == "service.name" {
				got = kv.Value.AsString()
			}
		}
		if got != tc.want {
			t.Errorf("OTEL_SERVICE_NAME=%q OTEL_RESOURCE_ATTRIBUTES=%q: service.name %q, want %q", tc.env, tc.attrs, got, tc.want)
		}
	}
}

func TestRedactRemovesCredentials(t *testing.T) {
	for _, in := range []string{
		`401 Unauthorized: Incorrect API key provided: sk-proj-abcdef123456`,
		`request failed: Authorization: Bearer eyJhbGciOi.secretpart`,
		`dial https://api.example.com/v1?api_key=hunter2hunter2&x=1`,
		`{"token": "tok_123456789"}`,
	} {
		out := redact(in)
		for _, secret := range []string{"sk-proj-abcdef123456", "eyJhbGciOi.secretpart", "hunter2hunter2", "tok_123456789"} {
			if strings.Contains(out, secret) {
				t.Errorf("redact(%q) = %q: the credential is still there", in, out)
			}
		}
	}
	if got := redact("the model timed out after 30s"); got != "the model timed out after 30s" {
		t.Errorf("redact changed an error without credentials: %q", got)
	}
}
