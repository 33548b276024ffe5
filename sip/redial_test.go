package sip_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/tools"
)

// severableStore is a worker's way to a shared store, which a test can
// sever as the worker's death would: from then on nothing the worker does
// reaches the store (no checkpoint, no renewal, no clean-up).
type severableStore struct {
	store.Store
	severed atomic.Bool
}

var errSevered = errors.New("the worker is dead")

func (s *severableStore) check() error {
	if s.severed.Load() {
		return errSevered
	}
	return nil
}

func (s *severableStore) Acquire(ctx context.Context, session, owner string, ttl time.Duration) (store.Lease, error) {
	if err := s.check(); err != nil {
		return store.Lease{}, err
	}
	return s.Store.Acquire(ctx, session, owner, ttl)
}

func (s *severableStore) Takeover(ctx context.Context, session, owner string, ttl time.Duration) (store.Lease, error) {
	if err := s.check(); err != nil {
		return store.Lease{}, err
	}
	return s.Store.Takeover(ctx, session, owner, ttl)
}

func (s *severableStore) Release(ctx context.Context, l store.Lease) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Release(ctx, l)
}

func (s *severableStore) Save(ctx context.Context, l store.Lease, data []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Save(ctx, l, data)
}

func (s *severableStore) Delete(ctx context.Context, l store.Lease) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Delete(ctx, l)
}

func (s *severableStore) Append(ctx context.Context, l store.Lease, r tools.Record) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Append(ctx, l, r)
}

func (s *severableStore) PutAlias(ctx context.Context, name, session string, ttl time.Duration) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.PutAlias(ctx, name, session, ttl)
}

// Close leaves the shared store open: the test closes it.
func (s *severableStore) Close() error { return nil }

// redialWorker is a worker answering with a desk agent: it greets a new
// call, answers a key press, and records its events and model requests.
type redialWorker struct {
	addr  netip.AddrPort
	rec   *recorder
	model *scripted.LLM
}

func startRedialWorker(t *testing.T, st store.Store, name, answer string) *redialWorker {
	t.Helper()
	key := handoff.Key{ID: "k", Secret: []byte("a snapshot key for the sip tests")}
	w := &redialWorker{rec: &recorder{}}
	w.model = scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		items := req.Context.Items
		switch {
		case strings.Contains(req.Instructions, "called back"):
			return scripted.Response{Text: "Sorry, we were cut off. " + answer}
		case len(items) > 0 && strings.HasPrefix(items[len(items)-1].Text, "Pressed"):
			return scripted.Response{Text: "You pressed a key. " + answer}
		}
		return scripted.Response{Text: answer}
	})
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithWordsPerSecond(10))
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{Name: "desk", Model: w.model, TTS: voice, STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				w.rec.attach(s)
				if s.Restored() {
					return nil
				}
				return s.GenerateReply(ctx, "Greet the caller.")
			}}, nil, nil
	}
	_, w.addr = serveAgent(t, newAgent, sip.WithStore(st, name, key))
	return w
}

// waitFor waits up to 10 s for an event of kind whose text contains text.
func (r *recorder) waitFor(t *testing.T, kind events.Kind, text string) events.Event {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		for _, e := range r.evs {
			if e.Kind == kind && strings.Contains(e.Text, text) {
				r.mu.Unlock()
				return e
			}
		}
		r.mu.Unlock()
	}
	t.Fatalf("no %s %q: %v", kind, text, r.kinds())
	return events.Event{}
}

// checkpointed waits until a checkpoint covers event e.
func (r *recorder) checkpointed(t *testing.T, e events.Event) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		r.mu.Lock()
		for _, c := range r.evs {
			if c.Kind == events.CheckpointSaved && uint64(c.Count) >= e.Seq {
				r.mu.Unlock()
				return
			}
		}
		r.mu.Unlock()
	}
	t.Fatalf("no checkpoint after %s: %v", e.Kind, r.kinds())
}

