package calls_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/calls/callstest"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/store"
)

// TestTransferCarriesAHandoffTokenWhateverTheTransport checks that an
// agent transfers with runtime.Transfer alone: the host hands the
// transport a handoff token another worker resumes the conversation with,
// and the call the transport then ends keeps its checkpoint for that
// worker.
func TestTransferCarriesAHandoffTokenWhateverTheTransport(t *testing.T) {
	st, err := store.OpenFile(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	result := make(chan error, 1)
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS()
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{Name: "front", Model: scripted.NewLLM(), TTS: voice,
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				result <- runtime.Transfer(ctx, "sip:billing@example.com")
				return nil
			}}, nil, nil
	}
	h, err := calls.New(newAgent, calls.WithStore(st, "worker-a", testKey))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := callstest.Dial(context.Background(), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("Transfer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Transfer did not return")
	}
	<-c.Done()
	trs := c.Transfers()
	if len(trs) != 1 || trs[0].Target != "sip:billing@example.com" || trs[0].Token == "" || trs[0].Timeout != runtime.DefaultTransferTimeout {
		t.Fatalf("the transport was asked %+v; want one transfer to billing with a handoff token", trs)
	}
	other := newHost(t, st, "worker-b")
	snap, err := other.Resume(context.Background(), trs[0].Token)
	if err != nil {
		t.Fatalf("the target worker resuming the handoff token: %v", err)
	}
	if snap.State.SessionID != c.ID() || snap.Transport["kind"] != callstest.Kind {
		t.Errorf("resumed %s over %q; want %s over %q", snap.State.SessionID, snap.Transport["kind"], c.ID(), callstest.Kind)
	}
	if _, err := st.Load(context.Background(), c.ID()); err != nil {
		t.Errorf("the transferred call's checkpoint: %v; want it kept for the target", err)
	}
}
