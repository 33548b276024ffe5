package sip

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"strings"
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
// server's agent on it until either side hangs up or ctx ends. A sips:
// target, or one with ;transport=tls or ;transport=tcp, is called over
// that transport, whether or not the server listens on it: without a
// listener the call's Contact is the connection's own address, and the
// callee's requests come back over that connection. The offer
// has PCMU, PCMA, Opus and telephone-event; the callee's answer picks.
// Unless SRTP is off (WithSRTP) the offer is RTP/SAVP with SDES keys for
// both suites; with SRTPOptional, a callee that refuses it with 488 is
// called again with plain RTP, and a plain RTP/AVP answer is taken (in
// the clear). RTP/SAVP rather than the "best effort" RTP/AVP with
// a=crypto: the latter is no standard, and phones that do not know it
// may take the call in the clear while their user believes it
// encrypted, or refuse it; a refused RTP/SAVP costs one round trip.
// Call returns once the call is over: nil after a normal hang-up, an error
// wrapping ErrCallFailed when it was not answered.
func (s *Server) Call(ctx context.Context, target string) error {
	var uri sipmsg.Uri
	if err := sipmsg.ParseUri(target, &uri); err != nil {
		return fmt.Errorf("sip: Call %q: %w", target, err)
	}
	d, err := s.dial(ctx, target, uri)
	if err != nil {
		return err
	}
	dlg, conn, answer, chosen, sid, bye := d.dlg, d.conn, d.answer, d.chosen, d.sid, d.bye
	defer dlg.Close()
	c, err := s.newCall(dlg.InviteRequest.CallID().Value(), dlg, conn, answer, chosen, sid, 1, nil, calls.Fresh)
	if err != nil {
		return bye(err)
	}
	c.transport, c.contact = d.transport, d.contact
	c.leg.sec.Store(d.sec)
	if ct := dlg.InviteResponse.Contact(); ct != nil {
		c.target = ct.Address
	} else {
		c.target = uri
	}
	c.canReplace = takesReplaces(dlg.InviteResponse)
	if !s.add(c) {
		c.close("the server closed")
		return bye(errors.New("sip: server closed"))
	}
	defer s.wg.Done()
	defer s.remove(c)
	c.serve(ctx, nil)
	return nil
}

// answeredError is a placed call's final non-2xx answer.
type answeredError struct {
	code int
	err  error
}

func (e *answeredError) Error() string { return e.err.Error() }
func (e *answeredError) Unwrap() error { return e.err }

// dialed is a call Holdline placed, answered and acknowledged, with
// nothing running on it yet.
type dialed struct {
	dlg    *sipgo.DialogClientSession
	conn   *net.UDPConn // its RTP socket
	answer MediaOffer
	chosen Codec
	sid    uint64
	// transport and contact are placedInvite's.
	transport string
	contact   *sipmsg.ContactHeader
	// sec is the call's SRTP, nil for plain RTP: for its leg.
	sec *srtpSession
	// bye hangs up (BYE), closes the socket and forgets the dialog, and
	// returns why.
	bye func(why error) error
}

