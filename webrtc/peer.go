package webrtc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/sdp/v3"
	pion "github.com/pion/webrtc/v4"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/opusrtp"
)

// ChannelLabel is the data channel a client opens for messages.
const ChannelLabel = "holdline"

const (
	// maxChannelBuffer is how much may wait in the data channel before
	// further messages are dropped rather than queued without bound.
	maxChannelBuffer = 1 << 20
)

// Handler receives what a peer gets from the client. Each function may be
// nil. They are called from the peer's goroutines and must not block for
// long: Audio is on the media path.
type Handler struct {
	// Audio gets the caller's audio in 20 ms frames at 16 kHz, in order,
	// from one goroutine.
	Audio func(media.Frame)
	// Message gets each data channel message.
	Message func([]byte)
	// ChannelOpen is called when the client's data channel opens.
	ChannelOpen func()
	// Connected reports media connectivity: false when ICE lost the client
	// (it may come back), true when it is (again) connected.
	Connected func(bool)
}

// Stats counts what a peer did.
type Stats struct {
	PacketsIn, PacketsOut uint64
	// Lost counts the caller's packets missing at their playout time
	// (never received, or received late); FECRecovered those of them
	// rebuilt from the next packet's in-band FEC. Concealed counts the
	// frame periods filled by the decoder's loss concealment instead.
	Lost, FECRecovered, Concealed uint64
	// Late counts packets dropped because they came after their slot was
	// played; Duplicates, packets received twice.
	Late, Duplicates uint64
	DecodeErrors     uint64
	// JitterDelay is the delay the input's jitter buffer adds now (it
	// adapts to the network's jitter, up to MaxJitterDelay): part of the
	// time from the caller's speech to the session hearing it.
	JitterDelay, MaxJitterDelay time.Duration
	// LossReported is the percentage of our packets the client last
	// reported lost (RTCP), as the encoder was told to expect it.
	LossReported            int
	DroppedOut              uint64 // agent frames dropped: no connection yet, or a send failed
	PausedOut               uint64 // packets of silence not sent: the sender pauses in silence
	MessagesOut, DroppedMsg uint64
}

// Peer is one client connection.
type Peer struct {
	t      *Transport
	pc     *pion.PeerConnection
	track  *pion.TrackLocalStaticRTP
	h      Handler
	answer string

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	mu        sync.Mutex // guards dc, closed, wg.Add
	dc        *pion.DataChannel
	closed    bool

	out *opusrtp.Sender
	in  atomic.Pointer[opusrtp.Receiver] // the caller's audio, once its track came

	messagesOut, droppedMsg atomic.Uint64
}

