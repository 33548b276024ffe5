package opusrtp

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/rtp"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/rtpjitter"
)

// Receiver is the caller's audio on its way to the session: packets go
// into a jitter buffer of encoded packets as they arrive (Push, from the
// track reader's goroutine), and the playout goroutine (Run) decodes one
// frame period's worth every 20 ms, so that a lost packet can be rebuilt
// from the next one's in-band FEC, and the session gets a steady clock of
// frames whatever the network does.
type Receiver struct {
	jb      *rtpjitter.Buffer
	dec     *opus.Decoder
	rate    int // the decoder's
	framer  *media.Framer
	emit    func(media.Frame) error
	pcm     []int16
	payload []byte

	packetsIn, fec, concealed, decodeErrors atomic.Uint64
}

// ReceiverStats counts what the network did to the caller's audio.
type ReceiverStats struct {
	PacketsIn uint64
	// Lost counts packets missing at their playout time (never received,
	// or received late); FECRecovered those of them rebuilt from the next
	// packet's in-band FEC. Concealed counts the frame periods filled by
	// the decoder's loss concealment instead.
	Lost, FECRecovered, Concealed uint64
	// Late counts packets dropped because they came after their slot was
	// played; Duplicates, packets received twice.
	Late, Duplicates uint64
	DecodeErrors     uint64
	// JitterDelay is the delay the jitter buffer adds now (it adapts to
	// the network's jitter, up to MaxJitterDelay).
	JitterDelay, MaxJitterDelay time.Duration
}

// NewReceiver returns a receiver that hands audio 20 ms frames at rate
// (16 kHz for the pipeline), from one goroutine (Run's). The options set
// its jitter buffer; its clock is Opus's 48 kHz.
func NewReceiver(rate int, audio func(media.Frame), opts ...rtpjitter.Option) (*Receiver, error) {
	// Decoding straight at the pipeline's rate, where Opus can, costs less
	// than decoding at 48 kHz and resampling.
	decRate := opusRate(rate)
	dec, err := opus.NewDecoder(decRate, 1)
	if err != nil {
		return nil, fmt.Errorf("opusrtp: opus decoder: %w", err)
	}
	framer, err := media.NewFramer(rate, media.DefaultFrameDuration)
	if err != nil {
		return nil, fmt.Errorf("opusrtp: framer: %w", err)
	}
	jb, err := rtpjitter.New(append([]rtpjitter.Option{rtpjitter.WithClockRate(opusClock)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("opusrtp: %w", err)
	}
	return &Receiver{
		jb: jb, dec: dec, rate: decRate, framer: framer,
		emit: func(f media.Frame) error {
			if audio != nil {
				audio(f)
			}
			return nil
		},
		pcm:     make([]int16, 6*decRate/50), // the longest Opus packet: 120 ms
		payload: make([]byte, rtpjitter.MaxPayload),
	}, nil
}

// Push takes a packet from the network.
func (in *Receiver) Push(pkt *rtp.Packet, now time.Time) {
	in.packetsIn.Add(1)
	_ = in.jb.Push(rtpjitter.Packet{
		Seq: pkt.SequenceNumber, Timestamp: pkt.Timestamp, Marker: pkt.Marker,
		Payload: pkt.Payload, Duration: uint32(opusSamples(pkt.Payload)),
	}, now)
}

// Run ticks the playout every frame period until stop is closed.
func (in *Receiver) Run(stop <-chan struct{}) {
	t := time.NewTicker(media.DefaultFrameDuration)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			in.Tick(time.Now())
		}
	}
}

// Tick decodes what the jitter buffer hands out for one frame period and
// passes it on as frames. Run calls it; tests may instead.
func (in *Receiver) Tick(now time.Time) {
	in.jb.Tick(now)
	for {
		it, ok := in.jb.Next(in.payload)
		if !ok {
			return
		}
		// The decoder fills exactly the missing duration on FEC and
		// concealment: it sizes the output by the slice's capacity.
		n := int(it.Duration) * in.rate / opusClock
		if n <= 0 || n > len(in.pcm) {
			continue
		}
		out := in.pcm[:n:n]
		switch it.Kind {
		case rtpjitter.Play:
			k, err := in.dec.Decode(it.Payload, in.pcm)
			if err != nil || k == 0 {
				in.decodeErrors.Add(1)
				in.conceal(out)
				break
			}
			out = in.pcm[:k]
		case rtpjitter.Recover:
			if hasLBRR(it.Payload) && in.dec.DecodeFEC(it.Payload, out) == nil {
				in.fec.Add(1)
				break
			}
			in.conceal(out) // no FEC in the next packet: as good as it gets
		case rtpjitter.Conceal:
			in.conceal(out)
		default:
			clear(out)
		}
		if it.Skip {
			continue // decoded for the decoder's state, not played
		}
		_ = in.framer.Write(out, in.rate, in.emit)
	}
}

func (in *Receiver) conceal(out []int16) {
	if in.dec.DecodePLC(out) != nil {
		clear(out)
	}
	in.concealed.Add(1)
}

// Stats returns the receiver's counters.
func (in *Receiver) Stats() ReceiverStats {
	var s ReceiverStats
	js := in.jb.Stats()
	s.PacketsIn = in.packetsIn.Load()
	s.Lost = js.Lost
	s.Late = js.Late
	s.Duplicates = js.Duplicate
	s.Concealed = in.concealed.Load()
	s.FECRecovered = in.fec.Load()
	s.DecodeErrors = in.decodeErrors.Load()
	s.JitterDelay = in.jb.Delay()
	s.MaxJitterDelay = in.jb.MaxDelay()
	return s
}
