package cli

import (
	"context"
	"errors"
	"testing"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt/pocketsphinx"
)

// TestSessionsShareOneLocalRecognizer checks that the sessions of an agent
// share one pocketsphinx recogniser, grammar and decoders, rather than
// loading their own, and that a session ending does not close it for the
// others: only the command's closeShared does.
func TestSessionsShareOneLocalRecognizer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	pf := providerFlags{stt: "pocketsphinx", tts: "demo", llm: "demo", ttsBackup: "none", wps: 2.5}
	firstAgent := booking.New(booking.NewRestaurant(8))
	first, err := pf.equip(firstAgent, true)
	if errors.Is(err, pocketsphinx.ErrMissingLibrary) || errors.Is(err, pocketsphinx.ErrMissingModel) {
		t.Skipf("pocketsphinx is not installed: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	secondAgent := booking.New(booking.NewRestaurant(8))
	_, err = pf.equip(secondAgent, true)
	if err != nil {
		t.Fatal(err)
	}
	a, aok := firstAgent.STT.(sharedRecognizer)
	b, bok := secondAgent.STT.(sharedRecognizer)
	if !aok || !bok || a.r != b.r {
		t.Fatalf("two sessions got recognisers %T and %T, not one shared", firstAgent.STT, secondAgent.STT)
	}
	if len(pf.recognizers) != 1 {
		t.Errorf("%d recognisers loaded for one agent; want 1", len(pf.recognizers))
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := secondAgent.STT.Stream(context.Background(), media.Rate16k)
	if err != nil {
		t.Fatalf("a session's recogniser after another session ended: %v", err)
	}
	s.Close()
	if err := pf.closeShared(); err != nil {
		t.Fatal(err)
	}
	if _, err := secondAgent.STT.Stream(context.Background(), media.Rate16k); !errors.Is(err, pocketsphinx.ErrClosed) {
		t.Errorf("Stream after closeShared: %v, want ErrClosed", err)
	}
}
