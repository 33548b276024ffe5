package sip

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	sipmsg "github.com/emiago/sipgo/sip"
	"golang.org/x/sync/errgroup"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
)

// errCallerHungUp ends a call the caller ended with BYE or CANCEL;
// errSessionEnded one whose agent ended the session.
var (
	errCallerHungUp = errors.New("sip: the caller hung up")
	errSessionEnded = errors.New("sip: the session ended")
)

// dialog is what a call needs of its SIP dialog, answered or placed.
type dialog interface {
	// Context ends when the dialog does (a BYE from the other side).
	Context() context.Context
	// Bye hangs up.
	Bye(ctx context.Context) error
	// TransactionRequest sends a request in the dialog (REFER).
	TransactionRequest(ctx context.Context, req *sipmsg.Request) (sipmsg.ClientTransaction, error)
}

// call is one answered or placed INVITE: its dialog and its RTP leg, the
// SIP side of a call the host (package calls) runs.
type call struct {
	s      *Server
	id     string // Call-ID
	dlg    dialog
	leg    *leg
	hc     *calls.Call // the hosted call: session, checkpoints, events
	hangUp context.CancelCauseFunc
	target sipmsg.Uri // the other side's Contact: where in-dialog requests go
	// takesRefer: the caller's INVITE listed REFER in Allow, so a draining
	// worker may move the call by REFER (a phone that does not list it
	// may drop the call on one).
	takesRefer bool
	// transport is what the call's signalling goes over ("udp", "tcp",
	// "tls").
	transport string
	// contact is Holdline's Contact in a call it placed over a transport
	// it does not listen on: the connection's own address.
	contact *sipmsg.ContactHeader

	mu        sync.Mutex // guards the answer's state
	codec     Codec
	te        *Codec
	direction string
	sessionID uint64
	version   uint64
	notify    chan int // a transfer's NOTIFY status codes, while one is under way
	hungUp    chan struct{}

	// line is the caller's line (lineKey), kept leading to the session
	// for a redial, "" if not.
	line string

	// tap is a warm transfer's hold or bridge (warmtransfer.go);
	// canReplace, that the other side takes REFER with Replaces.
	tap        tapped
	canReplace bool
	warm       atomic.Bool // a warm transfer is under way
}

// recovery is how phone calls are kept: no connection to wait for (a cut
// call is picked up by the caller redialling, a new call), and a short
// lease, so that a redial finds a dead worker's call free soon.
var recovery = calls.Recovery{LeaseTTL: callLeaseTTL}

// kind is the transport's name in the host's metrics and snapshots.
const kind = "sip"

// newCall makes the call of a dialog whose media the other side described
// in remote (its offer, or its answer to ours), on the RTP socket conn,
// which it owns from then on. A call that picks up an earlier conversation
// has resumed, and origin says how it came.
func (s *Server) newCall(id string, dlg dialog, conn *net.UDPConn, remote MediaOffer, chosen Codec, sessionID, version uint64, resumed *handoff.Snapshot, origin calls.Origin) (*call, error) {
	c := &call{s: s, id: id, dlg: dlg, codec: chosen, te: remote.TelephoneEvent,
		direction: AnswerDirection(remote), sessionID: sessionID, version: version, hungUp: make(chan struct{})}
	tePT := -1
	if c.te != nil {
		tePT = int(c.te.PayloadType)
	}
	// G.711 is 8 kHz on the wire: the caller's audio is judged and
	// recognised at 8 kHz, as it came, rather than upsampled first.
	inputRate := media.Rate16k
	if chosen.ClockRate == 8000 {
		inputRate = media.Rate8k
	}
	var err error
	c.leg, err = newLeg(conn, chosen, tePT, inputRate, s.cfg.rtpTimeout, legHandler{
		Audio: c.audio,
		DTMF:  c.dtmf,
	}, s.cfg.log.With("call_id", c.id))
	if err != nil {
		return nil, err
	}
	c.leg.symmetric = s.cfg.symmetric
	c.leg.pacer = s.pacer
	c.leg.setRemote(netip.AddrPortFrom(remote.Addr, uint16(remote.Port)), c.direction)
	spec := calls.Spec{
		Kind:       kind,
		Input:      engine.InputConfig{Rate: inputRate},
		OutputRate: c.leg.Rate(),
		Resumed:    resumed,
		Origin:     origin,
		Recovery:   recovery,
		// Tools find the call under the session's context (Transfer).
		Context: context.WithValue(s.ctx, callKey{}, c),
	}
	c.hc, err = s.host.Start(s.ctx, spec, c)
	if err != nil {
		c.leg.conn.Close()
		return nil, err
	}
	s.cfg.log.Info("call started", "call_id", c.id, "session", c.hc.ID(), "origin", origin)
	return c, nil
}

// WriteFrame sends the agent's audio down the RTP leg.
func (c *call) WriteFrame(f media.Frame) error { return c.leg.WriteFrame(c.tap.output(f)) }

// Hangup: the host ended the call (the agent ended it, another worker took
// it over, the worker is closing, DELETE over HTTP); serve sends the BYE.
func (c *call) Hangup(string) { close(c.hungUp) }

