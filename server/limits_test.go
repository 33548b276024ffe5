package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// do sends a request and returns its status, body and WWW-Authenticate.
func do(t *testing.T, method, url, body string, header ...string) (status int, reason, challenge string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), resp.Header.Get("WWW-Authenticate")
}

func TestWrongTokenIsToldApartFromMissing(t *testing.T) {
	hs, _, _ := newServer(t, server.WithToken("s3cret"))
	for _, tc := range []struct {
		name, auth string
		reason     string
		challenge  string
	}{
		{"no header", "", "a bearer token is required", `Bearer realm="holdline"`},
		{"no token after the scheme", "Bearer ", "a bearer token is required", `Bearer realm="holdline"`},
		{"wrong token", "Bearer wrong", "does not match", `Bearer realm="holdline", error="invalid_token"`},
		{"right token with more after it", "Bearer s3cret2", "does not match", `error="invalid_token"`},
		{"another scheme", "Basic czNjcmV0", `scheme is "Basic"`, `error="invalid_request"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h []string
			if tc.auth != "" {
				h = []string{"Authorization", tc.auth}
			}
			status, reason, challenge := do(t, http.MethodPost, hs.URL+"/v1/sessions", "v=0", append(h, "Content-Type", "application/sdp")...)
			if status != http.StatusUnauthorized || !strings.Contains(reason, tc.reason) || !strings.Contains(challenge, tc.challenge) {
				t.Errorf("%d %q (WWW-Authenticate %q); want 401 saying %q, challenge %q", status, reason, challenge, tc.reason, tc.challenge)
			}
			if tc.reason == "a bearer token is required" && strings.Contains(challenge, "error=") {
				t.Errorf("a request without a token got an error code in its challenge: %q", challenge)
			}
		})
	}
}

func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	hs, _, _ := newServer(t, server.WithToken("s3cret"))
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR   s3cret "} {
		status, reason, _ := do(t, http.MethodGet, hs.URL+"/metrics", "", "Authorization", auth)
		if status != http.StatusOK {
			t.Errorf("Authorization %q: %d %q; want 200", auth, status, reason)
		}
	}
}

func TestMetricsNeedTheTokenWhenSet(t *testing.T) {
	hs, _, _ := newServer(t, server.WithToken("s3cret"))
	if status, reason, _ := do(t, http.MethodGet, hs.URL+"/metrics", ""); status != http.StatusUnauthorized || !strings.Contains(reason, "required") {
		t.Errorf("/metrics without the token: %d %q; want 401", status, reason)
	}
	if status, reason, _ := do(t, http.MethodGet, hs.URL+"/metrics", "", "Authorization", "Bearer nope"); status != http.StatusUnauthorized || !strings.Contains(reason, "does not match") {
		t.Errorf("/metrics with a wrong token: %d %q; want 401", status, reason)
	}
	status, body, _ := do(t, http.MethodGet, hs.URL+"/metrics", "", "Authorization", "Bearer s3cret")
	if status != http.StatusOK || !strings.Contains(body, "holdline_sessions_active") {
		t.Errorf("/metrics with the token: %d, metrics present %v", status, strings.Contains(body, "holdline_sessions_active"))
	}
	// Liveness and the page's configuration stay open.
	for _, path := range []string{"/healthz", "/v1/config"} {
		if status, _, _ := do(t, http.MethodGet, hs.URL+path, ""); status != http.StatusOK {
			t.Errorf("%s without the token: %d; want 200", path, status)
		}
	}
}

func TestSeparateMetricsListenerIsOpenAndTheMainOneSaysWhere(t *testing.T) {
	hs, _, srv := newServer(t, server.WithToken("s3cret"), server.WithSeparateMetrics())
	status, reason, _ := do(t, http.MethodGet, hs.URL+"/metrics", "", "Authorization", "Bearer s3cret")
	if status != http.StatusNotFound || !strings.Contains(reason, "--metrics") {
		t.Errorf("main /metrics with separate metrics: %d %q; want 404 naming --metrics", status, reason)
	}
	ms := httptest.NewServer(srv.MetricsHandler())
	defer ms.Close()
	status, body, _ := do(t, http.MethodGet, ms.URL+"/metrics", "")
	if status != http.StatusOK || !strings.Contains(body, "holdline_sessions_active") {
		t.Errorf("the metrics listener without a token: %d; want 200 with the metrics", status)
	}
}

func TestAccessTokenInTheURLOnlyOnTheEventStream(t *testing.T) {
	hs, _, _ := newServer(t, server.WithToken("s3cret"))
	// Past the check, an unknown session is 404: the token was taken.
	if status, reason, _ := do(t, http.MethodGet, hs.URL+"/v1/sessions/nope/events?access_token=s3cret", ""); status != http.StatusNotFound {
		t.Errorf("events with ?access_token=: %d %q; want 404 (authorised, no such session)", status, reason)
	}
	if status, reason, _ := do(t, http.MethodGet, hs.URL+"/v1/sessions/nope/events?access_token=wrong", ""); status != http.StatusUnauthorized || !strings.Contains(reason, "does not match") {
		t.Errorf("events with a wrong ?access_token=: %d %q; want 401 saying it does not match", status, reason)
	}
	for _, tc := range []struct{ method, path string }{
		{http.MethodPost, "/v1/sessions/nope/input"},
		{http.MethodDelete, "/v1/sessions/nope"},
		{http.MethodGet, "/v1/sessions/nope/context"},
		{http.MethodPost, "/v1/sessions"},
		{http.MethodGet, "/metrics"},
	} {
		// Even with the right header too: the URL is the wrong place.
		status, reason, _ := do(t, tc.method, hs.URL+tc.path+"?access_token=s3cret", `{"text":"hi"}`, "Authorization", "Bearer s3cret")
		if status != http.StatusBadRequest || !strings.Contains(reason, "only on the event stream") {
			t.Errorf("%s %s?access_token=: %d %q; want 400 naming the event stream", tc.method, tc.path, status, reason)
		}
	}
}

// limit is how the refusals of over-long text name the limit.
var limit = fmt.Sprint(server.MaxTextBytes)

func TestTypedInputOverHTTPHasOneLimitAndSaysWhatIsWrong(t *testing.T) {
	hs, _, _ := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url := hs.URL + c.Location + "/input"
	text := func(s string) string { b, _ := json.Marshal(map[string]string{"text": s}); return string(b) }
	for _, tc := range []struct {
		name, body string
		status     int
		reason     string
	}{
		{"one byte over the limit", text(strings.Repeat("a", server.MaxTextBytes+1)), 413, limit},
		{"200,000 characters", text(strings.Repeat("a", 200000)), 413, limit},
		{"multi-byte text over the limit in bytes", text(strings.Repeat("é", server.MaxTextBytes/2+1)), 413, limit},
		{"empty text", `{"text":""}`, 400, "empty"},
		{"only whitespace", `{"text":" \n\t "}`, 400, "empty"},
		{"no text field", `{"message":"hello"}`, 400, `no "text" field`},
		{"text is a number", `{"text":5}`, 400, "field text must be a string, not a number"},
		{"not JSON", `hello`, 400, "not valid JSON at byte 1"},
		{"JSON cut short", `{"text":"hel`, 400, "ends early"},
		{"empty body", ``, 400, "empty"},
	} {
		status, reason, _ := do(t, http.MethodPost, url, tc.body, "Content-Type", "application/json")
		if status != tc.status || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: %d %q; want %d saying %q", tc.name, status, reason, tc.status, tc.reason)
		}
	}
	// At the limit, even with every byte escaped, the text is taken.
	at := strings.Repeat("<", server.MaxTextBytes) // "\u003c" in Go's JSON: six bytes each
	if status, reason, _ := do(t, http.MethodPost, url, text(at), "Content-Type", "application/json"); status != http.StatusAccepted {
		t.Errorf("text of exactly %d bytes, escaped: %d %q; want 202", server.MaxTextBytes, status, reason)
	}
	if status, reason, _ := do(t, http.MethodPost, url, text("Are you free at eight?"), "Content-Type", "application/json"); status != http.StatusAccepted {
		t.Fatalf("a plain question: %d %q", status, reason)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.UserTurn && e.Text == "Are you free at eight?" }); err != nil {
		t.Fatal(err)
	}
	var turns []int
	for _, e := range c.Events() {
		if e.Kind == events.UserTurn {
			turns = append(turns, len(e.Text))
		}
	}
	if len(turns) != 2 || turns[0] != server.MaxTextBytes {
		t.Errorf("user turns of %v bytes; want the %d-byte one and the question, nothing refused", turns, server.MaxTextBytes)
	}
}

