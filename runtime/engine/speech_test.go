package engine

import (
	"fmt"
	"testing"
	"time"
)

// The order a failing phrase is tried in: a retry on the same voice after
// the backoff, then the backup with its own retry; a stall skips the retry.
func TestPhraseTries(t *testing.T) {
	type step struct {
		wait     time.Duration
		failover bool
		ok       bool
	}
	cases := []struct {
		name   string
		voices int
		retry  []bool
		want   []step
	}{
		{"one voice", 1, []bool{true, true}, []step{{SpeechRetryBackoff, false, true}, {0, false, false}}},
		{"with a backup", 2, []bool{true, true, true, true},
			[]step{{SpeechRetryBackoff, false, true}, {0, true, true}, {SpeechRetryBackoff, false, true}, {0, false, false}}},
		{"a stalled voice is not asked again", 2, []bool{false, false}, []step{{0, true, true}, {0, false, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := PhraseTries{Voices: tc.voices}
			for i, retry := range tc.retry {
				wait, failover, ok := p.Failed(retry)
				if got := (step{wait, failover, ok}); got != tc.want[i] {
					t.Fatalf("failure %d: got %+v; want %+v", i+1, got, tc.want[i])
				}
			}
		})
	}
	// A new phrase gets its own retry on the voice it failed over to.
	p := PhraseTries{Voices: 2}
	p.Failed(true)
	p.Failed(true)
	p.Next()
	if wait, failover, ok := p.Failed(true); wait != SpeechRetryBackoff || failover || !ok || p.Voice != 1 {
		t.Errorf("next phrase's first failure: wait %v failover %v ok %v on voice %d; want a retry on the backup", wait, failover, ok, p.Voice)
	}
}

func TestUndeliveredNoteRoundTrip(t *testing.T) {
	text := `It is "sunny" in Lisbon. Take sunglasses.`
	lost, ok := IsUndeliveredNote(undeliveredNote(text))
	if !ok || lost != text {
		t.Errorf("IsUndeliveredNote = %q, %v; want the text back", lost, ok)
	}
	if _, ok := IsUndeliveredNote("[not delivered] something else"); ok {
		t.Error("a different system message read as the note")
	}
}

// A phrase the voice failed on twice, with a backup voice.
func ExamplePhraseTries() {
	tries := PhraseTries{Voices: 2}
	for range 3 {
		wait, failover, ok := tries.Failed(true)
		fmt.Println(wait, failover, ok, "voice", tries.Voice)
	}
	// Output:
	// 250ms false true voice 0
	// 0s true true voice 1
	// 250ms false true voice 1
}
