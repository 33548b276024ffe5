package sip

import (
	"fmt"
	"strings"

	"github.com/hraban/opus"
	"github.com/zaf/g711"
)

// codec turns one payload type's packets into PCM and back.
type codec interface {
	// Rate is the PCM rate it decodes to and encodes from.
	Rate() int
	// ClockRate is the RTP timestamp rate (48 kHz for Opus whatever it
	// codes at).
	ClockRate() int
	// Encode appends the payload for one packet of pcm to out.
	Encode(out []byte, pcm []int16) ([]byte, error)
	// Decode appends the PCM of payload to pcm.
	Decode(pcm []int16, payload []byte) ([]int16, error)
	// Conceal appends n samples standing in for a lost packet.
	Conceal(pcm []int16, n int) []int16
}

// Codec names Holdline speaks on a phone leg, in its preference order.
var supportedCodecs = []string{"PCMU", "PCMA", "opus"}

func newCodec(c Codec) (codec, error) {
	switch strings.ToUpper(c.Name) {
	case "PCMU":
		return g711Codec{law: 'u'}, nil
	case "PCMA":
		return g711Codec{law: 'a'}, nil
	case "OPUS":
		return newOpusCodec()
	}
	return nil, fmt.Errorf("%w: %s", ErrNoCommonCodec, c.Name)
}

// g711Codec is PCMU (µ-law) or PCMA (A-law) at 8 kHz: one byte a sample.
type g711Codec struct{ law byte }

func (g711Codec) Rate() int      { return 8000 }
func (g711Codec) ClockRate() int { return 8000 }

func (g g711Codec) Encode(out []byte, pcm []int16) ([]byte, error) {
	for _, v := range pcm {
		if g.law == 'u' {
			out = append(out, g711.EncodeUlawFrame(v))
		} else {
			out = append(out, g711.EncodeAlawFrame(v))
		}
	}
	return out, nil
}

func (g g711Codec) Decode(pcm []int16, payload []byte) ([]int16, error) {
	for _, b := range payload {
		if g.law == 'u' {
			pcm = append(pcm, g711.DecodeUlawFrame(b))
		} else {
			pcm = append(pcm, g711.DecodeAlawFrame(b))
		}
	}
	return pcm, nil
}

// Conceal for G.711 is left to the jitter buffer, which repeats the last
// frame attenuated; here a lost packet is silence.
func (g711Codec) Conceal(pcm []int16, n int) []int16 {
	for range n {
		pcm = append(pcm, 0)
	}
	return pcm
}

// opusCodec codes Opus at 48 kHz, its RTP clock rate, so that timestamps
// and samples count alike in the jitter buffer.
type opusCodec struct {
	enc *opus.Encoder
	dec *opus.Decoder
	buf []int16
}

const opusLegRate = 48000

func newOpusCodec() (*opusCodec, error) {
	enc, err := opus.NewEncoder(opusLegRate, 1, opus.AppVoIP)
	if err != nil {
		return nil, fmt.Errorf("sip: opus encoder: %w", err)
	}
	_ = enc.SetBitrate(24000)
	_ = enc.SetComplexity(5)
	dec, err := opus.NewDecoder(opusLegRate, 1)
	if err != nil {
		return nil, fmt.Errorf("sip: opus decoder: %w", err)
	}
	return &opusCodec{enc: enc, dec: dec, buf: make([]int16, 6*opusLegRate/50)}, nil
}

func (*opusCodec) Rate() int      { return opusLegRate }
func (*opusCodec) ClockRate() int { return 48000 }

func (o *opusCodec) Encode(out []byte, pcm []int16) ([]byte, error) {
	start := len(out)
	out = append(out, make([]byte, 1275)...)
	n, err := o.enc.Encode(pcm, out[start:])
	if err != nil {
		return out[:start], fmt.Errorf("sip: opus encode: %w", err)
	}
	return out[:start+n], nil
}

func (o *opusCodec) Decode(pcm []int16, payload []byte) ([]int16, error) {
	n, err := o.dec.Decode(payload, o.buf)
	if err != nil {
		return pcm, fmt.Errorf("sip: opus decode: %w", err)
	}
	return append(pcm, o.buf[:n]...), nil
}

func (o *opusCodec) Conceal(pcm []int16, n int) []int16 {
	if n > len(o.buf) {
		n = len(o.buf)
	}
	if o.dec.DecodePLC(o.buf[:n]) != nil {
		clear(o.buf[:n])
	}
	return append(pcm, o.buf[:n]...)
}
