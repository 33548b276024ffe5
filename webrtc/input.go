package webrtc

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hraban/opus"
	"github.com/pion/rtp"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/rtpjitter"
)

// input is the caller's audio on its way to the session: packets go into
// a jitter buffer of encoded packets as they arrive (the track reader's
// goroutine), and the playout goroutine decodes one frame period's worth
// every 20 ms, so that a lost packet can be rebuilt from the next one's
// in-band FEC, and the session gets a steady clock of frames whatever the
// network does.
type input struct {
	jb      *rtpjitter.Buffer
	dec     *opus.Decoder
	rate    int // the decoder's
	framer  *media.Framer
	emit    func(media.Frame) error
	pcm     []int16
	payload []byte

	packetsIn, fec, concealed, decodeErrors atomic.Uint64
}

func newInput(rate int, audio func(media.Frame), opts ...rtpjitter.Option) (*input, error) {
	// Decoding straight at the pipeline's rate, where Opus can, costs less
	// than decoding at 48 kHz and resampling.
	decRate := opusRate(rate)
	dec, err := opus.NewDecoder(decRate, 1)
	if err != nil {
		return nil, fmt.Errorf("webrtc: opus decoder: %w", err)
	}
	framer, err := media.NewFramer(rate, media.DefaultFrameDuration)
	if err != nil {
		return nil, fmt.Errorf("webrtc: framer: %w", err)
	}
	jb, err := rtpjitter.New(append([]rtpjitter.Option{rtpjitter.WithClockRate(opusClock)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("webrtc: %w", err)
	}
	return &input{
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

// push takes a packet from the network.
func (in *input) push(pkt *rtp.Packet, now time.Time) {
	in.packetsIn.Add(1)
	_ = in.jb.Push(rtpjitter.Packet{
		Seq: pkt.SequenceNumber, Timestamp: pkt.Timestamp, Marker: pkt.Marker,
		Payload: pkt.Payload, Duration: uint32(opusSamples(pkt.Payload)),
	}, now)
}

// run ticks the playout every frame period until stop is closed.
func (in *input) run(stop <-chan struct{}) {
	t := time.NewTicker(media.DefaultFrameDuration)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			in.tick(time.Now())
		}
	}
}

// tick decodes what the jitter buffer hands out for one frame period and
// passes it on as frames.
func (in *input) tick(now time.Time) {
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

func (in *input) conceal(out []int16) {
	if in.dec.DecodePLC(out) != nil {
		clear(out)
	}
	in.concealed.Add(1)
}

// inputStats are the input's part of Stats.
func (in *input) stats(s *Stats) {
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
}
