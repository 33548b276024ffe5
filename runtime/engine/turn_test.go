package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// WaitPlayout returns the moment the turn is interrupted, and is bounded
// even when the caller gives no deadline.
func TestWaitPlayout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		turn := newTurn(1)
		go func() {
			time.Sleep(time.Second)
			close(turn.interrupted)
		}()
		t0 := time.Now()
		if err := turn.WaitPlayout(context.Background()); !errors.Is(err, ErrInterrupted) || time.Since(t0) != time.Second {
			t.Errorf("WaitPlayout = %v after %v; want ErrInterrupted after 1s", err, time.Since(t0))
		}
		stuck := newTurn(2)
		t0 = time.Now()
		if err := stuck.WaitPlayout(context.Background()); !errors.Is(err, ErrWaitTimeout) || time.Since(t0) != DefaultWaitTimeout {
			t.Errorf("WaitPlayout on a silent turn = %v after %v; want ErrWaitTimeout after %v", err, time.Since(t0), DefaultWaitTimeout)
		}
		played := newTurn(3)
		close(played.playoutStopped)
		if err := played.WaitPlayout(context.Background()); err != nil {
			t.Errorf("WaitPlayout after playout = %v", err)
		}
	})
}
