package calls_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/calls/callstest"
	"github.com/holdline/holdline/carrier"
	"github.com/holdline/holdline/carrier/carriertest"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// caller is one call placed by a transport's client.
type caller interface {
	// hangUp is the caller ending the call, as the transport does.
	hangUp(t *testing.T)
	// drop and restore lose and bring back the caller's connection; false
	// for a transport whose calls have none to lose (a phone call that is
	// cut is over, and picked up again by a redial).
	drop(t *testing.T) bool
	restore(t *testing.T) bool
	// hungUpOn waits until the caller's side has seen the agent's side
	// hang up (the host ended the call), as the transport tells it.
	hungUpOn(t *testing.T)
}

// transport is one row of the table: how to serve a transport on a host,
// and how its client places a call.
type transport struct {
	kind  string
	serve func(t *testing.T, h *calls.Host) (dial func(t *testing.T) caller)
}

// transports are every transport the host carries. A new transport gets
// the lifecycle checks by adding its row.
var transports = []transport{
	{kind: callstest.Kind, serve: serveLoopback},
	{kind: "webrtc", serve: serveWebRTC},
	{kind: "sip", serve: serveSIP},
	{kind: "twilio", serve: serveTwilio},
}

// TestEveryTransportHasTheSameLifecycle runs the host's lifecycle checks
// against every transport through the shared interface: a call starts and
// is counted by transport; its events and context are read over the HTTP
// API while it is live; a connection lost and restored is told to the
// session; a transfer's handoff token leads another worker to the
// session, with the transport's facts; a call the caller ends is deleted
// from the store; an event sink given in the host's session options sees
// each call's every event, from the first (the greeting's) to the last;
// the agent hanging up (end_call) hangs up the transport's side once the
// goodbye has played, and deletes the call; a host that closes releases
// its calls in the store, for another worker to take over.
func TestEveryTransportHasTheSameLifecycle(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.kind, func(t *testing.T) {
			st, err := store.OpenFile(filepath.Join(t.TempDir(), "store"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			sink := newSinkLog()
			h := newHost(t, st, "worker-a", calls.WithSessionOptions(runtime.WithEventSink(sink.add)))
			dial := tr.serve(t, h)
			api := httptest.NewServer(apiOf(t, h))
			t.Cleanup(api.Close)

			// Start: the call is on the host, by transport, and counted.
			c1 := dial(t)
			id := waitCall(t, h, tr.kind)
			if m := metricsText(t, h); !strings.Contains(m, fmt.Sprintf(`holdline_sessions_active{transport=%q} 1`, tr.kind)) {
				t.Errorf("metrics do not count the call by transport:\n%s", grepLines(m, "holdline_sessions_active"))
			}

			// The HTTP API reaches it: listed with its transport, its
			// events and its context read while it is live.
			var list struct{ Sessions []calls.Info }
			getJSON(t, api.URL+"/v1/sessions", &list)
			if len(list.Sessions) != 1 || list.Sessions[0].ID != id || list.Sessions[0].Transport != tr.kind {
				t.Errorf("GET /v1/sessions = %+v; want the one %s call %s", list.Sessions, tr.kind, id)
			}
			if kinds := sseKinds(t, api.URL+"/v1/sessions/"+id+"/events", events.PlayoutStarted); !kinds[events.SessionStarted] {
				t.Errorf("event stream of %s lacks session_started: %v", id, kinds)
			}
			var cc llm.ChatContext
			getJSON(t, api.URL+"/v1/sessions/"+id+"/context", &cc)
			if len(cc.Items) == 0 {
				t.Errorf("context of %s is empty; want the greeting", id)
			}

			// Lost and restored.
			if c1.drop(t) {
				waitEvent(t, h, id, events.TransportLost)
				if h.Lookup(id).Info().Connected {
					t.Error("connected after the connection dropped")
				}
				if !c1.restore(t) {
					t.Fatal("dropped but cannot restore")
				}
				waitEvent(t, h, id, events.TransportRestored)
			}

			// A transfer's handoff token leads another worker to the
			// session, sealed with the transport's facts.
			other := newHost(t, st, "worker-b")
			tok, err := h.Lookup(id).HandoffToken(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			snap, err := other.Resume(context.Background(), tok)
			if err != nil {
				t.Fatalf("another worker resuming the handoff token: %v", err)
			}
			if snap.State.SessionID != id || snap.Transport["kind"] != tr.kind {
				t.Errorf("handoff snapshot is of %s over %q; want %s over %q", snap.State.SessionID, snap.Transport["kind"], id, tr.kind)
			}

			// The caller ends the call: it is over everywhere.
			c1.hangUp(t)
			waitGone(t, h, id)
			if _, err := st.Load(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("checkpoint of an ended call: %v; want ErrNotFound", err)
			}
			if m := metricsText(t, h); !strings.Contains(m, fmt.Sprintf(`holdline_sessions_active{transport=%q} 0`, tr.kind)) ||
				!strings.Contains(m, fmt.Sprintf(`holdline_sessions_total{transport=%q} 1`, tr.kind)) {
				t.Errorf("metrics after the call ended:\n%s", grepLines(m, "holdline_sessions_"))
			}

			// The host's event sink saw the whole call, from its first
			// event: the greeting's too.
			sink.checkWholeCall(t, id, "")

			// The agent hangs up: its goodbye plays, then the transport
			// hangs up its side, and the call is over everywhere.
			c3 := dial(t)
			id3 := waitCall(t, h, tr.kind)
			waitEvent(t, h, id3, events.PlayoutDone) // the greeting
			hc := h.Lookup(id3)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			r, err := hc.Session().Ask(ctx, "Goodbye.")
			cancel()
			if !errors.Is(err, runtime.ErrSessionClosed) || r.Heard != "Thanks for calling, goodbye!" {
				t.Errorf("the agent's goodbye: %q, %v; want it heard, and the session closed", r.Heard, err)
			}
			c3.hungUpOn(t)
			waitGone(t, h, id3)
			if got := hc.Reason(); got != "the caller said goodbye" {
				t.Errorf("the call ended for %q; want the agent's reason", got)
			}
			if _, err := st.Load(context.Background(), id3); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("checkpoint of a call the agent ended: %v; want ErrNotFound", err)
			}
			sink.checkWholeCall(t, id3, "the caller said goodbye")

			// The host closes (the worker goes away): its call is released
			// in the store, for another worker to take over at once.
			dial(t)
			id2 := waitCall(t, h, tr.kind)
			waitCheckpoint(t, st, id2)
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Load(context.Background(), id2); err != nil {
				t.Errorf("checkpoint of a released call: %v", err)
			}
			l, err := st.Acquire(context.Background(), id2, "worker-b", time.Second)
			if err != nil {
				t.Errorf("another worker taking a released call's lease: %v", err)
			} else {
				_ = st.Release(context.Background(), l)
			}
		})
	}
}

