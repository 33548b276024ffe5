package opusrtp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"github.com/holdline/holdline/media"
)

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
	// DefaultPayloadType is the payload type a Sender's packets carry
	// unless told (a track bound to a connection rewrites it anyway).
	DefaultPayloadType = 111
)

// RTPWriter is where a Sender's packets go; pion's
// *webrtc.TrackLocalStaticRTP is one.
type RTPWriter interface {
	WriteRTP(*rtp.Packet) error
}

type senderConfig struct {
	complexity, bitrate int
	payloadType         uint8
	ssrc                uint32
}

// SenderOption configures a Sender.
type SenderOption func(*senderConfig)

// WithOpus sets the encoder's complexity (0-10) and bitrate (bits/s).
// A complexity outside 0-10 or a bitrate of zero or less leaves the
// default (5 and 32 kb/s): complexity 0 is Opus's cheapest, a choice of
// its own (webrtc.WithOpus takes it), not "unset".
func WithOpus(complexity, bitrate int) SenderOption {
	return func(c *senderConfig) {
		if complexity >= 0 && complexity <= 10 {
			c.complexity = complexity
		}
		if bitrate > 0 {
			c.bitrate = bitrate
		}
	}
}

// WithPayloadType sets the packets' payload type (default
// DefaultPayloadType).
func WithPayloadType(pt uint8) SenderOption {
	return func(c *senderConfig) { c.payloadType = pt }
}

// WithSSRC sets the packets' SSRC (default 0). A writer that stamps its
// own, as a pion track bound to a connection does, needs none.
func WithSSRC(ssrc uint32) SenderOption {
	return func(c *senderConfig) { c.ssrc = ssrc }
}

// SenderStats counts what a Sender did.
type SenderStats struct {
	Sent    uint64 // packets written
	Paused  uint64 // packets of silence not sent: the sender pauses in silence
	Dropped uint64 // frames or packets dropped: not connected, or a write failed
	// LossReported is the percentage of packets the far end last reported
	// lost (ObserveRTCP), as the encoder was told to expect it.
	LossReported int
}

// Sender is the agent's audio on its way out: a media.Sink for the
// session's paced player that Opus-encodes at the player's own rate (Opus
// takes 8, 12, 16, 24 and 48 kHz as they are; other rates are resampled to
// 48 kHz), one packet per 20 ms, on Opus's 48 kHz RTP clock. Nothing is
// queued, so a barge-in that flushes the player stops the audio at the
// next packet. After ten packets of digital silence it pauses, as Opus DTX
// would, and the next sound starts a talkspurt (marker bit, timestamp
// moved on by the wall clock). The encoder adds in-band FEC in proportion
// to the loss the far end reports (at most 30%).
type Sender struct {
	w   RTPWriter
	cfg senderConfig

	mu      sync.Mutex
	enc     *opus.Encoder
	encRate int // the rate enc codes at: the frames' own, where Opus takes it
	rs      *media.Resampler
	rsFrom  int
	pcm     []int16 // samples at encRate waiting for a whole packet
	scratch []int16
	payload []byte
	lossSet int // what enc was last told

	quiet   int // packets of digital silence in a row
	started bool
	start   time.Time
	ts      uint32
	seq     uint16

	lossPerc  atomic.Int32 // the loss the far end reports
	sent      atomic.Uint64
	paused    atomic.Uint64
	dropped   atomic.Uint64
	connected atomic.Bool
}

// NewSender returns a sender writing to w. It drops what it is given
// until SetConnected(true).
func NewSender(w RTPWriter, opts ...SenderOption) *Sender {
	cfg := senderConfig{complexity: 5, bitrate: 32000, payloadType: DefaultPayloadType}
	for _, o := range opts {
		o(&cfg)
	}
	return &Sender{w: w, cfg: cfg, payload: make([]byte, 1500)}
}

// Check makes an encoder once, to find out early (before a client is
// answered) that one can be made at all.
func (s *Sender) Check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.enc != nil {
		return nil
	}
	return s.setRate(opusRate(media.Rate16k))
}

// SetConnected says whether packets can reach the far end.
func (s *Sender) SetConnected(on bool) { s.connected.Store(on) }

