package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/webrtc/rtctest"
)

func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

func postDrain(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/admin/drain", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// /readyz says whether the worker takes calls, for a load balancer's
// health check; the admin API starts a drain only with the admin token;
// a draining worker refuses new sessions with 503 and Retry-After, while
// /healthz (liveness) stays up.
func TestReadyzAndTheAdminDrain(t *testing.T) {
	hs, _, srv := newServer(t, server.WithAdminToken("admin-secret"), server.WithToken("session-token"))
	if code, body := getText(t, hs.URL+"/readyz"); code != http.StatusOK || body != "ready" {
		t.Fatalf("/readyz before the drain: %d %q; want 200 ready", code, body)
	}
	if code := postDrain(t, hs.URL, ""); code != http.StatusUnauthorized {
		t.Errorf("drain without a token: %d; want 401", code)
	}
	if code := postDrain(t, hs.URL, "session-token"); code != http.StatusUnauthorized {
		t.Errorf("drain with the session token: %d; want 401 (it takes the admin token)", code)
	}
	if srv.Host().Draining() {
		t.Fatal("refused drain requests started a drain")
	}
	if code := postDrain(t, hs.URL, "admin-secret"); code != http.StatusAccepted {
		t.Fatalf("drain with the admin token: %d; want 202", code)
	}
	select {
	case <-srv.Host().DrainRequested():
	default:
		t.Fatal("the admin drain did not reach the host")
	}
	if code, body := getText(t, hs.URL+"/readyz"); code != http.StatusServiceUnavailable || body != "draining" {
		t.Errorf("/readyz while draining: %d %q; want 503 draining", code, body)
	}
	if code, _ := getText(t, hs.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while draining: %d; want 200 (the process is alive)", code)
	}
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/sessions", strings.NewReader("v=0\r\n"))
	req.Header.Set("Content-Type", "application/sdp")
	req.Header.Set("Authorization", "Bearer session-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("an offer while draining: %d, Retry-After %q; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
}

// Without an admin token the admin API is off.
func TestAdminDrainIsOffWithoutItsToken(t *testing.T) {
	hs, _, srv := newServer(t)
	if code := postDrain(t, hs.URL, "anything"); code != http.StatusNotFound {
		t.Errorf("drain on a server without an admin token: %d; want 404", code)
	}
	if srv.Host().Draining() {
		t.Error("the refused drain started one")
	}
}

// frontDoor sends each request to the first worker that does not answer
// 503, as HAProxy with retry-on 503 and redispatch does.
type frontDoor struct {
	mu      sync.Mutex
	workers []string
}

func (f *frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	workers := append([]string(nil), f.workers...)
	f.mu.Unlock()
	var last *http.Response
	for _, base := range workers {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		if res.StatusCode == http.StatusServiceUnavailable {
			res.Body.Close()
			continue
		}
		last = res
		break
	}
	if last == nil {
		http.Error(w, "no worker", http.StatusServiceUnavailable)
		return
	}
	defer last.Body.Close()
	for k, v := range last.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(last.StatusCode)
	io.Copy(w, last.Body)
}

// twoWorkers serves two workers sharing a store, behind a front door
// that tries worker A first.
func twoWorkers(t *testing.T) (hsA *httptest.Server, srvA *server.Server, hsB *httptest.Server, srvB *server.Server, door *httptest.Server) {
	t.Helper()
	st, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the servers, which clean up after their calls
	hsA, _, srvA = newServer(t, server.WithStore(st, "worker-a", snapshotKey))
	hsB, _, srvB = newServer(t, server.WithStore(st, "worker-b", snapshotKey))
	door = httptest.NewServer(&frontDoor{workers: []string{hsA.URL, hsB.URL}})
	t.Cleanup(door.Close)
	return hsA, srvA, hsB, srvB, door
}

// A draining worker moves a WebRTC call at a clean point: the client is
// told on its data channel, re-offers through the front door, and lands
// on the other worker, which takes the session over without a word. The
// booking made before is not made again, the caller's next words are
// answered there, and the caller hears the agent's line go quiet for
// well under a second.
func TestDrainMovesAWebRTCCallThroughTheFrontDoor(t *testing.T) {
	hsA, srvA, hsB, srvB, door := twoWorkers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c, err := rtctest.Dial(ctx, door.URL, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if srvA.Host().Len() != 1 {
		t.Fatal("the call did not land on worker A")
	}
	if err := c.SendText("Book a table for two at seven."); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, booked); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, kind(events.Idle)); err != nil {
		t.Fatal(err)
	}
	rep, err := srvA.Host().Drain(ctx, calls.WithMoves(true))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 1 {
		t.Fatalf("drain report %+v; want the call moved", rep)
	}
	if err := c.Wait(ctx, "the move", func(c *rtctest.Client) bool {
		m := c.Moves()
		return len(m) == 1 && (!m[0].Connected.IsZero() || m[0].Err != nil)
	}); err != nil {
		t.Fatal(err)
	}
	m := c.Moves()[0]
	if m.Err != nil {
		t.Fatalf("the client's move failed: %v", m.Err)
	}
	if srvB.Host().Len() != 1 {
		t.Fatal("the moved call is not on worker B")
	}
	for _, want := range []struct{ url, metric string }{
		{hsA.URL, `holdline_drain_state{worker="worker-a"} 2`},
		{hsA.URL, `holdline_worker_sessions{worker="worker-a"} 0`},
		{hsA.URL, `holdline_sessions_moved_total{transport="webrtc"} 1`},
		{hsB.URL, `holdline_drain_state{worker="worker-b"} 0`},
		{hsB.URL, `holdline_worker_sessions{worker="worker-b"} 1`},
	} {
		if _, body := getText(t, want.url+"/metrics"); !strings.Contains(body, want.metric) {
			t.Errorf("%s/metrics lacks %s", want.url, want.metric)
		}
	}
	moved, err := c.WaitEvent(ctx, func(e events.Event) bool {
		return e.Kind == events.SessionMoved && e.Text == "from worker-a to worker-b"
	})
	if err != nil {
		t.Fatalf("%v; events %v", err, kinds(c.Events()))
	}
	if err := c.Wait(ctx, "audio on the new connection", func(c *rtctest.Client) bool { return c.Moves()[0].Gap > 0 }); err != nil {
		t.Fatal(err)
	}
	gap := c.Moves()[0].Gap
	t.Logf("move: message to connected %v, gap the caller heard %v", m.Connected.Sub(m.At).Round(time.Millisecond), gap.Round(time.Millisecond))
	if gap > time.Second {
		t.Errorf("the caller heard nothing for %v during the move; want under a second", gap)
	}
	if err := c.SendText("Thanks, that's all."); err != nil {
		t.Fatal(err)
	}
	answer, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone && e.Seq > moved.Seq })
	if err != nil {
		t.Fatalf("no answer on worker B: %v", err)
	}
	if strings.Contains(answer.Text, "Hello") {
		t.Errorf("worker B greeted afresh: %q", answer.Text)
	}
	if n := count(c.Events(), booked); n != 1 {
		t.Errorf("%d bookings over the move; want 1", n)
	}
	select {
	case <-c.HungUp():
		t.Error("the client saw the move as a hang-up")
	default:
	}
}