// heardBefore reports whether the model's first request had an item
// containing text: what the conversation carried into the call.
func heardBefore(m *scripted.LLM, text string) bool {
	reqs := m.Requests()
	if len(reqs) == 0 {
		return false
	}
	for _, it := range reqs[0].Context.Items {
		if strings.Contains(it.Text, text) {
			return true
		}
	}
	return false
}

// A worker dies mid-call (cut off from the store, as a dead process is)
// and the caller dials the same number again: the other worker answers
// once the dead worker's lease has run out, picks the conversation up
// with everything said so far, and its agent speaks first without
// greeting again. When that call ends normally, dialling again starts
// afresh.
func TestRedialAfterAWorkerDiesPicksTheCallUp(t *testing.T) {
	shared, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	toA := &severableStore{Store: shared}
	a := startRedialWorker(t, toA, "worker-a", "Worker A here.")
	b := startRedialWorker(t, shared, "worker-b", "Worker B here.")

	l := listen(t)
	first := setUpRawCall(t, a.addr, "redial-1", l.port())
	a.rec.waitFor(t, events.PlayoutDone, "Worker A here.")
	first.request("INFO", "application/dtmf-relay", "Signal=1\nDuration=160\n")
	a.rec.checkpointed(t, a.rec.waitFor(t, events.PlayoutDone, "You pressed a key."))
	toA.severed.Store(true) // worker A dies

	// The caller dials again, and the same line's INVITE comes twice at
	// once (two phones on one number): one picks the call up, the other
	// is answered afresh.
	dialled := time.Now()
	second, twin := dialRaw(t, b.addr), dialRaw(t, b.addr)
	second.send(invite(second.local(), "redial-2", "application/sdp", fmt.Sprintf(pcmuOffer, l.port())))
	twin.send(invite(twin.local(), "redial-twin", "application/sdp", fmt.Sprintf(pcmuOffer, l.port())))
	var calls []*rawCall
	for _, c := range []struct {
		u  *rawUA
		id string
	}{{second, "redial-2"}, {twin, "redial-twin"}} {
		res := c.u.final(15 * time.Second)
		if !strings.HasPrefix(res, "SIP/2.0 200 ") {
			t.Fatalf("the redial %s was answered %q", c.id, res)
		}
		rc := &rawCall{u: c.u, id: c.id, toTag: header(res, "To"), answer: res, cseq: 1}
		rc.request("ACK", "", "")
		calls = append(calls, rc)
	}
	answered := time.Since(dialled)
	b.rec.waitFor(t, events.PlayoutDone, "Sorry, we were cut off.")
	b.rec.waitFor(t, events.PlayoutDone, "Worker B here.")
	var pickedUp, fresh int
	for _, req := range b.model.Requests() {
		switch {
		case strings.Contains(req.Instructions, "called back"):
			pickedUp++
			had := func(text string) bool {
				return slices.ContainsFunc(req.Context.Items, func(it llm.Item) bool { return strings.Contains(it.Text, text) })
			}
			if !had("Pressed 1") || !had("You pressed a key. Worker A here.") {
				t.Errorf("the picked-up call's first request lacks the call so far: %+v", req.Context.Items)
			}
		case strings.Contains(req.Instructions, "Greet the caller."):
			fresh++
		}
	}
	if pickedUp != 1 || fresh != 1 {
		t.Errorf("of the two redials %d picked the call up and %d were greeted afresh; want one each", pickedUp, fresh)
	}
	t.Logf("the redial was answered %v after dialling (worker A's lease had to run out)", answered.Round(time.Millisecond))
	for _, c := range calls {
		c.request("BYE", "", "")
		c.u.final(3 * time.Second)
	}

	// The call ended normally: a new call from the line is a new
	// conversation.
	before := len(b.model.Requests())
	third := setUpRawCallWithin(t, b.addr, "redial-3", l.port(), 5*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for len(b.model.Requests()) == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	reqs := b.model.Requests()
	if len(reqs) == before {
		t.Fatal("worker B never answered the third call")
	}
	for _, it := range reqs[before].Context.Items {
		if strings.Contains(it.Text, "Pressed 1") {
			t.Errorf("a call after one that ended normally picked the old conversation up: %+v", reqs[before].Context.Items)
		}
	}
	if !strings.Contains(reqs[before].Instructions, "Greet the caller.") {
		t.Errorf("the third call was not greeted afresh: %q", reqs[before].Instructions)
	}
	third.request("BYE", "", "")
	third.u.final(3 * time.Second)
}

// A second call from a line whose first call is live on another worker is
// answered afresh: it never takes the live call's conversation.
func TestSecondCallFromTheSameLineLeavesTheLiveCallAlone(t *testing.T) {
	shared, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	a := startRedialWorker(t, shared, "worker-a", "Worker A here.")
	b := startRedialWorker(t, shared, "worker-b", "Worker B here.")
	l := listen(t)
	first := setUpRawCall(t, a.addr, "line-1", l.port())
	a.rec.checkpointed(t, a.rec.waitFor(t, events.PlayoutDone, "Worker A here."))
	second := setUpRawCallWithin(t, b.addr, "line-2", l.port(), 15*time.Second)
	b.rec.waitFor(t, events.PlayoutDone, "Worker B here.")
	if heardBefore(b.model, "Worker A here.") {
		t.Error("the second call took the live call's conversation")
	}
	if b.rec.find(events.SessionResumed, "") {
		t.Error("the second call resumed a session")
	}
	// The first call is still A's: it goes on, and its checkpoints too.
	if a.rec.find(events.CheckpointFailed, "") {
		t.Errorf("the live call lost its lease: %v", a.rec.kinds())
	}
	first.request("BYE", "", "")
	second.request("BYE", "", "")
}

// The caller's line is its number wherever the call comes in from, and
// the number it called; a SIP address counts with its domain; a trunk's
// P-Asserted-Identity is preferred to From; a withheld number has no line.
func TestCallersLineIsTheirNumberAndTheNumberCalled(t *testing.T) {
	req := func(from, to, extra string) string {
		return "INVITE sip:" + to + "@10.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.9;branch=z9hG4bK-1\r\nFrom: " + from +
			";tag=1\r\nTo: <sip:" + to + "@10.0.0.1>\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\n" + extra + "Content-Length: 0\r\n\r\n"
	}
	key := func(raw string) (string, bool) {
		t.Helper()
		k, ok, err := sip.LineKey(raw)
		if err != nil {
			t.Fatal(err)
		}
		return k, ok
	}
	base, ok := key(req("<sip:+14155550100@gw1.carrier.example>", "+18005550199", ""))
	if !ok {
		t.Fatal("a caller with a number has no line")
	}
	for _, c := range []struct {
		name     string
		raw      string
		same, ok bool
	}{
		{"the same number through another gateway", req(`"Ann" <sip:+1-415-555-0100@gw2.carrier.example:5080>`, "+18005550199", ""), true, true},
		{"the same number calling another number", req("<sip:+14155550100@gw1.carrier.example>", "+18005550111", ""), false, true},
		{"another number", req("<sip:+14155550101@gw1.carrier.example>", "+18005550199", ""), false, true},
		{"the number asserted by the trunk", req("<sip:unknown@gw1.carrier.example>", "+18005550199", "P-Asserted-Identity: <sip:+14155550100@trunk.example>\r\n"), true, true},
		{"a SIP address in another domain", req("<sip:ann@example.com>", "+18005550199", ""), false, true},
		{"a withheld number", req("<sip:anonymous@anonymous.invalid>", "+18005550199", ""), false, false},
	} {
		k, ok := key(c.raw)
		if ok != c.ok || (k == base) != c.same {
			t.Errorf("%s: line %q (known %v); same as the first call's: %v, want %v", c.name, k, ok, k == base, c.same)
		}
	}
	a, _ := key(req("<sip:ann@example.com>", "desk", ""))
	b, _ := key(req("<sip:ann@example.org>", "desk", ""))
	if a == b {
		t.Error("ann@example.com and ann@example.org share a line")
	}
}
