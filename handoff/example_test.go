package handoff_test

import (
	"fmt"
	"time"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/runtime/engine"
)

func Example() {
	key := handoff.Key{ID: "2026-11", Secret: []byte("a secret from configuration, 32B")}
	sealed, err := handoff.Seal(handoff.Snapshot{
		CreatedAt: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC),
		State:     engine.State{SessionID: "sess_42", Agent: "billing", Epoch: 3},
		Transport: map[string]string{"kind": "sip"},
	}, key)
	if err != nil {
		panic(err)
	}
	s, err := handoff.Open(sealed, key)
	fmt.Println(s.State.SessionID, s.State.Agent, s.Transport["kind"], err)

	sealed[len(sealed)/2] ^= 1 // one bit changed on the way
	_, err = handoff.Open(sealed, key)
	fmt.Println(err != nil)
	// Output:
	// sess_42 billing sip <nil>
	// true
}