var testKey = handoff.Key{ID: "k1", Secret: []byte("a snapshot key for the calls tests")}

func newHost(t *testing.T, st store.Store, worker string, opts ...calls.Option) *calls.Host {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := calls.New(newAgent, append([]calls.Option{calls.WithStore(st, worker, testKey), calls.WithLogger(logger)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// newAgent greets and answers whatever is said, but "Goodbye.": that it
// answers with a goodbye, and hangs up.
func newAgent(context.Context) (*runtime.Agent, func(), error) {
	voice, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithWordsPerSecond(20))
	if err != nil {
		return nil, nil, err
	}
	model := scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		if items := req.Context.Items; len(items) > 0 && items[len(items)-1].Text == "Goodbye." {
			return scripted.Response{Text: "Thanks for calling, goodbye!", ToolCalls: []scripted.Call{
				{Name: runtime.EndCallName, Args: map[string]string{"reason": "the caller said goodbye"}}}}
		}
		return scripted.Response{Text: "Hello, how can I help?"}
	})
	return &runtime.Agent{Name: "desk", Model: model, TTS: voice, STT: scripted.NewSTT(), Tools: []*tools.Tool{runtime.EndCallTool()},
		OnEnter: func(ctx context.Context, s *runtime.Session) error {
			if s.Restored() {
				return nil
			}
			return s.GenerateReply(ctx, "Greet the caller.")
		}}, nil, nil
}

// apiOf is the HTTP API of the host's calls.
func apiOf(t *testing.T, h *calls.Host) *server.Server {
	srv, err := server.New(newAgent, server.WithHost(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

type loopbackCaller struct{ c *callstest.Call }

func (l loopbackCaller) hangUp(*testing.T)       { l.c.End("the caller hung up") }
func (l loopbackCaller) drop(*testing.T) bool    { l.c.Drop(); return true }
func (l loopbackCaller) restore(*testing.T) bool { l.c.Restore(); return true }
func (l loopbackCaller) hungUpOn(t *testing.T)   { waitClosed(t, l.c.HungUp(), "the loopback line") }

func serveLoopback(t *testing.T, h *calls.Host) func(t *testing.T) caller {
	return func(t *testing.T) caller {
		c, err := callstest.Dial(context.Background(), h, nil)
		if err != nil {
			t.Fatal(err)
		}
		return loopbackCaller{c}
	}
}

type webrtcCaller struct {
	base string
	c    *rtctest.Client
}

func (w *webrtcCaller) hangUp(t *testing.T) {
	if err := w.c.Delete(context.Background(), w.base, ""); err != nil {
		t.Fatal(err)
	}
	w.c.Close()
}

func (w *webrtcCaller) drop(*testing.T) bool { w.c.Close(); return true }

func (w *webrtcCaller) hungUpOn(t *testing.T) {
	waitClosed(t, w.c.HungUp(), "the browser's connection")
}

func (w *webrtcCaller) restore(t *testing.T) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := rtctest.Dial(ctx, w.base, rtctest.Options{ResumeToken: w.c.ResumeToken})
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	t.Cleanup(func() { c.Close() })
	return true
}

func serveWebRTC(t *testing.T, h *calls.Host) func(t *testing.T) caller {
	srv, err := server.New(newAgent, server.WithHost(h), server.WithResumeTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return func(t *testing.T) caller {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := rtctest.Dial(ctx, hs.URL, rtctest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return &webrtcCaller{base: hs.URL, c: c}
	}
}

type sipCaller struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the placed call returned, with err
	err    error
}

func (s *sipCaller) hangUp(t *testing.T) {
	s.cancel()
	select {
	case <-s.done:
		if s.err != nil && !errors.Is(s.err, context.Canceled) {
			t.Errorf("placed call: %v", s.err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the caller's side did not hang up")
	}
}

func (*sipCaller) drop(*testing.T) bool    { return false }
func (*sipCaller) restore(*testing.T) bool { return false }

// hungUpOn: the placed call returns once the far end's BYE came.
func (s *sipCaller) hungUpOn(t *testing.T) {
	waitClosed(t, s.done, "the placed phone call")
	if s.err != nil {
		t.Errorf("placed call: %v", s.err)
	}
}

func serveSIP(t *testing.T, h *calls.Host) func(t *testing.T) caller {
	agentSide, err := sip.New(newAgent, sip.WithHost(h))
	if err != nil {
		t.Fatal(err)
	}
	at := listenSIP(t, agentSide)
	// The caller is another SIP user agent: a Holdline server placing the
	// call, with an agent of its own that only listens.
	callerSide, err := sip.New(func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000))
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{Name: "caller", Model: scripted.NewLLM(), TTS: voice, STT: scripted.NewSTT()}, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listenSIP(t, callerSide)
	return func(t *testing.T) caller {
		ctx, cancel := context.WithCancel(context.Background())
		c := &sipCaller{cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(c.done)
			c.err = callerSide.Call(ctx, "sip:agent@"+at)
		}()
		t.Cleanup(func() {
			cancel()
			<-c.done
		})
		return c
	}
}

// twilioCaller is a phone on a Twilio line (carriertest): a stream that
// drops is not restored (a carrier's call that is cut is over).
type twilioCaller struct{ p *carriertest.Phone }

func (c twilioCaller) hangUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.p.Hangup(ctx); err != nil {
		t.Fatal(err)
	}
}
func (twilioCaller) drop(*testing.T) bool    { return false }
func (twilioCaller) restore(*testing.T) bool { return false }
func (c twilioCaller) hungUpOn(t *testing.T) { waitClosed(t, c.p.Closed(), "the Twilio stream") }

func serveTwilio(t *testing.T, h *calls.Host) func(t *testing.T) caller {
	const token = "transports-test-token"
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := httptest.NewServer(carrier.NewTwilio(carrier.NewTransport(h, carrier.WithLogger(quiet)),
		carrier.WithTwilioAccount("ACx", token), carrier.WithTwilioLogger(quiet)))
	t.Cleanup(srv.Close)
	return func(t *testing.T) caller {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		p, err := carriertest.Dial(ctx, carriertest.Config{BaseURL: srv.URL, AuthToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return twilioCaller{p}
	}
}

// listenSIP serves s on a UDP port of 127.0.0.1 until the test ends.
func listenSIP(t *testing.T, s *sip.Server) string {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeUDP(ctx, conn) }()
	t.Cleanup(func() {
		s.Close()
		cancel()
		<-done
	})
	return conn.LocalAddr().String()
}

// waitCall waits for a call of kind on h that has connected, other than
// those seen before, and returns its id.
func waitCall(t *testing.T, h *calls.Host, kind string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, c := range h.List() {
			if c.Transport == kind && c.Connected {
				return c.ID
			}
		}
	}
	t.Fatalf("no connected %s call on the host: %+v", kind, h.List())
	return ""
}

// waitClosed waits for ch, what says that what hung up.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Errorf("%s was not hung up", what)
	}
}

// sinkLog is an event sink for every call of a host, by session.
type sinkLog struct {
	mu   sync.Mutex
	evs  map[string][]events.Event
	wake chan struct{}
}

func newSinkLog() *sinkLog {
	return &sinkLog{evs: map[string][]events.Event{}, wake: make(chan struct{})}
}

func (l *sinkLog) add(e events.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs[e.Session] = append(l.evs[e.Session], e)
	close(l.wake)
	l.wake = make(chan struct{})
}

// checkWholeCall checks that the sink got every event of session id, in
// order and without a gap, from session_started (the greeting's events
// among them) to session_ended with reason.
func (l *sinkLog) checkWholeCall(t *testing.T, id, reason string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	var evs []events.Event
	for {
		l.mu.Lock()
		evs, wake := slices.Clone(l.evs[id]), l.wake
		l.mu.Unlock()
		if n := len(evs); n > 0 && evs[n-1].Kind == events.SessionEnded {
			break
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("the sink has no session_ended for %s (%d events)", id, len(evs))
		}
	}
	l.mu.Lock()
	evs = slices.Clone(l.evs[id])
	l.mu.Unlock()
	if evs[0].Kind != events.SessionStarted || evs[0].Seq != 1 {
		t.Errorf("the sink's first event of %s is %s (seq %d); want session_started, seq 1", id, evs[0].Kind, evs[0].Seq)
	}
	greeted := false
	for i, e := range evs {
		if i > 0 && e.Seq != evs[i-1].Seq+1 {
			t.Errorf("the sink got event %d of %s after %d: events were lost", e.Seq, id, evs[i-1].Seq)
			break
		}
		greeted = greeted || e.Kind == events.PlayoutStarted && e.Epoch == 1
	}
	if !greeted {
		t.Errorf("the sink did not see the greeting of %s play", id)
	}
	if last := evs[len(evs)-1]; last.Reason != reason {
		t.Errorf("the sink's session_ended of %s has reason %q; want %q", id, last.Reason, reason)
	}
}

func waitGone(t *testing.T, h *calls.Host, id string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if h.Lookup(id) == nil {
			return
		}
	}
	t.Fatalf("call %s still on the host", id)
}

func waitEvent(t *testing.T, h *calls.Host, id string, kind events.Kind) {
	t.Helper()
	c := h.Lookup(id)
	if c == nil {
		t.Fatalf("no call %s", id)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		evs, _, _ := c.Events(0)
		for _, e := range evs {
			if e.Kind == kind {
				return
			}
		}
	}
	t.Fatalf("call %s has no %s event", id, kind)
}

func waitCheckpoint(t *testing.T, st store.Store, id string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := st.Load(context.Background(), id); err == nil {
			return
		}
	}
	t.Fatalf("no checkpoint of %s", id)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, b)
	}
}

// sseKinds reads the event stream at url until an event of kind until (or
// 20 s), and returns the kinds seen.
func sseKinds(t *testing.T, url string, until events.Kind) map[events.Kind]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	kinds := map[events.Kind]bool{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			kinds[events.Kind(k)] = true
			if events.Kind(k) == until {
				break
			}
		}
	}
	return kinds
}

func metricsText(t *testing.T, h *calls.Host) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
