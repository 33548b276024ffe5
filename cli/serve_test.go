package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/tracing"
	"github.com/holdline/holdline/tracing/tracingtest"
	"github.com/holdline/holdline/webrtc/rtctest"
)

func TestServeTriedAsANewUserWould(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"serve", "--agent", "booking", "--http", "0.0.0.0:0", "--tts", "demo", "--stt", "demo"}, strings.NewReader(""), outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, outR)
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("serve printed %q; want the URL to open", line)
	}
	url := strings.TrimSuffix(strings.TrimSpace(line[i:]), "/")
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("without HOLDLINE_TOKEN serve listens on %s; want 127.0.0.1 only", url)
	}
	for _, path := range []string{"/", "/healthz", "/metrics", "/v1/config"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
	c, err := rtctest.Dial(ctx, url, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool {
		return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "Holdline Bistro")
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.SendText("Book a table for two at seven"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.ToolTerminal && e.Tool == "book_table" }); err != nil {
		t.Fatal(err)
	}
	stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("serve ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("serve did not stop")
	}
}

// With a token and --metrics ADDR, the metrics are on their own listener
// without the token (for a Prometheus scraper on a private address), the
// main listener's /metrics says where they went, and the session API still
// wants the token.
func TestServeMetricsFlagServesThemOnTheirOwnListenerWithoutTheToken(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", "serve-test-token")
	port, err := freeport.TCP()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"serve", "--agent", "booking", "--http", "127.0.0.1:0", "--metrics", metricsAddr, "--tts", "demo", "--stt", "demo"}, strings.NewReader(""), outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, outR)
	url := strings.TrimSuffix(strings.TrimSpace(line[strings.Index(line, "http://"):]), "/")
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get("http://" + metricsAddr + "/metrics"); status != http.StatusOK || !strings.Contains(body, "holdline_sessions_active") {
		t.Errorf("--metrics listener: %d; want 200 with the metrics, no token asked", status)
	}
	if status, body := get(url + "/metrics"); status != http.StatusNotFound || !strings.Contains(body, "--metrics") {
		t.Errorf("main listener's /metrics: %d %q; want 404 naming --metrics", status, body)
	}
	resp, err := http.Post(url+"/v1/sessions", "application/sdp", strings.NewReader("v=0"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a session without the token: %d; want 401", resp.StatusCode)
	}
	stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("serve ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("serve did not stop")
	}
	if _, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
		t.Error("the metrics listener is still up after serve stopped")
	}
}

// ICE servers that cannot work are refused at start, with why, before
// anything listens; the environment gives them when the flag does not.
func TestServeRefusesICEServersThatCannotWork(t *testing.T) {
	for _, tc := range []struct{ flag, env, want string }{
		{`[{"urls":"turn:127.0.0.1:3478"}]`, "", "needs a username and a credential"},
		{"", `[{"urls":"http://example.net"}]`, "not a stun:"},
		{"not json", "", "JSON array"},
	} {
		t.Setenv("HOLDLINE_ICE_SERVERS", tc.env)
		args := []string{"serve", "--http", "127.0.0.1:0", "--store", "none"}
		if tc.flag != "" {
			args = append(args, "--ice-servers", tc.flag)
		}
		var out, errs bytes.Buffer
		err := run(t.Context(), args, nil, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), "--ice-servers") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("flag %q, env %q: %v; want an --ice-servers error saying %q", tc.flag, tc.env, err, tc.want)
		}
	}
}

// A TURN secret without the server it is for, a server without its
// secret, or credentials that would expire before a resumed call could use
// them, are refused at start with what to do; the secret is never echoed.
func TestServeRefusesTURNSettingsThatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"hunter2", nil, "--turn-urls turn:HOST:3478"},
		{"", []string{"--turn-urls", "turn:127.0.0.1:3478"}, "HOLDLINE_TURN_SECRET"},
		{"hunter2", []string{"--turn-urls", "stun:127.0.0.1:3478"}, "not a turn:"},
		{"hunter2", []string{"--turn-urls", "turn:127.0.0.1:3478", "--turn-ttl", "1m", "--resume-ttl", "5m"}, "shorter than --resume-ttl"},
	} {
		t.Setenv("HOLDLINE_TURN_SECRET", tc.env)
		args := append([]string{"serve", "--http", "127.0.0.1:0", "--store", "none"}, tc.args...)
		var out, errs bytes.Buffer
		err := run(t.Context(), args, nil, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q with secret %q: %v; want an error saying %q", tc.args, tc.env, err, tc.want)
		}
		if tc.env != "" && (strings.Contains(fmt.Sprint(err), tc.env) || strings.Contains(out.String()+errs.String(), tc.env)) {
			t.Errorf("%q: the secret was printed: %v\n%s%s", tc.args, err, out.String(), errs.String())
		}
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, serve says where spans go (not
// the headers' credentials), traces a call, with its tool's arguments
// under --trace-content, and sends the last spans when it stops.
func TestServeExportsTracesWhenTheEnvironmentAsks(t *testing.T) {
	rcv := tracingtest.NewReceiver()
	defer rcv.Close()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", "")
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20serve-test-secret")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"serve", "--agent", "booking", "--http", "127.0.0.1:0", "--tts", "demo", "--stt", "demo", "--trace-content", "--store", "none"},
			strings.NewReader(""), outW, io.Discard)
		outW.Close()
	}()
	out := bufio.NewReader(outR)
	var url, tracingLine string
	for tracingLine == "" {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("serve printed no tracing line: %v (%v)", err, <-done)
		}
		if i := strings.Index(line, "http://"); url == "" && i >= 0 {
			url = strings.TrimSuffix(strings.TrimSpace(line[i:]), "/")
		}
		if strings.HasPrefix(line, "Tracing") {
			tracingLine = line
		}
	}
	go io.Copy(io.Discard, out)
	if !strings.Contains(tracingLine, "on") || !strings.Contains(tracingLine, rcv.URL()+"/v1/traces") || strings.Contains(tracingLine, "serve-test-secret") {
		t.Errorf("serve printed %q; want tracing on, the endpoint, no credentials", tracingLine)
	}
	c, err := rtctest.Dial(ctx, url, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendText("Book a table for two at seven"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.ToolTerminal && e.Tool == "book_table" }); err != nil {
		t.Fatal(err)
	}
	stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("serve ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("serve did not stop")
	}
	// Stopped: the session's span and the tool's were flushed by now.
	names := map[string]tracingtest.Span{}
	for _, s := range rcv.Spans() {
		names[s.Name] = s
	}
	tool, ok := names["execute_tool book_table"]
	if _, root := names[tracing.SpanSession]; !root || !ok {
		t.Fatalf("spans received when serve stopped: %v; want the session and the tool", keys(names))
	}
	args, _ := tool.Attrs["gen_ai.tool.call.arguments"].(string)
	t.Logf("%d spans; the tool's arguments: %s", len(rcv.Spans()), args)
	if !strings.Contains(args, "7") && !strings.Contains(args, "19") {
		t.Errorf("the tool's arguments under --trace-content: %q", args)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
