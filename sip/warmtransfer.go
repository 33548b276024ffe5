package sip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/vad"
)

// Warm transfer defaults.
const (
	// DefaultAnswerTimeout is how long WarmTransfer lets the person's
	// phone ring.
	DefaultAnswerTimeout = 30 * time.Second
	// DefaultDecisionTimeout is how long the person has, once the
	// briefing has played, to accept or decline.
	DefaultDecisionTimeout = 15 * time.Second
	// DefaultSummaryDeadline bounds the model's summary that stands in
	// for a briefing not given.
	DefaultSummaryDeadline = 3 * time.Second
	// referTimeout bounds a REFER with Replaces, from sending it to the
	// caller's side reporting the person's answer.
	referTimeout = 10 * time.Second
	// replaceGrace is how long the person's side has, after the caller's
	// side took the call over with Replaces, to end Holdline's dialog
	// with it before Holdline hangs that dialog up itself.
	replaceGrace = 5 * time.Second
)

// FallbackBriefing is said to the person when no briefing was given and
// the model wrote no summary in time.
const FallbackBriefing = "A caller is being transferred to you."

// How a warm transfer ends for the tool, each also an ErrTransferFailed:
// the agent is back with the caller in every case.
var (
	// ErrTransferDeclined: the person said no or pressed 2 (or their
	// phone answered busy or declined).
	ErrTransferDeclined = fmt.Errorf("%w: the person declined", ErrTransferFailed)
	// ErrTransferNoAnswer: the person's phone was not answered within the
	// answer timeout, or the call to it failed.
	ErrTransferNoAnswer = fmt.Errorf("%w: the person did not answer", ErrTransferFailed)
	// ErrTransferNoDecision: the person neither accepted nor declined
	// within the decision timeout after the briefing.
	ErrTransferNoDecision = fmt.Errorf("%w: the person did not decide in time", ErrTransferFailed)
	// ErrTransferHungUp: the person hung up before accepting (during the
	// briefing, say).
	ErrTransferHungUp = fmt.Errorf("%w: the person hung up", ErrTransferFailed)
)

// errPutThrough ends Holdline's part of a call a warm transfer connected
// to a person.
var errPutThrough = errors.New("sip: put through to a person")

// WarmTransferOption configures WarmTransfer.
type WarmTransferOption func(*warmConfig)

type warmConfig struct {
	briefing       string
	answerTimeout  time.Duration
	decideTimeout  time.Duration
	summaryTimeout time.Duration
	noRefer        bool
}

// WithBriefing is what the person hears when they answer (default: a
// summary of the conversation the agent's model writes, as
// runtime.Summarize does for a handoff).
func WithBriefing(text string) WarmTransferOption {
	return func(c *warmConfig) { c.briefing = text }
}

// WithAnswerTimeout bounds how long the person's phone rings (default
// DefaultAnswerTimeout).
func WithAnswerTimeout(d time.Duration) WarmTransferOption {
	return func(c *warmConfig) { c.answerTimeout = d }
}

// WithDecisionTimeout bounds how long the person has to accept or decline
// once the briefing has played (default DefaultDecisionTimeout).
func WithDecisionTimeout(d time.Duration) WarmTransferOption {
	return func(c *warmConfig) { c.decideTimeout = d }
}

// WithBridge connects the two by bridging their media in Holdline even
// when the caller's side takes REFER with Replaces.
func WithBridge() WarmTransferOption { return func(c *warmConfig) { c.noRefer = true } }