// Answer makes a peer for offer and returns it with its answer ready
// (Peer.Answer). It waits, bounded by ctx and the gather timeout, for the
// answer's candidates. An offer that is not SDP, has no audio or no Opus
// gives ErrBadOffer with the reason.
func (t *Transport) Answer(ctx context.Context, offer string, h Handler) (*Peer, error) {
	if err := checkOffer(offer); err != nil {
		return nil, err
	}
	pc, err := t.api.NewPeerConnection(pion.Configuration{ICEServers: t.pionServers()})
	if err != nil {
		return nil, fmt.Errorf("webrtc: new peer: %w", err)
	}
	p := &Peer{t: t, pc: pc, h: h, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	p.track, err = pion.NewTrackLocalStaticRTP(opusCodec, "audio", "holdline")
	if err != nil {
		return nil, fmt.Errorf("webrtc: track: %w", err)
	}
	p.out = opusrtp.NewSender(p.track, opusrtp.WithOpus(t.cfg.opusComplexity, t.cfg.opusBitrate), opusrtp.WithPayloadType(opusPayloadType))
	// The encoder is made for the rate of the first frame; this one
	// checks, before the client is answered, that one can be made at all.
	if err := p.out.Check(); err != nil {
		return nil, fmt.Errorf("webrtc: %w", err)
	}

	pc.OnConnectionStateChange(p.onState)
	pc.OnTrack(p.onTrack)
	pc.OnDataChannel(p.onDataChannel)

	if err := pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeOffer, SDP: offer}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadOffer, err)
	}
	sender, err := pc.AddTrack(p.track)
	if err != nil {
		return nil, fmt.Errorf("webrtc: add track: %w", err)
	}
	var ssrc uint32
	if enc := sender.GetParameters().Encodings; len(enc) > 0 {
		ssrc = uint32(enc[0].SSRC)
	}
	p.goRun(func() { p.readRTCP(sender, ssrc) })
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadOffer, err)
	}
	gathered := pion.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(answer); err != nil {
		return nil, fmt.Errorf("webrtc: local description: %w", err)
	}
	gctx, cancel := t.gatherCtx(ctx)
	defer cancel()
	select {
	case <-gathered:
	case <-gctx.Done():
		if ctx.Err() != nil {
			return nil, fmt.Errorf("webrtc: gathering candidates: %w", ctx.Err())
		}
		// A STUN or TURN server that does not answer must not cost the
		// caller the call: answer with the candidates gathered so far
		// (the host ones at least; the browser's checks teach the rest).
		t.cfg.log.Warn("webrtc: candidate gathering did not finish in time; answering with the candidates gathered",
			"timeout", t.cfg.gatherTimeout)
	}
	p.answer = pc.LocalDescription().SDP
	ok = true
	return p, nil
}

// checkOffer says what is wrong with an offer before pion sees it, in words
// a client developer can act on.
func checkOffer(offer string) error {
	if strings.TrimSpace(offer) == "" {
		return fmt.Errorf("%w: empty body; send the SDP offer", ErrBadOffer)
	}
	var sd sdp.SessionDescription
	if err := sd.Unmarshal([]byte(offer)); err != nil {
		return fmt.Errorf("%w: not SDP: %v", ErrBadOffer, err)
	}
	audio, opusOffered := false, false
	for _, m := range sd.MediaDescriptions {
		if m.MediaName.Media != "audio" {
			continue
		}
		audio = true
		for _, a := range m.Attributes {
			if a.Key == "rtpmap" && strings.Contains(strings.ToLower(a.Value), "opus/48000") {
				opusOffered = true
			}
		}
	}
	switch {
	case !audio:
		return fmt.Errorf("%w: the offer has no audio section", ErrBadOffer)
	case !opusOffered:
		return fmt.Errorf("%w: the offer's audio has no Opus (opus/48000)", ErrBadOffer)
	}
	return nil
}

// Answer is the SDP answer to send back to the client.
func (p *Peer) Answer() string { return p.answer }

// Done is closed when the peer is closed or its connection failed for good.
func (p *Peer) Done() <-chan struct{} { return p.done }

// goRun runs fn on a goroutine Close waits for; after Close it does nothing.
func (p *Peer) goRun(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fn()
	}()
}

func (p *Peer) onState(s pion.PeerConnectionState) {
	switch s {
	case pion.PeerConnectionStateConnected:
		p.out.SetConnected(true)
		if p.h.Connected != nil {
			p.h.Connected(true)
		}
	case pion.PeerConnectionStateDisconnected:
		p.out.SetConnected(false)
		if p.h.Connected != nil {
			p.h.Connected(false)
		}
	case pion.PeerConnectionStateFailed, pion.PeerConnectionStateClosed:
		p.out.SetConnected(false)
		// Closing from inside pion's callback would wait on itself.
		go p.Close()
	}
}

func (p *Peer) onDataChannel(dc *pion.DataChannel) {
	if dc.Label() != ChannelLabel {
		_ = dc.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = dc.Close()
		return
	}
	p.dc = dc
	p.mu.Unlock()
	dc.SetBufferedAmountLowThreshold(maxChannelBuffer / 2)
	dc.OnOpen(func() {
		if p.h.ChannelOpen != nil {
			p.h.ChannelOpen()
		}
	})
	dc.OnMessage(func(m pion.DataChannelMessage) {
		if p.h.Message != nil {
			p.h.Message(m.Data)
		}
	})
}

