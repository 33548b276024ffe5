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
	for _, want := range []string{`<script src="/timeline-layout.js"`, `<script src="/timeline.js"`, `<script src="/session.js"`, `href="/timeline.css"`, `id="timeline"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	script, style := server.TimelineAssets()
	// The page loads the timeline's scripts, and inspect inlines them, in
	// the same order: what the two serve is the same.
	var served strings.Builder
	for _, path := range []string{"/timeline-layout.js", "/timeline.js"} {
		resp, body := get(t, hs.URL+path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		served.WriteString(body + "\n")
	}
	if served.String() != string(script) {
		t.Errorf("the timeline's scripts served are %d bytes; want the %d inspect inlines", served.Len(), len(script))
	}
	if resp, body := get(t, hs.URL+"/timeline.css"); resp.StatusCode != http.StatusOK || body != string(style) {
		t.Errorf("GET /timeline.css: %d, %d bytes; want the timeline's %d", resp.StatusCode, len(body), len(style))
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
