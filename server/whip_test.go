package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// The session routes as a WHIP endpoint (RFC 9725) and its resources, as a
// WHIP client or a page on another origin uses them: OPTIONS answers the
// preflight without the token, with Accept-Post; the offer's answer lets
// the page read Location and the resume token; PATCH (trickle ICE) is
// refused with 501 and why; DELETE answers 200.
func TestSessionsAnswerAsAWHIPEndpoint(t *testing.T) {
	hs, _, _ := newServer(t, server.WithToken("s3cret"))
	do := func(method, path, token string, h map[string]string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, hs.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	preflight := map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type"}
	resp := do(http.MethodOptions, "/v1/sessions", "", preflight)
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Accept-Post") != "application/sdp" ||
		h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("OPTIONS /v1/sessions: %d %v; want 204, Accept-Post: application/sdp and the CORS headers", resp.StatusCode, h)
	}
	for _, name := range []string{"Location", "Link", "ETag", server.HeaderResumeToken} {
		if !strings.Contains(h.Get("Access-Control-Expose-Headers"), name) {
			t.Errorf("OPTIONS: Access-Control-Expose-Headers %q lacks %s", h.Get("Access-Control-Expose-Headers"), name)
		}
	}
	if resp := do(http.MethodPost, "/v1/sessions", "", map[string]string{"Content-Type": "application/sdp"}); resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("POST without the token: %d, CORS origin %q; want 401 a page on another origin can read", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{Token: "s3cret", NoHello: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if resp := do(http.MethodOptions, c.Location, "", nil); resp.StatusCode != http.StatusNoContent ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "DELETE") {
		t.Errorf("OPTIONS %s: %d %v; want 204 allowing DELETE", c.Location, resp.StatusCode, resp.Header)
	}
	resp = do(http.MethodPatch, c.Location, "s3cret", map[string]string{"Content-Type": "application/trickle-ice-sdpfrag"})
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "trickle ICE") {
		t.Errorf("PATCH %s: %d %q; want 501 saying trickle ICE is not taken", c.Location, resp.StatusCode, body)
	}
	if resp := do(http.MethodPatch, "/v1/sessions/nobody", "s3cret", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("PATCH of no session: %d; want 404", resp.StatusCode)
	}
	if resp := do(http.MethodDelete, c.Location, "s3cret", map[string]string{"Origin": "https://app.example"}); resp.StatusCode != http.StatusOK ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("DELETE %s: %d; want 200 with CORS", c.Location, resp.StatusCode)
	}
}