// Send sends a message on the data channel. It never waits: when the
// channel is not open or too much is queued the message is dropped and
// counted, and an error says why.
func (p *Peer) Send(msg []byte) error {
	p.mu.Lock()
	dc := p.dc
	p.mu.Unlock()
	switch {
	case dc == nil || dc.ReadyState() != pion.DataChannelStateOpen:
		p.droppedMsg.Add(1)
		return errors.New("webrtc: data channel not open")
	case dc.BufferedAmount() > maxChannelBuffer:
		p.droppedMsg.Add(1)
		return errors.New("webrtc: data channel congested")
	}
	if err := dc.SendText(string(msg)); err != nil {
		p.droppedMsg.Add(1)
		return fmt.Errorf("webrtc: send: %w", err)
	}
	p.messagesOut.Add(1)
	return nil
}

func (p *Peer) onTrack(track *pion.TrackRemote, _ *pion.RTPReceiver) {
	if track.Kind() != pion.RTPCodecTypeAudio {
		return
	}
	in, err := opusrtp.NewReceiver(p.t.cfg.inputRate, p.h.Audio, p.t.cfg.jitter...)
	if err != nil {
		p.t.cfg.log.Error("webrtc: caller audio", "err", err)
		return
	}
	if !p.in.CompareAndSwap(nil, in) {
		return // one caller, one voice: a second audio track is not heard
	}
	// The reader owns the playout: when the track ends (the peer closes),
	// the reader returns and stops it.
	stop := make(chan struct{})
	p.goRun(func() { in.Run(stop) })
	p.goRun(func() {
		defer close(stop)
		p.readAudio(track, in)
	})
}

// readAudio puts the caller's packets into the input's jitter buffer until
// the track ends.
func (p *Peer) readAudio(track *pion.TrackRemote, in *opusrtp.Receiver) {
	for {
		pkt, _, err := track.ReadRTP()
		if err != nil {
			return
		}
		in.Push(pkt, time.Now())
	}
}

// readRTCP reads what the client says of our audio until the sender ends.
// It must be read for the interceptors (reports) to work, and the loss the
// client reports sets the FEC the encoder adds.
func (p *Peer) readRTCP(sender *pion.RTPSender, ssrc uint32) {
	for {
		pkts, _, err := sender.ReadRTCP()
		if err != nil {
			return
		}
		p.out.ObserveRTCP(pkts, ssrc)
	}
}

// WriteFrame sends agent audio: a media.Sink for the session's player. It
// never blocks and never fails: audio that cannot go out (not connected
// yet, a send error) is dropped and counted, because the player must keep
// its pace whatever the network does.
func (p *Peer) WriteFrame(f media.Frame) error { return p.out.WriteFrame(f) }

// Stats returns the peer's counters.
func (p *Peer) Stats() Stats {
	out := p.out.Stats()
	s := Stats{
		PacketsOut:   out.Sent,
		LossReported: out.LossReported,
		DroppedOut:   out.Dropped,
		PausedOut:    out.Paused,
		MessagesOut:  p.messagesOut.Load(),
		DroppedMsg:   p.droppedMsg.Load(),
	}
	if in := p.in.Load(); in != nil {
		rs := in.Stats()
		s.PacketsIn, s.Lost, s.Late, s.Duplicates = rs.PacketsIn, rs.Lost, rs.Late, rs.Duplicates
		s.Concealed, s.FECRecovered, s.DecodeErrors = rs.Concealed, rs.FECRecovered, rs.DecodeErrors
		s.JitterDelay, s.MaxJitterDelay = rs.JitterDelay, rs.MaxJitterDelay
	}
	return s
}

// Close ends the connection and waits for the peer's goroutines. It is
// safe to call more than once and from any goroutine but the Handler's.
func (p *Peer) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		err = p.pc.Close()
		p.wg.Wait()
		close(p.done)
	})
	return err
}
