package sip

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	sipmsg "github.com/emiago/sipgo/sip"
	"golang.org/x/sync/errgroup"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
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

// call is one answered or placed INVITE: its dialog, its RTP leg and its
// session.
type call struct {
	s       *Server
	id      string // Call-ID
	dlg     dialog
	leg     *leg
	sess    *runtime.Session
	release func()
	ctxp    atomic.Pointer[context.Context] // the call's, set by serve before media flows
	hangUp  context.CancelCauseFunc
	target  sipmsg.Uri // the other side's Contact: where in-dialog requests go

	mu        sync.Mutex // guards the answer's state
	codec     Codec
	te        *Codec
	direction string
	sessionID uint64
	version   uint64
	notify    chan int // a transfer's NOTIFY status codes, while one is under way

	// With a store (WithStore): the session's checkpointer, and the
	// snapshot of a handed-over call's session.
	cp      *handoff.Checkpointer
	resumed *handoff.Snapshot
	// session is the session's id; redialled says the call picks up one
	// its caller was cut off from (rather than one put through to it);
	// line is the caller's line (lineKey), kept leading to the session
	// for a redial, "" if not.
	session   string
	redialled bool
	line      string
}

// newCall makes the call of a dialog whose media the other side described
// in remote (its offer, or its answer to ours), on the RTP socket conn,
// which it owns from then on.
func (s *Server) newCall(id string, dlg dialog, conn *net.UDPConn, remote MediaOffer, chosen Codec, sessionID, version uint64, resumed *handoff.Snapshot) (*call, error) {
	c := &call{s: s, id: id, dlg: dlg, codec: chosen, te: remote.TelephoneEvent,
		direction: AnswerDirection(remote), sessionID: sessionID, version: version, resumed: resumed}
	c.ctxp.Store(&s.ctx)
	agent, release, err := s.newAgent(s.ctx)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("making the agent: %w", err)
	}
	if release == nil {
		release = func() {}
	}
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
	c.leg, err = newLeg(conn, chosen, tePT, inputRate, s.cfg.rtpTimeout, legHandler{
		Audio: c.audio,
		DTMF:  c.dtmf,
	}, s.cfg.log.With("call_id", c.id))
	if err != nil {
		release()
		return nil, err
	}
	c.leg.symmetric = s.cfg.symmetric
	c.leg.pacer = s.pacer
	c.leg.setRemote(netip.AddrPortFrom(remote.Addr, uint16(remote.Port)), c.direction)
	sid := newSessionID()
	if resumed != nil {
		sid = resumed.State.SessionID
	}
	c.session = sid
	opts := []runtime.Option{
		runtime.WithID(sid),
		runtime.WithOutput(c.leg, c.leg.Rate()),
		// RTP flows continuously on a phone leg: gateways expect it, and
		// the echo canceller's reference is exactly what went out.
		runtime.WithContinuousOutput(),
		runtime.WithInput(runtime.InputConfig{Rate: inputRate}),
		runtime.WithLogger(s.cfg.log.With("call_id", c.id)),
	}
	opts, err = c.checkpointed(append(opts, s.cfg.sessionOpts...), sid)
	if err != nil {
		c.leg.conn.Close()
		release()
		return nil, err
	}
	c.sess, err = runtime.New(agent, opts...)
	if err != nil {
		c.leg.conn.Close()
		release()
		return nil, err
	}
	c.release = release
	return c, nil
}

func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "sip_" + hex.EncodeToString(b[:])
}

// answerSDP is the call's current answer; bump makes it a new version (a
// re-INVITE's answer).
func (c *call) answerSDP(bump bool) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bump {
		c.version++
	}
	return Answer{Addr: c.s.cfg.mediaAddr, Port: c.leg.Port(), Codec: c.codec, TelephoneEvent: c.te,
		Direction: c.direction, SessionID: c.sessionID, Version: c.version, Ptime: media.DefaultFrameDuration}.Marshal()
}

// reoffer takes a re-INVITE's offer: the same codec must still be there
// (switching codecs mid-call is refused); the address and direction follow
// it, which is how hold and unhold work.
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
	dir := AnswerDirection(o)
	c.mu.Lock()
	c.direction = dir
	c.mu.Unlock()
	c.leg.setRemote(netip.AddrPortFrom(o.Addr, uint16(o.Port)), dir)
	return nil
}