// dial places a call to target (uri, parsed) and waits, under ctx, for its
// answer, which it acknowledges: what Call runs an agent on, and what a
// warm transfer briefs a person on. Cancelling ctx before the answer
// CANCELs the INVITE.
func (s *Server) dial(ctx context.Context, target string, uri sipmsg.Uri) (*dialed, error) {
	// A Serve started just before may not have set up yet.
	select {
	case <-s.serving:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(serveWait):
	}
	s.mu.Lock()
	cli, closed := s.placed, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, fmt.Errorf("sip: Call: %w", errors.New("server closed"))
	case cli == nil:
		return nil, ErrNotServing
	}
	conn, err := s.listenRTP()
	if err != nil {
		return nil, err
	}
	sid, port := mrand.Uint64()>>1, conn.LocalAddr().(*net.UDPAddr).Port
	keys, err := s.sdesOffer()
	if err != nil {
		conn.Close()
		return nil, err
	}
	var (
		dlg       *sipgo.DialogClientSession
		transport string
		own       *sipmsg.ContactHeader
	)
	// place sends the INVITE with keys (nil for plain RTP) and waits for
	// the final answer.
	place := func(keys []Crypto) error {
		var req *sipmsg.Request
		var err error
		if req, transport, own, err = s.placedInvite(ctx, uri, s.offerSDP(port, sid, keys)); err != nil {
			return fmt.Errorf("sip: Call %s: %w", target, err)
		}
		if dlg, err = cli.WriteInvite(ctx, req); err != nil {
			return fmt.Errorf("sip: INVITE %s: %w", target, err)
		}
		if err := dlg.WaitAnswer(ctx, sipgo.AnswerOptions{}); err != nil {
			dlg.Close()
			var res *sipgo.ErrDialogResponse
			if errors.As(err, &res) {
				return &answeredError{code: res.Res.StatusCode, err: fmt.Errorf("%w: %s answered %d %s", ErrCallFailed, target, res.Res.StatusCode, res.Res.Reason)}
			}
			return fmt.Errorf("%w: %s: %v", ErrCallFailed, target, err)
		}
		return nil
	}
	err = place(keys)
	if ae := (*answeredError)(nil); errors.As(err, &ae) && ae.code == 488 && keys != nil && s.cfg.srtp == SRTPOptional {
		s.cfg.log.Info("the callee refused SRTP: calling again with plain RTP", "target", target)
		keys = nil
		err = place(nil)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	bye := func(why error) error {
		bctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
		defer cancel()
		_ = dlg.Ack(bctx)
		_ = dlg.Bye(bctx)
		conn.Close()
		dlg.Close()
		return why
	}
	answer, err := ParseOffer(dlg.InviteResponse.Body())
	if err != nil {
		return nil, bye(fmt.Errorf("%w: the answer's SDP: %v", ErrCallFailed, err))
	}
	chosen, err := Negotiate(answer, supportedCodecs)
	if err != nil {
		return nil, bye(fmt.Errorf("%w: %v", ErrCallFailed, err))
	}
	sec, err := sdesAnswered(keys, answer, s.cfg.srtp == SRTPRequired)
	if err != nil {
		return nil, bye(fmt.Errorf("%w: %v", ErrCallFailed, err))
	}
	if keys != nil && sec == nil {
		s.cfg.log.Info("the callee answered the SRTP offer with plain RTP: the call is in the clear", "target", target)
	}
	if err := dlg.Ack(ctx); err != nil {
		return nil, bye(fmt.Errorf("%w: ACK: %v", ErrCallFailed, err))
	}
	return &dialed{dlg: dlg, conn: conn, answer: answer, chosen: chosen, sid: sid, transport: transport, contact: own, sec: sec, bye: bye}, nil
}

// placedInvite is the INVITE for a call to uri: over the transport uri
// names, with the Contact of the server's listener on it, or, when there
// is none, of the connection the call goes out on (returned as own).
func (s *Server) placedInvite(ctx context.Context, uri sipmsg.Uri, offer []byte) (req *sipmsg.Request, transport string, own *sipmsg.ContactHeader, err error) {
	transport = uriTransport(uri)
	if transport != "udp" && transport != "tcp" && transport != "tls" {
		return nil, "", nil, fmt.Errorf("transport %q: want udp, tcp or tls", transport)
	}
	req = sipmsg.NewRequest(sipmsg.INVITE, uri)
	req.SetTransport(strings.ToUpper(transport))
	req.SetBody(offer)
	req.AppendHeader(sipmsg.NewHeader("Content-Type", "application/sdp"))
	s.mu.Lock()
	contact, listening := s.contacts[transport]
	s.mu.Unlock()
	if listening {
		req.AppendHeader(&contact)
		return req, transport, nil, nil
	}
	if transport == "udp" {
		return nil, "", nil, errors.New("over UDP it needs a udp listener (ServeUDP)")
	}
	if err := sipgo.ClientRequestBuild(s.client, req); err != nil {
		return nil, "", nil, err
	}
	// Connect first: the Contact names the connection's own address.
	conn, err := s.ua.TransportLayer().ClientRequestConnection(ctx, req)
	if err != nil {
		return nil, "", nil, fmt.Errorf("connecting over %s: %w", strings.ToUpper(transport), err)
	}
	local, err := netip.ParseAddrPort(conn.LocalAddr().String())
	if err != nil {
		return nil, "", nil, fmt.Errorf("the connection's address: %w", err)
	}
	ct := &sipmsg.ContactHeader{Address: sipmsg.Uri{Scheme: "sip", User: "holdline", Host: local.Addr().Unmap().String(), Port: int(local.Port())}}
	if transport == "tls" {
		ct.Address.Scheme = "sips"
	} else {
		ct.Address.UriParams = sipmsg.NewParams()
		ct.Address.UriParams.Add("transport", "tcp")
	}
	req.AppendHeader(ct)
	return req, transport, ct, nil
}
