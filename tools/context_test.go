package tools

import (
	"context"
	"errors"
	"testing"
	"time"
)

// turn is a Playout whose audio finishes when done is closed.
type turn struct{ done chan struct{} }

func (p turn) WaitPlayout(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestWaitPlayoutWithoutPlayout(t *testing.T) {
	if err := WaitPlayout(context.Background()); err != nil {
		t.Errorf("WaitPlayout = %v, want nil with none attached", err)
	}
	if err := WaitPlayout(WithPlayout(context.Background(), nil)); err != nil {
		t.Errorf("WaitPlayout = %v, want nil with nil attached", err)
	}
}

func TestWaitPlayoutWaits(t *testing.T) {
	p := turn{done: make(chan struct{})}
	ctx := WithPlayout(context.Background(), p)
	returned := make(chan error, 1)
	go func() { returned <- WaitPlayout(ctx) }()

	select {
	case err := <-returned:
		t.Fatalf("WaitPlayout returned %v before the playout finished", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(p.done)
	if err := <-returned; err != nil {
		t.Errorf("WaitPlayout = %v", err)
	}
}

func TestWaitPlayoutHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(WithPlayout(context.Background(), turn{done: make(chan struct{})}))
	cancel()
	if err := WaitPlayout(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitPlayout = %v, want context.Canceled", err)
	}
}

func TestToolWaitsForPlayout(t *testing.T) {
	p := turn{done: make(chan struct{})}
	var order []string
	tool := MustNew("transfer", "", func(ctx context.Context, _ struct{}) (string, error) {
		if err := WaitPlayout(ctx); err != nil {
			return "", err
		}
		order = append(order, "transferred")
		return "ok", nil
	})
	go func() {
		order = append(order, "preamble played")
		close(p.done)
	}()
	if _, err := tool.Run(WithPlayout(context.Background(), p), nil); err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "preamble played" {
		t.Errorf("order = %v", order)
	}
}

func TestCallInfo(t *testing.T) {
	if _, ok := CallInfoFrom(context.Background()); ok {
		t.Error("CallInfoFrom found info in a bare context")
	}
	want := CallInfo{ID: "c1", Name: "lookup", Epoch: 3}
	got, ok := CallInfoFrom(WithCallInfo(context.Background(), want))
	if !ok || got != want {
		t.Errorf("CallInfoFrom = %+v, %v", got, ok)
	}
}
