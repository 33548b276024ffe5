package tts_test

import (
	"context"
	"testing"

	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tts"
)

// ReadAll gathers every chunk of an utterance, and closes the stream.
func TestReadAllGathersTheUtterance(t *testing.T) {
	voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(1000))
	if err != nil {
		t.Fatal(err)
	}
	st, err := voice.Synthesize(context.Background(), "one two three")
	if err != nil {
		t.Fatal(err)
	}
	samples, err := tts.ReadAll(st)
	if err != nil || len(samples) == 0 {
		t.Fatalf("ReadAll = %d samples, %v; want the utterance", len(samples), err)
	}
	if _, err := st.Recv(); err == nil {
		t.Error("the stream still yields after ReadAll; want it closed")
	}
}
