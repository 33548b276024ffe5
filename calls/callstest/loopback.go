// Package callstest has a loopback transport for package calls: the
// smallest transport there is, for tests of agents and of the host, and
// the example docs/ARCHITECTURE.md shows of how a transport plugs in.
package callstest

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
)

// Kind is the loopback transport's name in the host's metrics and
// snapshots.
const Kind = "loopback"

// Rate is the loopback line's sample rate, both ways.
const Rate = media.Rate16k

// Dial starts a call on h over a loopback line and connects it, as a
// transport does once its media can flow. from, if not nil, is a snapshot
// the call picks up (origin says how it came).
func Dial(ctx context.Context, h *calls.Host, from *calls.Resumed) (*Call, error) {
	c := &Call{hungUp: make(chan struct{})}
	spec := calls.Spec{
		Kind:       Kind,
		Input:      engine.InputConfig{Rate: Rate},
		OutputRate: Rate,
		Recovery:   calls.Recovery{ResumeTTL: calls.DefaultResumeTTL},
	}
	if from != nil {
		spec.Resumed, spec.Origin = from.Snapshot, from.Origin
	}
	hc, err := h.Start(ctx, spec, c)
	if err != nil {
		return nil, err
	}
	c.Call = hc
	hc.Connected()
	return c, nil
}

// Call is a call on a loopback line: what the agent says is counted, what
// the caller says is pushed with Say.
type Call struct {
	*calls.Call
	frames atomic.Int64
	once   sync.Once
	hungUp chan struct{}
	reason atomic.Value

	mu        sync.Mutex
	transfers []engine.TransferRequest
	moves     []string
	moveErr   error
}

// WriteFrame takes the agent's audio (calls.Line).
func (c *Call) WriteFrame(media.Frame) error {
	c.frames.Add(1)
	return nil
}

// Hangup is the host ending the call (calls.Line).
func (c *Call) Hangup(reason string) {
	c.once.Do(func() {
		c.reason.Store(reason)
		close(c.hungUp)
	})
}

// Frames returns how many frames of the agent's audio the line carried.
func (c *Call) Frames() int64 { return c.frames.Load() }

// HungUp is closed once the host ended the call.
func (c *Call) HungUp() <-chan struct{} { return c.hungUp }

// Say pushes the caller's audio in 20 ms frames.
func (c *Call) Say(ctx context.Context, samples []int16) error {
	n := media.SamplesFor(Rate, media.DefaultFrameDuration)
	for i := 0; i < len(samples); i += n {
		f := media.Frame{Samples: samples[i:min(i+n, len(samples))], SampleRate: Rate}
		if err := c.PushAudio(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// Transfer takes a transfer the session asks for (runtime.Transfer): the
// target "answers" at once, and the call is handed over, as a phone
// transport does when the target answers (calls.Transferrer).
func (c *Call) Transfer(_ context.Context, req engine.TransferRequest) error {
	c.mu.Lock()
	c.transfers = append(c.transfers, req)
	c.mu.Unlock()
	c.Transferred()
	c.End("transferred to " + req.Target)
	return nil
}

// Transfers returns the transfers the session asked for.
func (c *Call) Transfers() []engine.TransferRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]engine.TransferRequest(nil), c.transfers...)
}

// Movable reports that a loopback call can always be moved
// (calls.Mover).
func (c *Call) Movable() bool { return true }

// Move takes a draining host's move: the token is kept (Moves) for the
// test to resume the call elsewhere with, as a client re-offering through
// a front door would; it fails with the error FailMoves set.
func (c *Call) Move(_ context.Context, token string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moveErr != nil {
		return c.moveErr
	}
	c.moves = append(c.moves, token)
	return nil
}

// FailMoves makes Move fail with err: a caller that cannot be moved.
func (c *Call) FailMoves(err error) {
	c.mu.Lock()
	c.moveErr = err
	c.mu.Unlock()
}

// Moves returns the tokens of the moves the host made.
func (c *Call) Moves() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.moves...)
}

// Drop is the loopback line dropping (calls.Call.Lost); Restore is it
// coming back (calls.Call.Connected).
func (c *Call) Drop()    { c.Lost() }
func (c *Call) Restore() { c.Connected() }
