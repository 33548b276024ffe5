package sip

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/holdline/holdline/media"
)

// HoldTone is WithHoldAudio's word for the generated comfort tone, the
// default: 425 Hz at -22 dBFS, on 0.4 s, off 0.2 s, on 0.4 s, off 2 s.
const HoldTone = "tone"

// Hold tone.
const (
	holdToneHz   = 425
	holdToneDBFS = -22
)

// holdCadence is the tone's on/off pattern in milliseconds, repeated.
var holdCadence = [...]int{400, 200, 400, 2000}

// holdAudio is what a caller on hold hears: a WAV file's samples, looped,
// or (wav nil) the comfort tone.
type holdAudio struct {
	wav  []int16
	rate int
	mu   sync.Mutex
	at   map[int][]int16 // wav resampled, by rate
}

// WithHoldAudio sets what a caller hears while a warm transfer holds them
// (WarmTransfer): the path of a WAV file (PCM, any rate, mixed to mono),
// played in a loop, or HoldTone for the generated comfort tone (the
// default). A file that cannot be read is New's error.
func WithHoldAudio(source string) Option {
	return func(c *config) error {
		h, err := loadHoldAudio(source)
		if err != nil {
			return err
		}
		c.hold = h
		return nil
	}
}

func loadHoldAudio(source string) (*holdAudio, error) {
	if source == "" || strings.EqualFold(source, HoldTone) {
		return &holdAudio{}, nil
	}
	f, err := os.Open(source)
	if err != nil {
		return nil, fmt.Errorf("sip: hold audio: %w", err)
	}
	defer f.Close()
	pcm, rate, err := media.ReadWAV(f)
	if err != nil {
		return nil, fmt.Errorf("sip: hold audio %s: %w", source, err)
	}
	if len(pcm) == 0 {
		return nil, fmt.Errorf("sip: hold audio %s: %w", source, errors.New("no samples"))
	}
	return &holdAudio{wav: pcm, rate: rate, at: map[int][]int16{}}, nil
}

// samples returns the file's audio at rate (resampled once per rate).
func (h *holdAudio) samples(rate int) []int16 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pcm, ok := h.at[rate]; ok {
		return pcm
	}
	pcm := h.wav
	if rate != h.rate {
		if rs, err := media.NewResampler(h.rate, rate); err == nil {
			pcm = rs.Process(nil, h.wav)
		}
	}
	h.at[rate] = pcm
	return pcm
}

// holdPlayer plays hold audio from its start, one frame at a time.
type holdPlayer struct {
	h   *holdAudio
	pos int // samples played, at the rate of the last fill
}

// fill writes the next len(dst) samples at rate into dst.
func (p *holdPlayer) fill(dst []int16, rate int) {
	if p.h.wav != nil {
		pcm := p.h.samples(rate)
		for i := range dst {
			dst[i] = pcm[(p.pos+i)%len(pcm)]
		}
		p.pos += len(dst)
		return
	}
	period := 0
	for _, ms := range holdCadence {
		period += ms
	}
	amp := math.MaxInt16 * math.Pow(10, holdToneDBFS/20.0)
	for i := range dst {
		n := p.pos + i
		ms := (n * 1000 / rate) % period
		on, edge := false, 0
		for k, d := range holdCadence {
			edge += d
			if ms < edge {
				on = k%2 == 0
				break
			}
		}
		if !on {
			dst[i] = 0
			continue
		}
		dst[i] = int16(amp * math.Sin(2*math.Pi*holdToneHz*float64(n)/float64(rate)))
	}
	p.pos += len(dst)
}

// lineTap takes a call's line over while a warm transfer holds or bridges
// it: out makes what the caller hears instead of the agent (the session's
// frames, continuous, are its clock), and in takes what the caller says
// instead of the session, which is given silence, so that nothing the
// caller says meanwhile starts a turn.
type lineTap struct {
	out func(dst []int16, rate int)
	in  func(f media.Frame)
}

// tapped is the part of a call a warm transfer uses; call.go calls its
// methods.
type tapped struct {
	tap     atomic.Pointer[lineTap]
	scratch []int16 // the output goroutine's
	silence []int16 // the input goroutine's
}

// output returns the frame to send for the session's f: f, or what the
// tap makes instead.
func (t *tapped) output(f media.Frame) media.Frame {
	tp := t.tap.Load()
	if tp == nil || tp.out == nil {
		return f
	}
	if cap(t.scratch) < len(f.Samples) {
		t.scratch = make([]int16, len(f.Samples))
	}
	out := t.scratch[:len(f.Samples)]
	tp.out(out, f.SampleRate)
	return media.Frame{Samples: out, SampleRate: f.SampleRate}
}

// input returns the frame the session gets for the caller's f: f, or
// silence while the tap takes f.
func (t *tapped) input(f media.Frame) media.Frame {
	tp := t.tap.Load()
	if tp == nil {
		return f
	}
	if tp.in != nil {
		tp.in(f)
	}
	if cap(t.silence) < len(f.Samples) {
		t.silence = make([]int16, len(f.Samples))
	}
	return media.Frame{Samples: t.silence[:len(f.Samples)], SampleRate: f.SampleRate}
}

// held reports whether a warm transfer has the line: the caller's keys
// are ignored then.
func (t *tapped) held() bool { return t.tap.Load() != nil }

// pcmQueue carries audio from one leg to the other while they are
// bridged: the writer's frames in, the reader's frames out, resampled to
// the reader's rate. It keeps at most maxQueue of audio, dropping the
// oldest, so a late reader never lets delay grow; a reader that finds too
// little gets silence for the rest.
type pcmQueue struct {
	rate int // the reader's
	mu   sync.Mutex
	buf  []int16
	rs   *media.Resampler
	from int
}

// maxQueue bounds a bridge's delay in each direction, in milliseconds.
const maxQueue = 120

func (q *pcmQueue) push(f media.Frame) {
	q.mu.Lock()
	defer q.mu.Unlock()
	rate := q.rate
	in := f.Samples
	if f.SampleRate != rate {
		if q.rs == nil || q.from != f.SampleRate {
			rs, err := media.NewResampler(f.SampleRate, rate)
			if err != nil {
				return
			}
			q.rs, q.from = rs, f.SampleRate
		}
		in = q.rs.Process(nil, in)
	}
	q.buf = append(q.buf, in...)
	if limit := rate * maxQueue / 1000; len(q.buf) > limit {
		q.buf = append(q.buf[:0], q.buf[len(q.buf)-limit:]...)
	}
}

// pull fills dst at rate with the oldest audio queued, silence after it.
func (q *pcmQueue) pull(dst []int16, rate int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	if q.rate == rate {
		n = copy(dst, q.buf)
		q.buf = append(q.buf[:0], q.buf[n:]...)
	}
	clear(dst[n:])
}