// Every WebRTC call of a draining worker moves, several at once: each
// lands on the other worker in the same session with its one booking,
// and the gap each caller hears is logged (p50, p95). HOLDLINE_MOVE_CALLS
// sets how many calls (default 8).
func TestDrainMovesEveryWebRTCCall(t *testing.T) {
	n := 8
	if v, err := strconv.Atoi(os.Getenv("HOLDLINE_MOVE_CALLS")); err == nil && v > 0 {
		n = v
	}
	_, srvA, _, srvB, door := twoWorkers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clients := make([]*rtctest.Client, n)
	for i := range clients {
		c, err := rtctest.Dial(ctx, door.URL, rtctest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
		if err := c.SendText("Book a table for two at seven."); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clients {
		if _, err := c.WaitEvent(ctx, booked); err != nil {
			t.Fatal(err)
		}
	}
	if srvA.Host().Len() != n {
		t.Fatalf("%d calls on worker A; want %d", srvA.Host().Len(), n)
	}
	start := time.Now()
	rep, err := srvA.Host().Drain(ctx, calls.WithMoves(true))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if rep.Moved != n {
		t.Fatalf("drain report %+v; want all %d calls moved", rep, n)
	}
	var gaps []time.Duration
	for i, c := range clients {
		if err := c.Wait(ctx, "the move", func(c *rtctest.Client) bool {
			m := c.Moves()
			return len(m) == 1 && (m[0].Err != nil || m[0].Gap > 0)
		}); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		m := c.Moves()[0]
		if m.Err != nil {
			t.Fatalf("client %d's move: %v", i, m.Err)
		}
		gaps = append(gaps, m.Gap)
		t.Logf("client %d: gather %v, answer %v, connect %v", i, m.Gathered.Sub(m.At).Round(time.Millisecond), m.Answered.Sub(m.Gathered).Round(time.Millisecond), m.Connected.Sub(m.Answered).Round(time.Millisecond))
		if k := count(c.Events(), booked); k != 1 {
			t.Errorf("client %d: %d bookings; want 1", i, k)
		}
	}
	if srvB.Host().Len() != n {
		t.Errorf("%d calls on worker B after the drain; want %d", srvB.Host().Len(), n)
	}
	slices.Sort(gaps)
	q := func(p float64) time.Duration {
		return gaps[min(len(gaps)-1, int(p*float64(len(gaps))))].Round(time.Millisecond)
	}
	t.Logf("%d calls moved in %v; gap the callers heard p50 %v, p95 %v, max %v", n, took.Round(time.Millisecond), q(0.5), q(0.95), q(1))
	if q(0.95) > time.Second {
		t.Errorf("move gap p95 %v; want at most a second", q(0.95))
	}
}
