package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/webrtc"
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

// The ICE servers go to clients as RFC 9725 has it, in Link headers on the
// 201 and on OPTIONS, and in /v1/config for the page; TURN credentials
// only to a request that carries the token, and those minted from the
// shared secret are the session's own, expire, and verify with the secret.
func TestClientsAreToldTheICEServersAndOnlyTokenHoldersTheirCredentials(t *testing.T) {
	const secret = "shared-with-coturn"
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"), webrtc.WithGatherTimeout(300*time.Millisecond),
		webrtc.WithICEServers("stun:127.0.0.1:9"),
		webrtc.WithICEServer(webrtc.ICEServer{URLs: []string{"turn:127.0.0.1:9?transport=udp"}, Username: "fixed", Credential: "pa\"ss"}),
		webrtc.WithTURNSecret(secret, time.Hour, "turn:127.0.0.1:9?transport=tcp"))
	if err != nil {
		t.Fatal(err)
	}
	hs, _, _ := newServer(t, server.WithToken("s3cret"), server.WithTransport(tr))
	get := func(method, path, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	checkMinted := func(where, username, credential, user string) {
		t.Helper()
		exp, who, ok := strings.Cut(username, ":")
		sec, err := strconv.ParseInt(exp, 10, 64)
		if !ok || err != nil || who != user {
			t.Errorf("%s: minted username %q; want EXPIRY:%s", where, username, user)
			return
		}
		if left := time.Until(time.Unix(sec, 0)); left < 59*time.Minute || left > time.Hour+time.Minute {
			t.Errorf("%s: the credential expires in %v; want an hour", where, left)
		}
		if _, want := webrtc.TURNCredentials(secret, user, time.Unix(sec, 0)); credential != want {
			t.Errorf("%s: credential %q does not verify with the secret", where, credential)
		}
	}

	// Without the token (a CORS preflight): the STUN server only.
	if links := get(http.MethodOptions, "/v1/sessions", "").Header.Values("Link"); len(links) != 1 || links[0] != `<stun:127.0.0.1:9>; rel="ice-server"` {
		t.Errorf("OPTIONS without the token: Link %q; want the STUN server only", links)
	}
	links := get(http.MethodOptions, "/v1/sessions", "s3cret").Header.Values("Link")
	if len(links) != 3 || links[1] != `<turn:127.0.0.1:9?transport=udp>; rel="ice-server"; username="fixed"; credential="pa\"ss"; credential-type="password"` {
		t.Fatalf("OPTIONS with the token: Link %q", links)
	}
	if m := regexp.MustCompile(`^<turn:127.0.0.1:9\?transport=tcp>; rel="ice-server"; username="([^"]+)"; credential="([^"]+)"; credential-type="password"$`).FindStringSubmatch(links[2]); m == nil {
		t.Errorf("OPTIONS: the minted TURN server's Link is %q", links[2])
	} else {
		checkMinted("OPTIONS", m[1], m[2], "whip")
	}

	var cfg struct {
		ICEServers []webrtc.ICEServer `json:"ice_servers"`
	}
	if err := json.NewDecoder(get(http.MethodGet, "/v1/config", "").Body).Decode(&cfg); err != nil || len(cfg.ICEServers) != 1 || cfg.ICEServers[0].Credential != "" {
		t.Errorf("/v1/config without the token: %+v, %v; want the STUN server only", cfg.ICEServers, err)
	}
	if err := json.NewDecoder(get(http.MethodGet, "/v1/config", "s3cret").Body).Decode(&cfg); err != nil || len(cfg.ICEServers) != 3 {
		t.Fatalf("/v1/config with the token: %+v, %v; want three servers", cfg.ICEServers, err)
	}
	checkMinted("/v1/config", cfg.ICEServers[2].Username, cfg.ICEServers[2].Credential, "page")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{Token: "s3cret", NoHello: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Links) != 3 {
		t.Fatalf("the 201's Link headers: %q; want three", c.Links)
	}
	m := regexp.MustCompile(`username="([^"]+)"; credential="([^"]+)"`).FindStringSubmatch(c.Links[2])
	if m == nil {
		t.Fatalf("the 201's minted TURN server: %q", c.Links[2])
	}
	checkMinted("201", m[1], m[2], strings.TrimPrefix(c.Location, "/v1/sessions/"))
}