// TransferState is a warm transfer's state as the session's checkpoints
// keep it, under the user data key TransferStateKey.
type TransferState struct {
	Target string `json:"target"`
	// Step is started, briefing, connected or failed.
	Step string `json:"step"`
	// How is refer or bridge, once connected; Reason why it failed.
	How    string `json:"how,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// TransferStateKey is the user data key of TransferState.
const TransferStateKey = "sip.warm_transfer"

// WarmTransfer hands the phone call that ctx's session runs on (a tool's
// ctx) to a person at target, who is told first what the call is about:
//
//   - the caller is put on hold (WithHoldAudio: a file or the comfort
//     tone) once what the agent was saying has played; the agent is
//     silent, and what the caller says or presses meanwhile is ignored:
//     the session hears silence, so no turn starts;
//   - Holdline calls target and, once answered, speaks the briefing
//     (WithBriefing, or the model's summary) with the agent's voice;
//   - the person accepts by saying yes (yeah, sure, ok, accept...) or
//     pressing 1, as RFC 4733 events or SIP INFO, at any time after
//     answering, and declines with no or 2; the words are the agent's
//     recogniser's;
//   - on acceptance the two are connected: by a REFER with Replaces (RFC
//     3891) to the caller's side when it advertised REFER and replaces
//     (its UA calls the person, replacing Holdline's call to them),
//     otherwise, or when that REFER fails, by bridging the two legs'
//     media in Holdline until either hangs up, the agent muted.
//
// WarmTransfer returns nil once the two are connected. Otherwise the
// person is hung up, the hold ends, the agent has the caller again, and
// the error says why: ErrTransferDeclined, ErrTransferNoAnswer,
// ErrTransferNoDecision, ErrTransferHungUp (each an ErrTransferFailed),
// or ctx's error. Each step is a transfer_* event and a checkpoint, with
// TransferState in the session's user data. The tool calling it needs a
// deadline (tools.WithTimeout) longer than the ringing, the briefing and
// the decision together: a minute or more with the defaults.
func WarmTransfer(ctx context.Context, target string, opts ...WarmTransferOption) error {
	c := callOf(ctx)
	if c == nil {
		return ErrNotACall
	}
	cfg := warmConfig{answerTimeout: DefaultAnswerTimeout, decideTimeout: DefaultDecisionTimeout, summaryTimeout: DefaultSummaryDeadline}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.answerTimeout <= 0 {
		cfg.answerTimeout = DefaultAnswerTimeout
	}
	if cfg.decideTimeout <= 0 {
		cfg.decideTimeout = DefaultDecisionTimeout
	}
	return c.warmTransfer(ctx, target, cfg)
}

// step records a transfer step: its state in the session's user data,
// then its event, which checkpoints it.
func (c *call) step(ctx context.Context, kind events.Kind, st TransferState, e events.Event) {
	sess := c.hc.Session()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	if err := sess.SetUserData(ctx, TransferStateKey, st); err != nil {
		c.s.cfg.log.Debug("transfer state not kept", "call_id", c.id, "err", err)
	}
	e.Kind = kind
	if err := sess.Emit(ctx, e); err != nil {
		c.s.cfg.log.Debug("transfer event not emitted", "call_id", c.id, "kind", kind, "err", err)
	}
}

func (c *call) warmTransfer(ctx context.Context, target string, cfg warmConfig) (err error) {
	var uri sipmsg.Uri
	if err := sipmsg.ParseUri(target, &uri); err != nil {
		return fmt.Errorf("%w: target %q: %v", ErrTransferFailed, target, err)
	}
	if !c.warm.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: a transfer is already under way", ErrTransferFailed)
	}
	defer c.warm.Store(false)
	log := c.s.cfg.log.With("call_id", c.id, "target", target)
	// What the agent was saying as it called the tool plays out first.
	if err := tools.WaitPlayout(ctx); err != nil {
		log.Debug("warm transfer: the agent's words before it were cut", "err", err)
	}
	st := TransferState{Target: target, Step: "started"}
	c.step(ctx, events.TransferStarted, st, events.Event{Text: target})
	hold := &holdPlayer{h: c.s.cfg.hold}
	c.tap.tap.Store(&lineTap{out: hold.fill})
	var p *person
	defer func() {
		if err == nil {
			return
		}
		if p != nil {
			p.hangUp()
		}
		c.tap.tap.Store(nil) // the agent has the caller again
		st.Step, st.Reason = "failed", failReason(err)
		c.step(ctx, events.TransferFailed, st, events.Event{Text: target, Reason: st.Reason, Error: err.Error()})
		log.Info("warm transfer failed: the agent has the caller again", "reason", st.Reason, "err", err)
	}()
	briefing := c.briefing(ctx, cfg)

	actx, cancel := context.WithTimeout(ctx, cfg.answerTimeout)
	d, err := c.s.dial(actx, target, uri)
	cancel()
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ErrTransferFailed, ctx.Err())
	case actx.Err() != nil:
		return fmt.Errorf("%w: within %v", ErrTransferNoAnswer, cfg.answerTimeout)
	case refused(err):
		return fmt.Errorf("%w: %v", ErrTransferDeclined, err)
	default:
		return fmt.Errorf("%w: %v", ErrTransferNoAnswer, err)
	}
	p, err = c.s.newPerson(c, d)
	if err != nil {
		d.bye(err)
		p = nil
		return fmt.Errorf("%w: %v", ErrTransferFailed, err)
	}
	var text string
	select {
	case text = <-briefing: // the summary has a deadline of its own
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrTransferFailed, ctx.Err())
	}
	st.Step = "briefing"
	c.step(ctx, events.TransferBriefing, st, events.Event{Text: text})
	p.brief(text)
	log.Info("warm transfer: the person answered; briefing", "codec", d.chosen.Name)

	if err := p.decide(ctx, c, cfg.decideTimeout); err != nil {
		return err
	}
	log.Info("warm transfer: the person accepted")
	how := "bridge"
	p.player.Flush(1) // whatever of the briefing is left
	if c.canReplace && !cfg.noRefer {
		if rerr := c.referReplaces(ctx, p); rerr == nil {
			how = "refer"
		} else {
			log.Warn("warm transfer: REFER with Replaces failed: bridging instead", "err", rerr)
		}
	}
	st.Step, st.How = "connected", how
	if how == "refer" {
		c.step(ctx, events.TransferConnected, st, events.Event{Text: target, Reason: how})
		c.s.spawn(func() { p.awaitReplaced() })
		c.hangUp(errPutThrough)
		return nil
	}
	p.bridge(c)
	c.step(ctx, events.TransferConnected, st, events.Event{Text: target, Reason: how})
	c.s.spawn(func() { p.runBridge(c) })
	return nil
}

// briefing returns, on a channel, the briefing: cfg's, or the model's
// summary (written while the person's phone rings), or FallbackBriefing.
func (c *call) briefing(ctx context.Context, cfg warmConfig) <-chan string {
	out := make(chan string, 1)
	if cfg.briefing != "" {
		out <- cfg.briefing
		return out
	}
	go func() {
		text, err := c.hc.Session().Summary(ctx, cfg.summaryTimeout)
		if err != nil || strings.TrimSpace(text) == "" {
			c.s.cfg.log.Warn("warm transfer: no summary for the briefing", "call_id", c.id, "err", err)
			text = FallbackBriefing
		}
		out <- text
	}()
	return out
}

// refused reports whether a placed call's failure was the person's phone
// saying busy or declined.
func refused(err error) bool {
	var a *answeredError
	return errors.As(err, &a) && (a.code == 486 || a.code == 600 || a.code == 603)
}

// failReason names a failure in transfer_failed events.
func failReason(err error) string {
	switch {
	case errors.Is(err, ErrTransferDeclined):
		return "declined"
	case errors.Is(err, ErrTransferNoAnswer):
		return "no_answer"
	case errors.Is(err, ErrTransferNoDecision):
		return "no_decision"
	case errors.Is(err, ErrTransferHungUp):
		return "hung_up"
	}
	return "error"
}

// takesReplaces reports whether a request or response advertises that its
// sender takes REFER (Allow) and Replaces (Supported).
func takesReplaces(m headered) bool {
	return m != nil && hasToken(m, "Allow", "REFER") && hasToken(m, "Supported", "replaces")
}

// takesRefer reports whether a request advertises that its sender takes
// REFER (Allow): a phone that does not say so may drop the call on one.
func takesRefer(m headered) bool { return m != nil && hasToken(m, "Allow", "REFER") }

type headered interface {
	GetHeaders(name string) []sipmsg.Header
}

// hasToken reports whether a header name of m lists token.
func hasToken(m headered, name, token string) bool {
	for _, h := range m.GetHeaders(name) {
		for _, v := range strings.Split(h.Value(), ",") {
			if strings.EqualFold(strings.TrimSpace(v), token) {
				return true
			}
		}
	}
	return false
}

// spawn runs fn on a goroutine the server waits for on Close.
func (s *Server) spawn(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// person is a warm transfer's second leg: Holdline's call to the person,
// whose media it runs itself (no session): the briefing out, the
// person's keys and words in, then, bridged, the caller's audio.
type person struct {
	s      *Server
	c      *call
	d      *dialed
	id     string // Call-ID
	leg    *leg
	player *media.Player
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	legErr chan error // the leg's end (RTP timeout)

	decision  chan bool // true: accepted
	briefDone chan struct{}
	doneOnce  sync.Once

	bridged   atomic.Bool
	toPerson  *pcmQueue // the caller's audio, at the person's rate
	toCaller  *pcmQueue // the person's audio, at the caller's rate
	scratch   []int16   // the player's goroutine's
	hungUp    sync.Once
	recognise struct {
		stream stt.Stream
		det    *vad.Energy
		seg    *vad.Segmenter
	}
}

// newPerson starts the media of the answered call d to the person.
func (s *Server) newPerson(c *call, d *dialed) (*person, error) {
	p := &person{s: s, c: c, d: d, id: d.dlg.InviteRequest.CallID().Value(), legErr: make(chan error, 1),
		decision: make(chan bool, 1), briefDone: make(chan struct{})}
	tePT := -1
	if d.answer.TelephoneEvent != nil {
		tePT = int(d.answer.TelephoneEvent.PayloadType)
	}
	inputRate := media.Rate16k
	if d.chosen.ClockRate == 8000 {
		inputRate = media.Rate8k
	}
	var err error
	p.leg, err = newLeg(d.conn, d.chosen, tePT, inputRate, s.cfg.rtpTimeout, legHandler{Audio: p.audio, DTMF: p.key},
		s.cfg.log.With("call_id", p.id, "leg", "person"))
	if err != nil {
		return nil, err
	}
	p.leg.symmetric = s.cfg.symmetric
	p.leg.pacer = s.pacer
	p.leg.sec.Store(d.sec) // SRTP, when the person's phone took it
	p.leg.setRemote(netip.AddrPortFrom(d.answer.Addr, uint16(d.answer.Port)), AnswerDirection(d.answer))
	p.toPerson = &pcmQueue{rate: p.leg.Rate()}
	p.toCaller = &pcmQueue{rate: c.leg.Rate()}
	p.player, err = media.NewPlayer(media.SinkFunc(p.out),
		media.WithPlayerRate(p.leg.Rate()), media.WithFrameDuration(media.DefaultFrameDuration), media.WithIdleSilence(true),
		media.WithEpochDone(func(uint64) { p.doneOnce.Do(func() { close(p.briefDone) }) }))
	if err != nil {
		p.leg.conn.Close()
		return nil, err
	}
	// The person's leg lives as long as the caller's call, at most.
	p.ctx, p.cancel = context.WithCancel(c.hc.Context())
	if agent := c.hc.Session().Agent(); agent != nil && agent.STT != nil {
		if st, err := agent.STT.Stream(p.ctx, inputRate); err == nil {
			p.recognise.stream = st
			p.recognise.det = vad.NewEnergy()
			p.recognise.seg = vad.NewSegmenter(vad.SegmenterConfig{})
		} else {
			s.cfg.log.Warn("warm transfer: no recogniser for the person's answer: keys only", "call_id", c.id, "err", err)
		}
	}
	s.mu.Lock()
	s.persons[p.id] = p
	s.mu.Unlock()
	p.wg.Go(func() { p.legErr <- p.leg.run(p.ctx) })
	p.wg.Go(func() { _ = p.player.Run(p.ctx) })
	if st := p.recognise.stream; st != nil {
		p.wg.Go(func() { p.listen(st) })
	}
	return p, nil
}

// out sends the player's frame (the briefing, or silence) to the person,
// or, bridged, the caller's audio.
func (p *person) out(f media.Frame) error {
	if p.bridged.Load() {
		if cap(p.scratch) < len(f.Samples) {
			p.scratch = make([]int16, len(f.Samples))
		}
		buf := p.scratch[:len(f.Samples)]
		p.toPerson.pull(buf, f.SampleRate)
		f = media.Frame{Samples: buf, SampleRate: f.SampleRate}
	}
	return p.leg.WriteFrame(f)
}

// audio takes the person's audio: to the caller when bridged, else to the
// recogniser, with the end of each utterance told by a voice detector.
func (p *person) audio(f media.Frame) {
	r := &p.recognise
	if p.bridged.Load() {
		p.toCaller.push(f)
		if r.stream != nil {
			// Decided: the recogniser has nothing more to hear. Closed
			// here, on the goroutine that writes to it.
			_ = r.stream.Close()
			r.stream = nil
		}
		return
	}
	if r.stream == nil {
		return
	}
	_ = r.stream.Write(f)
	prob, err := r.det.Detect(f)
	if err != nil {
		return
	}
	if r.seg.Push(prob, time.Duration(len(f.Samples))*time.Second/time.Duration(f.SampleRate)) == vad.Stopped {
		_ = r.stream.EndOfSpeech()
	}
}

// listen reads the recogniser's finals for a yes or a no.
func (p *person) listen(st stt.Stream) {
	defer st.Close()
	for {
		tr, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && p.ctx.Err() == nil {
				p.s.cfg.log.Warn("warm transfer: the recogniser failed: keys only", "call_id", p.c.id, "err", err)
			}
			return
		}
		if !tr.Final {
			continue
		}
		if yes, ok := answerOf(tr.Text); ok {
			p.decided(yes)
		}
	}
}

// key takes the person's key presses: 1 accepts, 2 declines.
func (p *person) key(d rune) {
	switch d {
	case '1':
		p.decided(true)
	case '2':
		p.decided(false)
	}
}

func (p *person) decided(yes bool) {
	select {
	case p.decision <- yes:
	default: // the first decision stands
	}
}

// Words that accept or decline a transfer; a decline word wins ("no, not
// now, sorry").
var (
	acceptWords  = []string{"yes", "yeah", "yep", "yup", "sure", "ok", "okay", "accept", "accepted", "alright", "fine", "connect"}
	declineWords = []string{"no", "nope", "not", "decline", "declined", "busy", "cannot", "can't", "reject", "later"}
)

// answerOf reads an accept or a decline in words.
func answerOf(text string) (yes, ok bool) {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r == '\'')
	})
	accept := false
	for _, w := range words {
		for _, d := range declineWords {
			if w == d {
				return false, true
			}
		}
		for _, a := range acceptWords {
			if w == a {
				accept = true
			}
		}
	}
	return accept, accept
}

// brief speaks text to the person with the agent's voice, on a goroutine
// of the person's; briefDone closes once it has played (at once without a
// voice).
func (p *person) brief(text string) {
	p.wg.Go(func() {
		if err := p.speak(text); err != nil && p.ctx.Err() == nil {
			p.s.cfg.log.Warn("warm transfer: the briefing was not spoken", "call_id", p.c.id, "err", err)
		}
		p.player.EndEpoch(1)
	})
}

func (p *person) speak(text string) error {
	agent := p.c.hc.Session().Agent()
	if agent == nil || agent.TTS == nil {
		return errors.New("the agent has no voice")
	}
	stream, err := agent.TTS.Synthesize(p.ctx, text)
	if err != nil {
		return err
	}
	defer stream.Close()
	var rs *media.Resampler
	from := 0
	for {
		ch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		pcm := ch.Audio.Samples
		if len(pcm) == 0 {
			continue
		}
		if r := ch.Audio.SampleRate; r != p.player.Rate() {
			if rs == nil || from != r {
				if rs, err = media.NewResampler(r, p.player.Rate()); err != nil {
					return err
				}
				from = r
			}
			pcm = rs.Process(nil, pcm)
		}
		if err := p.player.Enqueue(p.ctx, 1, pcm); err != nil {
			return err
		}
	}
}

// decide waits for the person's answer: nil once they accept; an error
// when they decline, hang up, do not decide within timeout of the
// briefing's end, or the caller hangs up or ctx ends first.
func (p *person) decide(ctx context.Context, c *call, timeout time.Duration) error {
	return p.await(ctx, p.d.dlg.Context().Done(), c.hc.Context().Done(), timeout)
}

// await is decide on channels: hungUp closes when the person hangs up,
// callerGone when the caller's call ends.
func (p *person) await(ctx context.Context, hungUp, callerGone <-chan struct{}, timeout time.Duration) error {
	var deadline <-chan time.Time
	briefed := p.briefDone
	for {
		select {
		case yes := <-p.decision:
			if yes {
				return nil
			}
			return ErrTransferDeclined
		case <-briefed:
			briefed = nil
			t := time.NewTimer(timeout)
			defer t.Stop()
			deadline = t.C
		case <-deadline:
			return fmt.Errorf("%w: within %v of the briefing", ErrTransferNoDecision, timeout)
		case <-hungUp:
			return ErrTransferHungUp
		case err := <-p.legErr:
			p.legErr <- err
			return fmt.Errorf("%w: %v", ErrTransferHungUp, err)
		case <-callerGone:
			return fmt.Errorf("%w: the caller hung up", ErrTransferFailed)
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrTransferFailed, ctx.Err())
		}
	}
}

// bridge connects the person's media to the caller's: each hears the
// other, the agent neither.
func (p *person) bridge(c *call) {
	p.bridged.Store(true)
	c.tap.tap.Store(&lineTap{out: p.toCaller.pull, in: p.toPerson.push})
}

// runBridge keeps the bridge until either side hangs up, then hangs up the
// other.
func (p *person) runBridge(c *call) {
	select {
	case <-p.d.dlg.Context().Done():
		c.hangUp(errPutThrough)
	case <-p.legErr:
		c.hangUp(errPutThrough)
	case <-p.ctx.Done(): // the caller's call ended
	}
	p.hangUp()
}

// awaitReplaced waits, after a REFER with Replaces succeeded, for the
// person's side to end Holdline's dialog with it (replaced by the
// caller's), and hangs it up itself if it has not within replaceGrace.
func (p *person) awaitReplaced() {
	t := time.NewTimer(replaceGrace)
	defer t.Stop()
	select {
	case <-p.d.dlg.Context().Done():
	case <-t.C:
		p.s.cfg.log.Info("warm transfer: the person's side kept Holdline's dialog after the replacement: hanging it up", "call_id", p.id)
	case <-p.s.ctx.Done():
	}
	p.hangUp()
}

// hangUp ends the person's leg: BYE unless they hung up, media stopped.
func (p *person) hangUp() {
	p.hungUp.Do(func() {
		p.cancel()
		p.wg.Wait()
		p.s.mu.Lock()
		delete(p.s.persons, p.id)
		p.s.mu.Unlock()
		if p.d.dlg.Context().Err() == nil {
			bctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
			_ = p.d.dlg.Bye(bctx)
			cancel()
		}
		p.d.dlg.Close()
	})
}

// onPersonInfo takes a key the person pressed as SIP INFO; false when req
// is not in a person's dialog.
func (s *Server) onPersonInfo(req *sipmsg.Request, tx sipmsg.ServerTransaction) bool {
	s.mu.Lock()
	p := s.persons[callID(req)]
	s.mu.Unlock()
	if p == nil {
		return false
	}
	digit, ok := infoDigit(req)
	if !ok {
		respond(tx, req, 415, "Unsupported Media Type", "INFO carries application/dtmf-relay or application/dtmf only")
		return true
	}
	_ = tx.Respond(sipmsg.NewResponseFromRequest(req, 200, "OK", nil))
	p.key(digit)
	return true
}

// referReplaces asks the caller's side to call the person with Replaces
// (RFC 3891) naming Holdline's dialog with them: the person's phone swaps
// that dialog for the caller's. It returns nil once the caller's side
// reports the person's 200 (NOTIFY); the caller hears hold meanwhile.
func (c *call) referReplaces(ctx context.Context, p *person) error {
	dlg := p.d.dlg
	res := dlg.InviteResponse
	toTag, _ := res.To().Params.Get("tag")
	fromTag, _ := dlg.InviteRequest.From().Params.Get("tag")
	contact := dlg.InviteRequest.Recipient
	if ct := res.Contact(); ct != nil {
		contact = ct.Address
	}
	// Replaces names the dialog as the person sees it: their tag is the
	// to-tag, Holdline's the from-tag.
	replaces := p.id + ";to-tag=" + toTag + ";from-tag=" + fromTag
	u := contact.Clone()
	u.Headers = nil
	referTo := "<" + u.String() + "?Replaces=" + url.QueryEscape(replaces) + ">"

	ctx, cancel := context.WithTimeout(ctx, referTimeout)
	defer cancel()
	notify, done, err := c.refer(ctx, referTo)
	if err != nil {
		return err
	}
	defer done()
	code, err := finalNotify(ctx, notify)
	switch {
	case err != nil:
		return fmt.Errorf("no NOTIFY of the caller's call to the person: %w", err)
	case code >= 300:
		return fmt.Errorf("the caller's call to the person was answered %d", code)
	}
	return nil
}
