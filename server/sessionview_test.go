package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/holdline/holdline/server"
)

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// The live session view is a page of the web client for any session id,
// served without the token (its events come from the stream, which asks
// for it), that loads the timeline script holdline inspect inlines.
func TestSessionViewServesTheTimeline(t *testing.T) {
	hs, _, _ := newServer(t, server.WithToken("s3cret"))
	resp, page := get(t, hs.URL+"/sessions/s_123")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /sessions/s_123: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("the page's CSP %q", csp)
	}
	for _, want := range []string{`<script src="/timeline.js"`, `<script src="/session.js"`, `href="/timeline.css"`, `id="timeline"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	script, style := server.TimelineAssets()
	for path, want := range map[string]string{"/timeline.js": string(script), "/timeline.css": string(style)} {
		resp, body := get(t, hs.URL+path)
		if resp.StatusCode != http.StatusOK || body != want {
			t.Errorf("GET %s: %d, %d bytes; want the timeline's %d", path, resp.StatusCode, len(body), len(want))
		}
	}
	if !strings.Contains(string(script), "window.HoldlineTimeline") {
		t.Error("timeline.js does not define HoldlineTimeline")
	}
	resp, js := get(t, hs.URL+"/session.js")
	if resp.StatusCode != http.StatusOK || !strings.Contains(js, "HoldlineTimeline.mount(") || !strings.Contains(js, "/events") {
		t.Errorf("GET /session.js: %d; it must draw the timeline from the event stream", resp.StatusCode)
	}
	// The client's own page is still the client.
	_, index := get(t, hs.URL+"/")
	if !strings.Contains(index, `src="app.js"`) {
		t.Error("GET / no longer serves the web client")
	}
	if !strings.Contains(index, `id="open-timeline"`) {
		t.Error("the web client has no link to the session's lanes view")
	}
}
