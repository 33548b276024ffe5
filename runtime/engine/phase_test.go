package engine

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
)

// The phase table is a diamond: the model and the audio finish in either
// order, both lead to answered, and every phase ends settled.
func TestPhaseTableEveryTurnEndsSettled(t *testing.T) {
	for _, order := range [][]progress{
		{modelFinished, playoutFinished, callsIn},
		{playoutFinished, modelFinished, callsIn},
	} {
		turn := &turnState{}
		for _, p := range order {
			if !turn.finish(p) {
				t.Fatalf("%v: finishing %d refused in phase %v", order, p, turn.phase)
			}
		}
		if turn.phase != settled {
			t.Errorf("%v: phase %v; want settled", order, turn.phase)
		}
	}
	for p := range phaseMoves {
		if !reaches(phase(p), settled) {
			t.Errorf("phase %v cannot reach settled", phase(p))
		}
		if phase(p) != answering && !reaches(answering, phase(p)) {
			t.Errorf("phase %v is never reached", phase(p))
		}
		for _, next := range phaseMoves[p] {
			if next <= phase(p) {
				t.Errorf("%v moves back to %v: the table must only go forward", phase(p), next)
			}
		}
	}
	if len(phaseMoves[settled]) != 0 {
		t.Errorf("settled moves on: %v", phaseMoves[settled])
	}
	// Calls coming in while the answer is still going settle nothing.
	turn := &turnState{}
	if turn.finish(callsIn) || turn.phase != answering {
		t.Errorf("calls in while answering moved the turn to %v", turn.phase)
	}
}

func reaches(from, to phase) bool {
	if from == to {
		return true
	}
	for _, next := range phaseMoves[from] {
		if reaches(next, to) {
			return true
		}
	}
	return false
}

// A turn can be cut from any standing but cut, and once overtaken it never
// again awaits a follow-up of its own.
func TestStandingTableOvertakenIsFinal(t *testing.T) {
	for s := range standingMoves {
		turn := &turnState{standing: standing(s)}
		cut := turn.overtake(interrupted)
		if want := standing(s) != cutShort; cut != want || turn.standing != cutShort {
			t.Errorf("interrupting a turn %v: moved %v to %v; want moved %v to cut_short", standing(s), cut, turn.standing, want)
		}
		for _, next := range standingMoves[s] {
			if next <= standing(s) {
				t.Errorf("%v moves back to %v", standing(s), next)
			}
		}
	}
	turn := &turnState{}
	turn.overtake(newerInput)
	if turn.overtake(followedUp) || turn.awaitsFollowUp() {
		t.Errorf("a superseded turn could follow up: %v", turn.standing)
	}
}

// The conductor moves a turn through the table: a caller who cuts in while
// a call runs leaves the turn answered and cut, and its result settles it.
func TestTurnPhasesThroughACutAndALateResult(t *testing.T) {
	slow := tools.MustNew("lookup", "", func(context.Context, struct{}) (string, error) { return "", nil },
		tools.WithEffect(tools.Read))
	k, err := NewCore(Agent{Instructions: "x", Tools: []*tools.Tool{slow}}, nopEdges{}, func(Input) {}, func(events.Event) {},
		Config{ID: "phases", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := k.c
	c.handle(UserText{Text: "look it up"})
	e := c.turns.epoch
	turn := c.liveTurn(e)
	if turn.phase != answering || !turn.awaitsFollowUp() || !turn.holdsFloor() {
		t.Fatalf("a new turn: %v %v; want answering, follow_up_due", turn.phase, turn.standing)
	}
	c.handle(ModelText{Epoch: e, Text: "One moment."})
	c.handle(ModelDone{Epoch: e, Calls: []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{}`)}}})
	if turn.phase != streamed {
		t.Fatalf("model done, audio playing: %v; want streamed", turn.phase)
	}
	c.handle(UserText{Text: "actually, wait"})
	if turn.phase != answered || turn.standing != cutShort || turn.holdsFloor() {
		t.Fatalf("cut with its call running: %v %v; want answered, cut_short", turn.phase, turn.standing)
	}
	if c.liveTurn(e) != nil {
		t.Error("a cut turn still takes its edges' reports")
	}
	c.handle(ToolOutcome{CallID: "c1", State: tools.StateSucceeded, Output: "found"})
	if turn.phase != settled {
		t.Errorf("its call in: %v; want settled", turn.phase)
	}
}