// answerSDP is the call's current answer; bump makes it a new version (a
// re-INVITE's answer).
func (c *call) answerSDP(bump bool) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bump {
		c.version++
	}
	a := Answer{Addr: c.s.sdpAddr(), Port: c.leg.Port(), Codec: c.codec, TelephoneEvent: c.te,
		Direction: c.direction, SessionID: c.sessionID, Version: c.version, Ptime: media.DefaultFrameDuration}
	a.SAVP, a.Crypto = c.leg.sec.Load().sdes()
	return a.Marshal()
}

// reoffer takes a re-INVITE's offer: the same codec must still be there
// (switching codecs mid-call is refused); the address and direction follow
// it, which is how hold and unhold work, and so do the SRTP keys (an SRTP
// call stays SRTP).
func (c *call) reoffer(o MediaOffer) error {
	found := false
	for _, k := range o.Codecs {
		if k.PayloadType == c.codec.PayloadType && k.ClockRate == c.codec.ClockRate {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("%w: the call's %s is no longer offered", ErrNoCommonCodec, c.codec.Name)
	}
	sec, err := c.s.sdesAnswer(o, c.leg.sec.Load())
	if err != nil {
		return err
	}
	c.leg.sec.Store(sec)
	dir := AnswerDirection(o)
	c.mu.Lock()
	c.direction = dir
	c.mu.Unlock()
	c.leg.setRemote(netip.AddrPortFrom(o.Addr, uint16(o.Port)), dir)
	return nil
}

func (c *call) audio(f media.Frame) {
	_ = c.hc.PushAudio(c.hc.Context(), c.tap.input(f))
}

func (c *call) dtmf(d rune) {
	if c.tap.held() {
		return // on hold or put through: not the agent's
	}
	ctx, cancel := context.WithTimeout(c.hc.Context(), pushTimeout)
	defer cancel()
	if err := c.hc.Session().PushDTMF(ctx, d); err != nil {
		c.s.cfg.log.Warn("DTMF lost", "call_id", c.id, "digit", string(d), "err", err)
	}
}

// serve runs the call until the other side hangs up, the host ends it
// (the agent ended the session, another worker took it over), RTP stops,
// or ctx ends; then it hangs up if the other side did not. answer, if not
// nil, answers the INVITE first.
func (c *call) serve(ctx context.Context, answer func() error) {
	if answer != nil {
		if err := answer(); err != nil {
			if errors.Is(err, sipmsg.ErrTransactionCanceled) {
				c.s.cfg.log.Info("the caller hung up before the answer (CANCEL)", "call_id", c.id)
			} else {
				c.s.cfg.log.Warn("answering failed", "call_id", c.id, "err", err)
			}
			c.close("not answered")
			return
		}
	}
	ctx, hangUp := context.WithCancelCause(ctx)
	defer hangUp(nil)
	c.hangUp = hangUp
	// Media flows: the session runs, and a call that picks up an earlier
	// conversation has the agent speak first, from where it was.
	c.hc.Connected()
	if c.line != "" {
		c.hc.KeepAlias(ctx, c.line, c.s.cfg.redial)
	}
	g, gctx := errgroup.WithContext(ctx)
	// Each returns an error when it ends on its own, so that the first to
	// end ends the others.
	g.Go(func() error { return c.leg.run(gctx) })
	g.Go(func() error {
		select {
		case <-c.hungUp:
			return errSessionEnded
		case <-c.dlg.Context().Done():
			return errCallerHungUp
		case <-gctx.Done():
			return nil
		}
	})
	err := g.Wait()
	if cause := context.Cause(ctx); errors.Is(cause, errTransferred) || errors.Is(cause, errPutThrough) {
		err = cause
	}
	reason := "hung up"
	switch {
	case errors.Is(err, errTransferred):
		c.s.cfg.log.Info("call handed over: hanging up", "call_id", c.id)
		c.hc.Transferred()
		reason = "transferred"
	case errors.Is(err, errPutThrough):
		c.s.cfg.log.Info("call put through to a person: hanging up", "call_id", c.id)
		reason = "put through to a person"
	case errors.Is(err, errCallerHungUp):
		c.s.cfg.log.Info("call ended by the caller", "call_id", c.id)
		reason = "the caller hung up"
	case errors.Is(err, ErrRTPTimeout):
		c.s.cfg.log.Warn("call hung up: no RTP from the caller", "call_id", c.id, "timeout", c.s.cfg.rtpTimeout)
		reason = "no RTP from the caller"
	case errors.Is(err, errSessionEnded), errors.Is(err, context.Canceled):
	case err != nil:
		c.s.cfg.log.Error("call failed", "call_id", c.id, "err", err)
		reason = "call failed: " + err.Error()
	}
	c.hc.End(reason)
	<-c.hc.Done()
	if errors.Is(err, errCallerHungUp) {
		return
	}
	bctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
	defer cancel()
	if err := c.dlg.Bye(bctx); err != nil {
		c.s.cfg.log.Warn("BYE failed", "call_id", c.id, "err", err)
	}
}

// close ends a call that never ran, and frees its RTP socket.
func (c *call) close(reason string) {
	c.hc.End(reason)
	c.leg.conn.Close()
}
