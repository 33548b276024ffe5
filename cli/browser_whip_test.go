package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// whipResult is what test/browser/whip.mjs prints.
type whipResult struct {
	OK          bool    `json:"ok"`
	Error       string  `json:"error"`
	Resource    string  `json:"resource"`
	HeardEnergy float64 `json:"heardEnergy"`
	Context     string  `json:"context"`
	States      []string
	Requests    []struct {
		Method, URL string
		Status      int
	}
}

// A third-party WHIP client (whip-whep from npm, as published) in Chromium,
// on a page of another origin, against serve's WHIP endpoint with a token:
// the cross-origin offer is answered 201 with a Location the client
// resolves, its trickle PATCH gets 501 and the client goes on, the call
// connects with the candidates of the answer, the agent is heard and the
// caller's request booked, and the client's DELETE (200) ends the session.
func TestBrowserWHIPClientFromNPMPublishesIsAnsweredAndEnds(t *testing.T) {
	node, _ := needBrowser(t)
	dir, _ := filepath.Abs("../test/browser")
	whipJS := filepath.Join(dir, "node_modules", "whip-whep", "whip.js")
	if _, err := os.Stat(whipJS); err != nil {
		t.Fatalf("whip-whep is missing (npm ci in test/browser): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const token = "whip-test-token"
	server := serveForBrowserWith(t, ctx, token)

	// The client's page, on an origin of its own.
	mux := http.NewServeMux()
	mux.HandleFunc("/whip.html", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(dir, "whip.html")) })
	mux.HandleFunc("/whip.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, whipJS) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pages := &http.Server{Handler: mux}
	go pages.Serve(ln)
	defer pages.Close()
	pageURL := "http://" + ln.Addr().String() + "/whip.html"

	// The caller speaks once, after the greeting, and waits.
	wav := callerWAV(t, "Book a table for two at seven.", 4, 40)
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "whip.mjs"), pageURL, server+"/v1/sessions", token, wav)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("browser log:\n%s", stderr.String())
	var r whipResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("whip.mjs: %v; output %q", runErr, stdout.String())
	}
	if !r.OK {
		t.Fatalf("in the browser: %s", r.Error)
	}
	var statuses []string
	for _, q := range r.Requests {
		statuses = append(statuses, q.Method+" "+strings.TrimPrefix(q.URL, server)+" "+http.StatusText(q.Status))
	}
	t.Logf("the client's requests: %q; connection states %q; agent audio energy %.3f", statuses, r.States, r.HeardEnergy)
	want := map[string]int{http.MethodPost: http.StatusCreated, http.MethodDelete: http.StatusOK}
	for _, q := range r.Requests {
		if code, ok := want[q.Method]; ok && q.Status == code {
			delete(want, q.Method)
		}
		if q.Method == http.MethodPatch && q.Status != http.StatusNotImplemented {
			t.Errorf("PATCH %s: %d; want 501 (no trickle ICE)", q.URL, q.Status)
		}
	}
	if len(want) > 0 {
		t.Errorf("requests %q lack %v", statuses, want)
	}
	if !strings.HasPrefix(r.Resource, server+"/v1/sessions/s_") {
		t.Errorf("the client's resource URL is %q", r.Resource)
	}
	if r.HeardEnergy <= 0.01 {
		t.Errorf("the agent's audio energy at the client: %.3f", r.HeardEnergy)
	}
	if !strings.Contains(r.Context, "book a table for two at seven") || !strings.Contains(r.Context, `"name":"book_table","output"`) {
		t.Errorf("the session's context does not hold the caller's request and the booking:\n%s", r.Context)
	}
	// The DELETE ended the session.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Sessions []struct{ ID string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Sessions) != 0 {
		t.Errorf("sessions after the client's DELETE: %+v, %v; want none", list.Sessions, err)
	}
}
