package sip

import (
	"context"
	"errors"
	"fmt"
	"time"

	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/runtime/engine"
)

// drainRetryAfter is the Retry-After of a draining server's 503s, in
// seconds: a proxy tries the next worker at once; a phone tries again
// after it.
const drainRetryAfter = "2"

// WithFrontDoor makes calls movable to other workers when the host drains
// (calls.Host.Drain with calls.WithMoves): the caller is REFERred to uri,
// the SIP proxy in front of the workers (never a worker itself, which may
// be the one draining), with a handoff token the worker that answers
// takes the conversation over with. A caller that refuses the REFER
// stays until the call ends or the drain's deadline.
func WithFrontDoor(uri string) Option {
	return func(c *config) error {
		var u sipmsg.Uri
		if err := sipmsg.ParseUri(uri, &u); err != nil {
			return fmt.Errorf("sip: front door %q: %w", uri, err)
		}
		c.frontDoor = uri
		return nil
	}
}

// refuseDraining answers a request a draining server takes no more of.
func refuseDraining(tx sipmsg.ServerTransaction, req *sipmsg.Request) {
	res := sipmsg.NewResponseFromRequest(req, 503, "Service Unavailable", nil)
	res.AppendHeader(sipmsg.NewHeader("Retry-After", drainRetryAfter))
	res.AppendHeader(sipmsg.NewHeader("Warning", `399 holdline "this worker is draining: another takes the call"`))
	_ = tx.Respond(res)
}

// errNoFrontDoor: a move was asked of a server that has none.
var errNoFrontDoor = errors.New("sip: no front door to move the call to (WithFrontDoor)")

// Movable reports whether the call can be moved: the server has a front
// door, the caller said it takes REFER (Allow), its Contact is known, and
// no transfer is under way (calls.Mover).
func (c *call) Movable() bool {
	c.mu.Lock()
	busy := c.notify != nil
	c.mu.Unlock()
	return c.s.cfg.frontDoor != "" && c.takesRefer && c.target.Host != "" && !busy
}

// Move REFERs the caller to the front door with the handoff token, and
// returns once the worker the front door chose has answered; this call
// is then hung up (calls.Mover). A refused REFER leaves the call here.
func (c *call) Move(ctx context.Context, token string) error {
	if c.s.cfg.frontDoor == "" {
		return errNoFrontDoor
	}
	var to sipmsg.Uri
	if err := sipmsg.ParseUri(c.s.cfg.frontDoor, &to); err != nil {
		return err
	}
	// The token in the user part too: phones that drop the Refer-To's
	// headers keep the URI itself.
	to.User = handoffUserPrefix + token
	return c.Transfer(ctx, engine.TransferRequest{Target: to.String(), Token: token, Timeout: moveTransferTimeout})
}

// moveTransferTimeout bounds a move's REFER, from sending it to the new
// worker answering.
const moveTransferTimeout = 10 * time.Second