// ObserveRTCP takes the far end's reports of the stream with ssrc: the
// loss they report sets the FEC the encoder adds.
func (s *Sender) ObserveRTCP(pkts []rtcp.Packet, ssrc uint32) {
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
				s.lossPerc.Store(int32(lossPercent(r.FractionLost)))
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

// WriteFrame sends agent audio. It never blocks and never fails: audio
// that cannot go out (not connected yet, a write error) is dropped and
// counted, because the player must keep its pace whatever the network
// does.
func (s *Sender) WriteFrame(f media.Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.SampleRate <= 0 || len(f.Samples) == 0 {
		return nil
	}
	// Opus codes 8, 12, 16, 24 and 48 kHz as they are: the pipeline's
	// frames go in at their own rate, and only other rates are resampled.
	if rate := opusRate(f.SampleRate); rate != s.encRate {
		if err := s.setRate(rate); err != nil {
			s.dropped.Add(1)
			return nil
		}
	}
	samples := f.Samples
	if f.SampleRate != s.encRate {
		if s.rs == nil || s.rsFrom != f.SampleRate {
			rs, err := media.NewResampler(f.SampleRate, s.encRate)
			if err != nil {
				s.dropped.Add(1)
				return nil
			}
			s.rs, s.rsFrom = rs, f.SampleRate
		}
		s.scratch = s.rs.Process(s.scratch[:0], f.Samples)
		samples = s.scratch
	}
	s.pcm = append(s.pcm, samples...)
	packet := s.encRate / 50
	for len(s.pcm) >= packet {
		s.sendPacket(s.pcm[:packet])
		s.pcm = append(s.pcm[:0], s.pcm[packet:]...)
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
func (s *Sender) setRate(rate int) error {
	enc, err := opus.NewEncoder(rate, 1, opus.AppVoIP)
	if err != nil {
		return fmt.Errorf("opusrtp: opus encoder: %w", err)
	}
	_ = enc.SetComplexity(s.cfg.complexity)
	_ = enc.SetBitrate(s.cfg.bitrate)
	// In-band FEC: each packet carries a coarse copy of the one before,
	// which the far end's decoder uses when that one is lost. libopus
	// adds it in proportion to the loss it is told to expect.
	_ = enc.SetInBandFEC(true)
	s.lossSet = int(s.lossPerc.Load())
	_ = enc.SetPacketLossPerc(s.lossSet)
	s.enc, s.encRate = enc, rate
	s.pcm = s.pcm[:0]
	return nil
}

// sendPacket encodes and sends one 20 ms packet. Timestamps advance by a
// packet per packet while audio is continuous, and jump with the wall
// clock across a silence (marker bit set), so the far end's jitter buffer
// sees the pause as a pause, not as late audio.
func (s *Sender) sendPacket(pcm []int16) {
	if !s.connected.Load() {
		s.dropped.Add(1)
		return
	}
	if l := int(s.lossPerc.Load()); l != s.lossSet {
		_ = s.enc.SetPacketLossPerc(l)
		s.lossSet = l
	}
	if silent(pcm) {
		if s.quiet++; s.quiet > silenceTail && s.started {
			s.paused.Add(1)
			return
		}
	} else {
		s.quiet = 0
	}
	n, err := s.enc.Encode(pcm, s.payload)
	if err != nil {
		s.dropped.Add(1)
		return
	}
	now := time.Now()
	marker := false
	switch {
	case !s.started:
		s.started, s.start, marker = true, now, true
	default:
		next := s.ts + opusFrame
		wall := uint32(now.Sub(s.start) * opusClock / time.Second)
		if int32(wall-next) > 2*opusFrame {
			next = wall / opusFrame * opusFrame
			marker = true
		}
		s.ts = next
		s.seq++
	}
	pkt := rtp.Packet{
		Header: rtp.Header{
			Version:        2,
			Marker:         marker,
			PayloadType:    s.cfg.payloadType,
			SequenceNumber: s.seq,
			Timestamp:      s.ts,
			SSRC:           s.cfg.ssrc,
		},
		Payload: s.payload[:n],
	}
	if err := s.w.WriteRTP(&pkt); err != nil {
		s.dropped.Add(1)
		return
	}
	s.sent.Add(1)
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

// Stats returns the sender's counters.
func (s *Sender) Stats() SenderStats {
	return SenderStats{
		Sent: s.sent.Load(), Paused: s.paused.Load(), Dropped: s.dropped.Load(),
		LossReported: int(s.lossPerc.Load()),
	}
}
