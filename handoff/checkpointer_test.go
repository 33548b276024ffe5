package handoff

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/store"
)

// flakyStore fails every Save while down is set.
type flakyStore struct {
	store.Store
	down atomic.Bool
}

func (f *flakyStore) Save(ctx context.Context, l store.Lease, data []byte) error {
	if f.down.Load() {
		return errors.New("store unreachable")
	}
	return f.Store.Save(ctx, l, data)
}

type worker struct {
	s    *runtime.Session
	cp   *Checkpointer
	evs  chan events.Event
	stop context.CancelFunc
	done chan error // Run of the checkpointer
}

// startWorker runs a text session for session id under owner, checkpointed
// to st; from, if set, is the state it resumes from.
func startWorker(t *testing.T, st store.Store, owner string, from *engine.State, answers ...string) *worker {
	t.Helper()
	var responses []scripted.Response
	for _, a := range answers {
		responses = append(responses, scripted.Response{Text: a})
	}
	cp := NewCheckpointer(st, testKey, "sess_1", owner, WithLeaseTTL(time.Second), WithTransport(map[string]string{"kind": "test"}))
	if err := cp.Acquire(context.Background()); err != nil {
		t.Fatalf("%s: %v", owner, err)
	}
	opts := []runtime.Option{runtime.WithID("sess_1"), engine.WithCheckpoints(cp.Offer), runtime.WithJournal(cp.Journal())}
	if from != nil {
		opts = append(opts, engine.WithState(*from))
	}
	s, err := runtime.New(&runtime.Agent{Name: "desk", Model: scripted.NewLLM(responses...)}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{s: s, cp: cp, evs: make(chan events.Event, 1024), done: make(chan error, 1)}
	cp.report = func(seq uint64, err error) { _ = s.CheckpointDone(context.Background(), seq, err) }
	sub := s.Subscribe(1024)
	go func() {
		for e := range sub.C() {
			w.evs <- e
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	sessDone := make(chan struct{})
	go func() { _ = s.Run(ctx); close(sessDone) }()
	go func() { w.done <- cp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-sessDone })
	return w
}

func (w *worker) await(t *testing.T, ok func(events.Event) bool) events.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-w.evs:
			if ok(e) {
				return e
			}
		case <-timeout:
			t.Fatal("timed out waiting for an event")
		}
	}
}

func kind(k events.Kind) func(events.Event) bool {
	return func(e events.Event) bool { return e.Kind == k }
}

// A session checkpointed to the file store is resumed by another worker
// once the first lets go of it, with what was said; the first, still
// running, is refused its next write and told it lost the session.
func TestCheckpointedSessionResumesOnAnotherWorker(t *testing.T) {
	st, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	a := startWorker(t, st, "worker-a", nil, "Your table is booked.")
	if err := a.s.Inject(ctx, "Book a table for two."); err != nil {
		t.Fatal(err)
	}
	a.await(t, kind(events.Idle))
	a.await(t, kind(events.CheckpointSaved))

	// Worker B cannot take a session A holds.
	if err := NewCheckpointer(st, testKey, "sess_1", "worker-b").Acquire(ctx); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("B took a held session: %v", err)
	}
	// A's lease lapses (A hung); B takes the session over from the store.
	if err := a.cp.Release(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := Resume(ctx, st, "sess_1", testKey)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Transport["kind"] != "test" || len(snap.State.Chat) != 2 {
		t.Fatalf("resumed snapshot: transport %v, chat %+v", snap.Transport, snap.State.Chat)
	}
	b := startWorker(t, st, "worker-b", &snap.State, "Anything else?")
	b.await(t, kind(events.SessionResumed))
	cc, err := b.s.ChatContext(ctx)
	if err != nil || len(cc.Items) != 2 || cc.Items[1].Text != "Your table is booked." {
		t.Fatalf("B's context %+v (%v)", cc.Items, err)
	}
	// A speaks again: its write is fenced off and its checkpointer stops.
	if err := a.s.Inject(ctx, "Hello?"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		if !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("A's checkpointer ended with %v; want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A went on writing a session B owns")
	}
	got, err := Resume(ctx, st, "sess_1", testKey)
	if err != nil || len(got.State.Chat) != 2 {
		t.Fatalf("the store's checkpoint changed under B: %+v (%v)", got.State.Chat, err)
	}
}

// While the store is down the call goes on and the session says its
// checkpoints are failing; when the store is back the newest state is
// written and the session says so.
func TestCheckpointsResumeWhenTheStoreIsBack(t *testing.T) {
	base, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	st := &flakyStore{Store: base}
	ctx := context.Background()
	w := startWorker(t, st, "worker-a", nil, "One.", "Two.")
	w.await(t, kind(events.CheckpointSaved))
	st.down.Store(true)
	if err := w.s.Inject(ctx, "First."); err != nil {
		t.Fatal(err)
	}
	w.await(t, kind(events.CheckpointFailed))
	if err := w.s.Inject(ctx, "Second."); err != nil {
		t.Fatal(err)
	}
	w.await(t, func(e events.Event) bool { return e.Kind == events.PlayoutDone && e.Text == "Two." })
	st.down.Store(false)
	w.await(t, func(e events.Event) bool { return e.Kind == events.CheckpointSaved && e.Reason == "recovered" })
	snap, err := Resume(ctx, base, "sess_1", testKey)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.State.Chat); n != 4 {
		t.Errorf("the checkpoint written after the outage has %d items; want all 4", n)
	}
}