func TestTypedInputOverTheDataChannelHasTheSameLimit(t *testing.T) {
	hs, _, _ := newServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	text := func(s string) string {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
		return string(b)
	}
	cases := []struct {
		name, msg, reason string
	}{
		{"one byte over the limit", text(strings.Repeat("a", server.MaxTextBytes+1)), limit},
		{"200,000 characters", text(strings.Repeat("a", 200000)), limit},
		{"empty text", text(""), "empty"},
		{"only whitespace", text(" \n\t "), "empty"},
		{"text is a number", `{"type":"text","text":5}`, "field text must be a string, not a number"},
		{"JSON cut short", `{"type":"text","text":"hel`, "ends early"},
	}
	for i, tc := range cases {
		if err := c.Send(tc.msg); err != nil {
			t.Fatalf("%s: sending: %v", tc.name, err)
		}
		if err := c.Wait(ctx, tc.name+"'s error", func(c *rtctest.Client) bool { return len(c.Errors()) > i }); err != nil {
			t.Fatal(err)
		}
		if got := c.Errors()[i]; !strings.Contains(got, tc.reason) {
			t.Errorf("%s: the channel said %q; want it to say %q", tc.name, got, tc.reason)
		}
	}
	if err := c.SendText("Are you free at eight?"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.UserTurn && e.Text == "Are you free at eight?" }); err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Events() {
		if e.Kind == events.UserTurn && e.Text != "Are you free at eight?" {
			t.Errorf("a refused message became a turn of %d bytes", len(e.Text))
		}
	}
	if n := len(c.Errors()); n != len(cases) {
		t.Errorf("%d errors for %d refused messages: %q", n, len(cases), c.Errors())
	}
}
