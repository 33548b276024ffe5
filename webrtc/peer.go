package webrtc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	pion "github.com/pion/webrtc/v4"

	"github.com/holdline/holdline/media"
)

// ChannelLabel is the data channel a client opens for messages.
const ChannelLabel = "holdline"

const (
	// opusClock is Opus's RTP clock rate, whatever rate it is coded at.
	opusClock = 48000
	// opusFrame is one 20 ms packet in RTP clock ticks.
	opusFrame = opusClock / 50
	// maxLossPercent bounds the loss the encoder is told to expect: above
	// it, more FEC costs the audio more bits than it saves.
	maxLossPercent = 30
	// silenceTail is how many packets of digital silence are sent after
	// sound before the sender pauses. They let a cut end in silence at
	// the client rather than in its concealment of the last sound; after
	// them nothing is sent until the next sound (as Opus DTX would), which
	// saves the encoder and the network the idle time of every call.
	silenceTail = 10
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

	out outbound
	in  atomic.Pointer[input] // the caller's audio, once its track came

	messagesOut, droppedMsg atomic.Uint64
}

// outbound is the agent-audio sender state, touched only by WriteFrame's
// caller (the session's player goroutine).
type outbound struct {
	mu      sync.Mutex
	enc     *opus.Encoder
	encRate int // the rate enc codes at: the frames' own, where Opus takes it
	rs      *media.Resampler
	rsFrom  int
	pcm     []int16 // samples at encRate waiting for a whole packet
	scratch []int16
	payload []byte

	// lossPerc is the loss the client reports (RTCP, from the peer's
	// RTCP reader); lossSet what enc was last told.
	lossPerc atomic.Int32
	lossSet  int

	quiet     int // packets of digital silence in a row
	started   bool
	start     time.Time
	last      time.Time
	ts        uint32
	seq       uint16
	ssrcBase  uint32
	sent      atomic.Uint64
	paused    atomic.Uint64 // silent packets not sent
	dropped   atomic.Uint64
	connected atomic.Bool
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
	// The encoder is made for the rate of the first frame; this one
	// checks, before the client is answered, that one can be made at all.
	if err := p.out.setRate(opusRate(16000), t.cfg); err != nil {
		return nil, err
	}
	p.out.payload = make([]byte, 1500)

	pc.OnConnectionStateChange(p.onState)
	pc.OnTrack(p.onTrack)
	pc.OnDataChannel(p.onDataChannel)

	if err := pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeOffer, SDP: offer}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadOffer, err)
	}
	p.track, err = pion.NewTrackLocalStaticRTP(opusCodec, "audio", "holdline")
	if err != nil {
		return nil, fmt.Errorf("webrtc: track: %w", err)
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
		p.out.connected.Store(true)
		if p.h.Connected != nil {
			p.h.Connected(true)
		}
	case pion.PeerConnectionStateDisconnected:
		p.out.connected.Store(false)
		if p.h.Connected != nil {
			p.h.Connected(false)
		}
	case pion.PeerConnectionStateFailed, pion.PeerConnectionStateClosed:
		p.out.connected.Store(false)
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
	in, err := newInput(p.t.cfg.inputRate, p.h.Audio, p.t.cfg.jitter...)
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
	p.goRun(func() { in.run(stop) })
	p.goRun(func() {
		defer close(stop)
		p.readAudio(track, in)
	})
}

// readAudio puts the caller's packets into the input's jitter buffer until
// the track ends.
func (p *Peer) readAudio(track *pion.TrackRemote, in *input) {
	for {
		pkt, _, err := track.ReadRTP()
		if err != nil {
			return
		}
		in.push(pkt, time.Now())
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
		for _, pkt := range pkts {
			var reports []rtcp.ReceptionReport
			switch r := pkt.(type) {
			case *rtcp.ReceiverReport:
				reports = r.Reports
			case *rtcp.SenderReport: // a client that sends reports in its own
				reports = r.Reports
			}
			for _, r := range reports {
				if r.SSRC == ssrc {
					p.out.lossPerc.Store(int32(lossPercent(r.FractionLost)))
				}
			}
		}
	}
}

// lossPercent turns an RTCP fraction lost (of 256) into the percentage the
// encoder is told to expect, rounded up (any loss asks for some FEC) and
// at most maxLossPercent.
func lossPercent(fraction uint8) int {
	return min((int(fraction)*100+255)/256, maxLossPercent)
}