// ctx is the call's context: requests in the dialog (INFO) come on sipgo's
// goroutines, so it is read atomically.
func (c *call) ctx() context.Context { return *c.ctxp.Load() }

func (c *call) audio(f media.Frame) {
	_ = c.sess.PushAudio(c.ctx(), f)
}

func (c *call) dtmf(d rune) {
	ctx, cancel := context.WithTimeout(c.ctx(), pushTimeout)
	defer cancel()
	if err := c.sess.PushDTMF(ctx, d); err != nil {
		c.s.cfg.log.Warn("DTMF lost", "call_id", c.id, "digit", string(d), "err", err)
	}
}

// serve runs the call until the other side hangs up, the agent ends the
// session, RTP stops, or ctx ends; then it hangs up if the other side did
// not. answer, if not nil, answers the INVITE first.
func (c *call) serve(ctx context.Context, answer func() error) {
	defer c.release()
	if answer != nil {
		if err := answer(); err != nil {
			if errors.Is(err, sipmsg.ErrTransactionCanceled) {
				c.s.cfg.log.Info("the caller hung up before the answer (CANCEL)", "call_id", c.id)
			} else {
				c.s.cfg.log.Warn("answering failed", "call_id", c.id, "err", err)
			}
			c.leg.conn.Close()
			return
		}
	}
	// Tools find the call under the session's context (Transfer).
	ctx = context.WithValue(ctx, callKey{}, c)
	ctx, hangUp := context.WithCancelCause(ctx)
	defer hangUp(nil)
	c.hangUp = hangUp
	g, gctx := errgroup.WithContext(ctx)
	c.ctxp.Store(&gctx)
	// Each returns an error when it ends on its own, so that the first to
	// end ends the others.
	g.Go(func() error {
		if err := c.sess.Run(gctx); err != nil && gctx.Err() == nil {
			return err
		}
		return errSessionEnded
	})
	g.Go(func() error { return c.leg.run(gctx) })
	if c.cp != nil {
		g.Go(func() error {
			if err := c.cp.Run(gctx); errors.Is(err, handoff.ErrLeaseLost) {
				return err // another worker has the session: hang up
			}
			return nil
		})
	}
	if c.cp != nil && c.line != "" {
		g.Go(func() error { c.keepLine(gctx); return nil })
	}
	if c.resumed != nil {
		// Handed over, or redialled: the agent speaks first, from where
		// it was.
		instructions := resumeInstructions
		if c.redialled {
			instructions = redialInstructions
		}
		g.Go(func() error {
			rctx, cancel := context.WithTimeout(gctx, pushTimeout)
			defer cancel()
			_ = c.sess.GenerateReply(rctx, instructions)
			return nil
		})
	}
	g.Go(func() error {
		select {
		case <-c.dlg.Context().Done():
			return errCallerHungUp
		case <-gctx.Done():
			return nil
		}
	})
	err := g.Wait()
	if cause := context.Cause(ctx); errors.Is(cause, errTransferred) {
		err = cause
	}
	defer c.finishCheckpoints(errors.Is(err, errTransferred))
	switch {
	case errors.Is(err, errTransferred):
		c.s.cfg.log.Info("call handed over: hanging up", "call_id", c.id)
	case errors.Is(err, errCallerHungUp):
		c.s.cfg.log.Info("call ended by the caller", "call_id", c.id)
		return
	case errors.Is(err, ErrRTPTimeout):
		c.s.cfg.log.Warn("call hung up: no RTP from the caller", "call_id", c.id, "timeout", c.s.cfg.rtpTimeout)
	case errors.Is(err, errSessionEnded), errors.Is(err, context.Canceled):
	case err != nil:
		c.s.cfg.log.Error("call failed", "call_id", c.id, "err", err)
	}
	bctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
	defer cancel()
	if err := c.dlg.Bye(bctx); err != nil {
		c.s.cfg.log.Warn("BYE failed", "call_id", c.id, "err", err)
	}
}

// close frees a call that never ran.
func (c *call) close() {
	c.leg.conn.Close()
	c.release()
}
