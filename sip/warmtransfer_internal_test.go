package sip

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// The person's decision, on virtual time: the decision timeout runs from
// the briefing's end, not its start; a key or a word before then decides
// at once; a hang-up, the caller leaving or ctx ending each end the wait.
func TestPersonDecisionTiming(t *testing.T) {
	newPerson := func() *person {
		return &person{decision: make(chan bool, 1), briefDone: make(chan struct{}), legErr: make(chan error, 1)}
	}
	for _, tc := range []struct {
		name   string
		act    func(p *person, hung, gone chan struct{}, cancel context.CancelFunc)
		want   error
		wantAt time.Duration
	}{
		{"no decision: 15 s after a 4 s briefing", func(p *person, _, _ chan struct{}, _ context.CancelFunc) {
			time.Sleep(4 * time.Second)
			close(p.briefDone)
		}, ErrTransferNoDecision, 19 * time.Second},
		{"key 1 during the briefing", func(p *person, _, _ chan struct{}, _ context.CancelFunc) {
			time.Sleep(2 * time.Second)
			p.key('1')
		}, nil, 2 * time.Second},
		{"no after the briefing", func(p *person, _, _ chan struct{}, _ context.CancelFunc) {
			time.Sleep(4 * time.Second)
			close(p.briefDone)
			time.Sleep(5 * time.Second)
			if yes, ok := answerOf("No, sorry, not now."); ok {
				p.decided(yes)
			}
		}, ErrTransferDeclined, 9 * time.Second},
		{"hung up mid-briefing", func(p *person, hung, _ chan struct{}, _ context.CancelFunc) {
			time.Sleep(time.Second)
			close(hung)
		}, ErrTransferHungUp, time.Second},
		{"the caller left", func(p *person, _, gone chan struct{}, _ context.CancelFunc) {
			time.Sleep(3 * time.Second)
			close(gone)
		}, ErrTransferFailed, 3 * time.Second},
		{"ctx ended", func(p *person, _, _ chan struct{}, cancel context.CancelFunc) {
			time.Sleep(3 * time.Second)
			cancel()
		}, context.Canceled, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPerson()
				hung, gone := make(chan struct{}), make(chan struct{})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				go tc.act(p, hung, gone, cancel)
				start := time.Now()
				err := p.await(ctx, hung, gone, DefaultDecisionTimeout)
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Fatalf("await: %v; want %v", err, tc.want)
				}
				if took := time.Since(start); took != tc.wantAt {
					t.Errorf("decided after %v; want %v", took, tc.wantAt)
				}
			})
		})
	}
}

func TestAnswerOf(t *testing.T) {
	for text, want := range map[string]int{ // 1 yes, 0 no, -1 neither
		"Yes.": 1, "yeah sure": 1, "OK, put them through": 1, "I accept": 1, "Okay!": 1,
		"No.": 0, "nope": 0, "not now": 0, "yes, but not now": 0, "I can't, sorry": 0, "decline": 0,
		"who is it?": -1, "": -1, "hmm": -1,
	} {
		yes, ok := answerOf(text)
		got := -1
		if ok {
			got = 0
			if yes {
				got = 1
			}
		}
		if got != want {
			t.Errorf("answerOf(%q) = %d; want %d", text, got, want)
		}
	}
}

// A person's phone answering busy or declined is a decline; other
// failures are no answer.
func TestRefusedAnswers(t *testing.T) {
	for code, want := range map[int]bool{486: true, 603: true, 600: true, 480: false, 404: false, 487: false} {
		err := error(&answeredError{code: code, err: ErrCallFailed})
		if got := refused(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("%d: refused %v; want %v", code, got, want)
		}
	}
	if refused(errors.New("sip: call failed: sip:x answered 486 Busy")) {
		t.Error("an error that is not an answer counted as one")
	}
}
