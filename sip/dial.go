package sip

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"time"

	"github.com/emiago/sipgo"
	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/calls"
)

// ErrNotServing: Call needs the Server to be serving (ServeUDP), since the
// callee's answer and BYE come back to its socket.
var ErrNotServing = errors.New("sip: the server is not serving")

// serveWait bounds how long Call waits for a Serve that is starting.
const serveWait = 2 * time.Second

// ErrCallFailed wraps a final non-2xx answer to a placed call.
var ErrCallFailed = errors.New("sip: call failed")

// Call places a call to target ("sip:user@host:port") and runs the
// server's agent on it until either side hangs up or ctx ends. The offer
// has PCMU, PCMA, Opus and telephone-event; the callee's answer picks.
// Call returns once the call is over: nil after a normal hang-up, an error
// wrapping ErrCallFailed when it was not answered.
func (s *Server) Call(ctx context.Context, target string) error {
	var uri sipmsg.Uri
	if err := sipmsg.ParseUri(target, &uri); err != nil {
		return fmt.Errorf("sip: Call %q: %w", target, err)
	}
	// A Serve started just before may not have set up yet.
	select {
	case <-s.serving:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(serveWait):
	}
	s.mu.Lock()
	cli, closed := s.placed, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("sip: Call: %w", errors.New("server closed"))
	case cli == nil:
		return ErrNotServing
	}
	conn, err := s.listenRTP()
	if err != nil {
		return err
	}
	sid := mrand.Uint64() >> 1
	offer := NewOffer(s.sdpAddr(), conn.LocalAddr().(*net.UDPAddr).Port, sid, 1)
	dlg, err := cli.Invite(ctx, uri, offer, sipmsg.NewHeader("Content-Type", "application/sdp"))
	if err != nil {
		conn.Close()
		return fmt.Errorf("sip: INVITE %s: %w", target, err)
	}
	defer dlg.Close()
	if err := dlg.WaitAnswer(ctx, sipgo.AnswerOptions{}); err != nil {
		conn.Close()
		var res *sipgo.ErrDialogResponse
		if errors.As(err, &res) {
			return fmt.Errorf("%w: %s answered %d %s", ErrCallFailed, target, res.Res.StatusCode, res.Res.Reason)
		}
		return fmt.Errorf("%w: %s: %v", ErrCallFailed, target, err)
	}
	bye := func(why error) error {
		bctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
		defer cancel()
		_ = dlg.Ack(bctx)
		_ = dlg.Bye(bctx)
		conn.Close()
		return why
	}
	answer, err := ParseOffer(dlg.InviteResponse.Body())
	if err != nil {
		return bye(fmt.Errorf("%w: the answer's SDP: %v", ErrCallFailed, err))
	}
	chosen, err := Negotiate(answer, supportedCodecs)
	if err != nil {
		return bye(fmt.Errorf("%w: %v", ErrCallFailed, err))
	}
	if err := dlg.Ack(ctx); err != nil {
		return bye(fmt.Errorf("%w: ACK: %v", ErrCallFailed, err))
	}
	c, err := s.newCall(dlg.InviteRequest.CallID().Value(), dlg, conn, answer, chosen, sid, 1, nil, calls.Fresh)
	if err != nil {
		return bye(err)
	}
	if ct := dlg.InviteResponse.Contact(); ct != nil {
		c.target = ct.Address
	} else {
		c.target = uri
	}
	if !s.add(c) {
		c.close("the server closed")
		return bye(errors.New("sip: server closed"))
	}
	s.wg.Add(1)
	defer s.wg.Done()
	defer s.remove(c)
	c.serve(ctx, nil)
	return nil
}