// WriteFrame sends agent audio: a media.Sink for the session's player. It
// never blocks and never fails: audio that cannot go out (not connected
// yet, a send error) is dropped and counted, because the player must keep
// its pace whatever the network does.
func (p *Peer) WriteFrame(f media.Frame) error {
	o := &p.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if f.SampleRate <= 0 || len(f.Samples) == 0 {
		return nil
	}
	// Opus codes 8, 12, 16, 24 and 48 kHz as they are: the pipeline's
	// frames go in at their own rate, and only other rates are resampled.
	if rate := opusRate(f.SampleRate); rate != o.encRate {
		if err := o.setRate(rate, p.t.cfg); err != nil {
			o.dropped.Add(1)
			return nil
		}
	}
	samples := f.Samples
	if f.SampleRate != o.encRate {
		if o.rs == nil || o.rsFrom != f.SampleRate {
			rs, err := media.NewResampler(f.SampleRate, o.encRate)
			if err != nil {
				o.dropped.Add(1)
				return nil
			}
			o.rs, o.rsFrom = rs, f.SampleRate
		}
		o.scratch = o.rs.Process(o.scratch[:0], f.Samples)
		samples = o.scratch
	}
	o.pcm = append(o.pcm, samples...)
	packet := o.encRate / 50
	for len(o.pcm) >= packet {
		p.sendPacket(o.pcm[:packet])
		o.pcm = append(o.pcm[:0], o.pcm[packet:]...)
	}
	return nil
}

// opusRate is the rate Opus codes audio of this rate at: the rate itself
// where Opus takes it, 48 kHz otherwise.
func opusRate(rate int) int {
	switch rate {
	case 8000, 12000, 16000, 24000, 48000:
		return rate
	}
	return 48000
}

// setRate makes the encoder for audio at rate (one Opus takes). Samples
// of the old rate short of a packet are dropped: a rate change is a new
// voice, at a frame boundary.
func (o *outbound) setRate(rate int, cfg transportConfig) error {
	enc, err := opus.NewEncoder(rate, 1, opus.AppVoIP)
	if err != nil {
		return fmt.Errorf("webrtc: opus encoder: %w", err)
	}
	_ = enc.SetComplexity(cfg.opusComplexity)
	_ = enc.SetBitrate(cfg.opusBitrate)
	// In-band FEC: each packet carries a coarse copy of the one before,
	// which the client's decoder uses when that one is lost. libopus adds
	// it in proportion to the loss it is told to expect.
	_ = enc.SetInBandFEC(true)
	o.lossSet = int(o.lossPerc.Load())
	_ = enc.SetPacketLossPerc(o.lossSet)
	o.enc, o.encRate = enc, rate
	o.pcm = o.pcm[:0]
	return nil
}

// sendPacket encodes and sends one 20 ms packet. Timestamps advance by a
// packet per packet while audio is continuous, and jump with the wall
// clock across a silence (marker bit set), so the client's jitter buffer
// sees the pause as a pause, not as late audio.
func (p *Peer) sendPacket(pcm []int16) {
	o := &p.out
	if !o.connected.Load() {
		o.dropped.Add(1)
		return
	}
	if l := int(o.lossPerc.Load()); l != o.lossSet {
		_ = o.enc.SetPacketLossPerc(l)
		o.lossSet = l
	}
	if silent(pcm) {
		if o.quiet++; o.quiet > silenceTail && o.started {
			o.paused.Add(1)
			return
		}
	} else {
		o.quiet = 0
	}
	n, err := o.enc.Encode(pcm, o.payload)
	if err != nil {
		o.dropped.Add(1)
		return
	}
	now := time.Now()
	marker := false
	switch {
	case !o.started:
		o.started, o.start, marker = true, now, true
	default:
		next := o.ts + opusFrame
		wall := uint32(now.Sub(o.start) * opusClock / time.Second)
		if int32(wall-next) > 2*opusFrame {
			next = wall / opusFrame * opusFrame
			marker = true
		}
		o.ts = next
		o.seq++
	}
	o.last = now
	pkt := rtp.Packet{
		Header: rtp.Header{
			Version:        2,
			Marker:         marker,
			PayloadType:    opusPayloadType,
			SequenceNumber: o.seq,
			Timestamp:      o.ts,
		},
		Payload: o.payload[:n],
	}
	if err := p.track.WriteRTP(&pkt); err != nil {
		o.dropped.Add(1)
		return
	}
	o.sent.Add(1)
}

// silent reports whether pcm is digital silence.
func silent(pcm []int16) bool {
	for _, v := range pcm {
		if v != 0 {
			return false
		}
	}
	return true
}

// Stats returns the peer's counters.
func (p *Peer) Stats() Stats {
	s := Stats{
		PacketsOut:   p.out.sent.Load(),
		LossReported: int(p.out.lossPerc.Load()),
		DroppedOut:   p.out.dropped.Load(),
		PausedOut:    p.out.paused.Load(),
		MessagesOut:  p.messagesOut.Load(),
		DroppedMsg:   p.droppedMsg.Load(),
	}
	if in := p.in.Load(); in != nil {
		in.stats(&s)
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
