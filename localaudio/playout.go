package localaudio

import "sync"

// playout is the speaker's buffer: the session's paced player writes 20 ms
// frames into it and the audio thread's callback drains it.
//
// It is kept small on purpose. A barge-in flushes the player's queue at
// once, but whatever already sits here still plays, and it is the echo
// canceller's reference that has to line up with it. Its size is
// playoutDuration; two frames gather before a turn starts playing
// (primeDuration), so that a frame arriving a little late does not leave a
// gap, and a frame that arrives alone starts after waiting one frame period.
type playout struct {
	mu sync.Mutex

	buf   []int16 // n samples from head, wrapping
	head  int
	n     int
	prime int // samples gathered before an idle speaker starts playing
	// primeWait is how many samples of silence the speaker plays while
	// waiting for prime before it plays what it has.
	primeWait int
	waited    int
	playing   bool
	// dry: the speaker ran out while playing. If the next frame is of the
	// same turn, the listener heard a gap: an underrun.
	dry   bool
	epoch uint64 // epoch of the last frame written

	played, underruns, overruns, dropped int64
}

func newPlayout(size, prime, primeWait int) *playout {
	return &playout{buf: make([]int16, size), prime: prime, primeWait: primeWait}
}

// write appends samples of epoch. When they do not fit, the oldest audio
// goes: what plays stays within the buffer's latency of what was written,
// and so of the echo canceller's reference.
func (p *playout) write(samples []int16, epoch uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dry && epoch == p.epoch {
		p.underruns++
	}
	p.dry = false
	p.epoch = epoch
	if len(samples) > len(p.buf) {
		p.dropped += int64(len(samples) - len(p.buf))
		samples = samples[len(samples)-len(p.buf):]
	}
	if excess := p.n + len(samples) - len(p.buf); excess > 0 {
		p.overruns++
		p.dropped += int64(excess)
		p.head = (p.head + excess) % len(p.buf)
		p.n -= excess
	}
	w := (p.head + p.n) % len(p.buf)
	c := copy(p.buf[w:], samples)
	copy(p.buf, samples[c:])
	p.n += len(samples)
}

// read fills out with the next samples, silence where there are none, and
// returns how many were audio: out[:k] is audio, out[k:] silence.
func (p *playout) read(out []int16) (k int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.playing {
		if p.n == 0 || p.n < p.prime && p.waited < p.primeWait {
			if p.n > 0 {
				p.waited += len(out)
			}
			clear(out)
			return 0
		}
		p.playing, p.waited = true, 0
	}
	k = min(p.n, len(out))
	c := copy(out[:k], p.buf[p.head:])
	copy(out[c:k], p.buf)
	clear(out[k:])
	p.head = (p.head + k) % len(p.buf)
	p.n -= k
	p.played += int64(k)
	if k < len(out) {
		// Out of audio mid-callback: gather again before playing on.
		p.playing, p.dry = false, true
	}
	return k
}

// stats fills the playback fields of s.
func (p *playout) stats(s *Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.Played, s.Underruns, s.Overruns, s.Dropped = p.played, p.underruns, p.overruns, p.dropped
}
