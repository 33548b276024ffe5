package aec

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

const (
	runLen     = 6 * time.Second
	lockWithin = 1500 * time.Millisecond
	delayTol   = 2 * time.Millisecond
	minAtten   = 20.0 // dB
	noiseDBFS  = -65.0
)

var farCache sync.Map // rate → []int16

// agent returns runLen of the agent's synthetic speech at rate.
func agent(rate int) []int16 {
	if v, ok := farCache.Load(rate); ok {
		return v.([]int16)
	}
	far := speechLike(rate, runLen, agentVoice)
	farCache.Store(rate, far)
	return far
}

func frameDur(c *Canceller) time.Duration {
	return time.Duration(c.FrameSize()) * time.Second / time.Duration(c.rate)
}

// truth is the delay Delay should report for an echo path of d when run
// plays each far frame just before the near frame captured while it
// played: the first Process then anchors with one frame of far audio
// already written, and the delay counts from there.
func truth(d time.Duration, c *Canceller) time.Duration { return d + frameDur(c) }

// within reports whether d is within delayTol of want.
func within(d, want time.Duration) bool { return d >= want-delayTol && d <= want+delayTol }

// firstLock is the index of the first frame after which Delay was ok, or -1.
func (tr trace) firstLock() int { return slices.Index(tr.ok, true) }

func TestCancelsEcho(t *testing.T) {
	type tc struct {
		rate int
		p    path
	}
	var cases []tc
	for _, rate := range []int{8000, 16000} {
		for _, delay := range []time.Duration{20, 60, 120, 250} {
			for _, gain := range []float64{-3, -6, -12} {
				cases = append(cases, tc{rate, path{delay: delay * time.Millisecond, gainDB: gain}})
			}
			// And through a little room.
			cases = append(cases, tc{rate, path{delay: delay * time.Millisecond, gainDB: -6, room: true}})
		}
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%dHz/%v/%gdB", tc.rate, tc.p.delay, tc.p.gainDB)
		if tc.p.room {
			name += "/room"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rate, p := tc.rate, tc.p
			c := newCanceller(t, rate)
			far := agent(rate)
			near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
			tr := run(t, c, far, near)
			want := truth(p.delay, c)

			at := int(lockWithin/frameDur(c)) - 1
			if !tr.ok[at] {
				t.Errorf("no delay locked after %v", lockWithin)
			} else if d := tr.delay[at]; !within(d, want) {
				t.Errorf("delay after %v = %v, want %v ± %v", lockWithin, d, want, delayTol)
			}
			last := len(tr.ok) - 1
			if d := tr.delay[last]; !tr.ok[last] || !within(d, want) {
				t.Errorf("final delay = %v (ok %v), want %v ± %v", d, tr.ok[last], want, delayTol)
			}
			for i := at; i <= last; i++ {
				if !within(tr.delay[i], want) {
					t.Errorf("delay after %v = %v, want %v ± %v", time.Duration(i+1)*frameDur(c), tr.delay[i], want, delayTol)
					break
				}
			}

			tail := samplesFor(rate, 2*time.Second)
			n := len(tr.out)
			atten := ratioDB(energy(near[n-tail:n]), energy(tr.out[n-tail:]))
			lock := tr.firstLock()
			t.Logf("delay %v after %v, %v at the end (want %v); attenuation over the last 2 s %.1f dB",
				tr.delay[max(lock, 0)], time.Duration(lock+1)*frameDur(c), tr.delay[last], want, atten)
			if atten < minAtten {
				t.Errorf("attenuation %.1f dB, want at least %.0f dB", atten, minAtten)
			}
		})
	}
}

// TestSpeexAlone reports what the adaptive filter does without the
// residual echo suppressor, and checks it does most of the work.
func TestSpeexAlone(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			c := newCanceller(t, rate, WithSuppression(false))
			p := path{delay: 120 * time.Millisecond, gainDB: -6, room: true}
			far := agent(rate)
			near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
			tr := run(t, c, far, near)
			tail := samplesFor(rate, 2*time.Second)
			n := len(tr.out)
			atten := ratioDB(energy(near[n-tail:n]), energy(tr.out[n-tail:]))
			t.Logf("attenuation without suppression over the last 2 s: %.1f dB", atten)
			if atten < 15 {
				t.Errorf("attenuation %.1f dB, want at least 15 dB from the filter alone", atten)
			}
		})
	}
}

// TestDoubleTalk has the caller talk over the agent's echo: the caller's
// speech must come through, and the echo must still go once they stop.
func TestDoubleTalk(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			c := newCanceller(t, rate)
			total := 9 * time.Second
			far := speechLike(rate, total, agentVoice)
			p := path{delay: 120 * time.Millisecond, gainDB: -6, room: true}
			from, to := samplesFor(rate, 4*time.Second), samplesFor(rate, 6500*time.Millisecond)
			user := make([]float64, len(far))
			copy(user[from:to], float(speechLike(rate, 2500*time.Millisecond, userVoice)))
			near := mix(p.echo(far, rate), user, noise(len(far), noiseDBFS, 3))
			tr := run(t, c, far, near)

			// With suppression on, the output lags by one frame.
			lag := c.FrameSize()
			clean := mix(user[from:to])
			got := tr.out[from+lag : to+lag]
			kept := ratioDB(energy(got), energy(clean))
			// How much of the output is the caller: the energy of what
			// is left once the caller is subtracted, against the caller.
			diff := make([]float64, len(got))
			for i := range got {
				diff[i] = float64(got[i]) - float64(clean[i])
			}
			fidelity := ratioDB(energy(clean), energy(mix(diff)))
			echoIn := ratioDB(energy(clean), energy(mix(p.echo(far, rate)[from:to])))
			t.Logf("caller at %.1f dB over the echo: output %+.1f dB of the clean caller, caller-to-rest %.1f dB",
				echoIn, kept, fidelity)
			if kept < -6 || kept > 6 {
				t.Errorf("caller's speech came out at %+.1f dB, want within 6 dB", kept)
			}

			last := len(tr.ok) - 1
			if want := truth(p.delay, c); !tr.ok[last] || !within(tr.delay[last], want) {
				t.Errorf("delay after double talk = %v (ok %v), want %v", tr.delay[last], tr.ok[last], want)
			}
			tail := samplesFor(rate, 2*time.Second)
			n := len(tr.out)
			atten := ratioDB(energy(near[n-tail:n]), energy(tr.out[n-tail:]))
			t.Logf("attenuation over the last 2 s, after double talk: %.1f dB", atten)
			if atten < minAtten {
				t.Errorf("attenuation after double talk %.1f dB, want at least %.0f dB", atten, minAtten)
			}
		})
	}
}

// TestEchoOnly: a -6 dB echo is taken for echo alone, before the filter
// has converged and after, while a caller at the agent's level is not, at
// once and without a break in their speech.
func TestEchoOnly(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			c := newCanceller(t, rate)
			far := speechLike(rate, 9*time.Second, agentVoice)
			p := path{delay: 250 * time.Millisecond, gainDB: -6, room: true}
			from, to := samplesFor(rate, 4*time.Second), samplesFor(rate, 6500*time.Millisecond)
			user := make([]float64, len(far))
			copy(user[from:to], float(speechLike(rate, 2500*time.Millisecond, userVoice)))
			near := mix(p.echo(far, rate), user, noise(len(far), noiseDBFS, 3))
			tr := run(t, c, far, near)

			share := func(lo, hi time.Duration, want bool) float64 { return callerShare(c, tr, lo, hi, want) }
			cold, warm := share(0, time.Second, true), share(2*time.Second, 4*time.Second, true)
			caller := share(4*time.Second+100*time.Millisecond, 6500*time.Millisecond, false)
			t.Logf("echo taken for echo: %.0f%% of far-active frames in the first second, %.0f%% at 2-4 s; caller taken for the caller: %.0f%%",
				100*cold, 100*warm, 100*caller)
			if cold < 0.9 || warm < 0.95 {
				t.Errorf("echo alone taken for echo in %.0f%% (first second) and %.0f%% (2-4 s) of frames, want 90%% and 95%%", 100*cold, 100*warm)
			}
			if caller < 0.9 {
				t.Errorf("caller taken for the caller in %.0f%% of frames, want 90%%", 100*caller)
			}
		})
	}
}

// TestNoReference: with nothing played there is nothing to cancel, and
// the caller's audio must come through untouched, one frame late with
// suppression on, on time without.
func TestNoReference(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		for _, sup := range []bool{true, false} {
			t.Run(fmt.Sprint(rate, "/suppression=", sup), func(t *testing.T) {
				t.Parallel()
				c := newCanceller(t, rate, WithSuppression(sup))
				user := speechLike(rate, 4*time.Second, userVoice)
				near := mix(float(user), noise(len(user), noiseDBFS, 4))
				tr := run(t, c, nil, near)
				lag := 0
				if sup {
					lag = c.FrameSize()
				}
				n := len(tr.out)
				in, out := near[:n-lag], tr.out[lag:n]
				change := ratioDB(energy(out), energy(in))
				diff := make([]float64, len(out))
				for i := range out {
					diff[i] = float64(out[i]) - float64(in[i])
				}
				snr := ratioDB(energy(in), energy(mix(diff)))
				t.Logf("output %+.2f dB of the input, differing from it by %.1f dB less", change, snr)
				if change < -1 || change > 1 {
					t.Errorf("output is %+.2f dB of the input, want within 1 dB", change)
				}
				// Not more: speex's echo canceller removes DC with a notch
				// whose phase shift reaches the pitch of speech at 8 kHz. At
				// any other lag than the documented one the difference
				// would be about as loud as the input.
				if snr < 6 {
					t.Errorf("output %d samples late differs from the input by only %.1f dB less, want 6 dB less at least", lag, snr)
				}
				if slices.Contains(tr.ok, true) {
					t.Error("a delay was locked with no reference")
				}
				if slices.Contains(tr.active, true) {
					t.Error("FarActive with no reference")
				}
			})
		}
	}
}

// TestNoLockWithoutEcho: the agent talks, the caller talks, and none of
// the agent comes back: no delay may be found in independent speech.
func TestNoLockWithoutEcho(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			c := newCanceller(t, rate)
			far := agent(rate)
			user := speechLike(rate, runLen, userVoice)
			near := mix(float(user), noise(len(user), noiseDBFS, 4))
			tr := run(t, c, far, near)
			if i := tr.firstLock(); i >= 0 {
				t.Errorf("delay %v locked after %v with no echo", tr.delay[i], time.Duration(i+1)*frameDur(c))
			}
			// The agent is audible here, as far as the suppressor knows,
			// so this is double talk with no echo: it may take a little.
			lag := c.FrameSize()
			n := len(tr.out)
			change := ratioDB(energy(tr.out[lag:n]), energy(near[:n-lag]))
			t.Logf("output %+.2f dB of the input", change)
			if change < -2 || change > 1 {
				t.Errorf("output is %+.2f dB of the input, want within -2 to +1 dB", change)
			}
		})
	}
}

// TestDelayChange: the echo path's delay jumps mid-call (a jitter buffer
// grew); the canceller must find the new one and cancel again.
func TestDelayChange(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			c := newCanceller(t, rate)
			far := speechLike(rate, 10*time.Second, agentVoice)
			before := path{delay: 60 * time.Millisecond, gainDB: -6}
			after := path{delay: 180 * time.Millisecond, gainDB: -6}
			cut := samplesFor(rate, 4*time.Second)
			echo := before.echo(far, rate)
			copy(echo[cut:], after.echo(far, rate)[cut:])
			near := mix(echo, noise(len(far), noiseDBFS, 5))
			tr := run(t, c, far, near)

			f := c.FrameSize()
			if d := tr.delay[cut/f-1]; !within(d, truth(before.delay, c)) {
				t.Errorf("delay before the change = %v, want %v", d, truth(before.delay, c))
			}
			relock := -1
			for i := cut / f; i < len(tr.delay); i++ {
				if within(tr.delay[i], truth(after.delay, c)) {
					relock = i
					break
				}
			}
			if relock < 0 {
				t.Fatalf("never found the new delay %v; last estimate %v", truth(after.delay, c), tr.delay[len(tr.delay)-1])
			}
			took := time.Duration(relock+1-cut/f) * frameDur(c)
			tail := samplesFor(rate, 2*time.Second)
			n := len(tr.out)
			atten := ratioDB(energy(near[n-tail:n]), energy(tr.out[n-tail:]))
			t.Logf("new delay found %v after the change; attenuation over the last 2 s %.1f dB", took, atten)
			if took > 2*time.Second {
				t.Errorf("took %v to find the new delay, want at most 2s", took)
			}
			if atten < minAtten {
				t.Errorf("attenuation %.1f dB, want at least %.0f dB", atten, minAtten)
			}
		})
	}
}

// TestAnchor: the delay counts from the far position at the first Process.
// Playing each far frame just after the near frame is processed puts the
// anchor one frame earlier than run does, so the delay is the echo path's.
func TestAnchor(t *testing.T) {
	const rate = 16000
	c := newCanceller(t, rate)
	p := path{delay: 120 * time.Millisecond, gainDB: -6}
	far := agent(rate)
	near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
	f := c.FrameSize()
	out := make([]int16, f)
	for i := 0; i+f <= len(near); i += f {
		if err := c.Process(near[i:i+f], out); err != nil {
			t.Fatal(err)
		}
		c.Playback(far[i : i+f])
	}
	if d, ok := c.Delay(); !ok || !within(d, p.delay) {
		t.Errorf("Delay() = %v, %v; want %v", d, ok, p.delay)
	}
}

// TestTimingDoesNotMatter feeds the far end from another goroutine, in
// chunks of random sizes, up to 300 ms ahead of the near end: only sample
// counts may matter, so the output must be the same to the bit as with
// Playback and Process in step.
func TestTimingDoesNotMatter(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			p := path{delay: 120 * time.Millisecond, gainDB: -6, room: true}
			far := agent(rate)
			near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
			want := run(t, newCanceller(t, rate), far, near)

			c := newCanceller(t, rate)
			f := c.FrameSize()
			maxLead := samplesFor(rate, 300*time.Millisecond)
			var got trace
			got.out = make([]int16, len(want.out))
			record := func() {
				d, ok := c.Delay()
				got.delay = append(got.delay, d)
				got.ok = append(got.ok, ok)
				got.active = append(got.active, c.FarActive())
			}
			// The first frame goes as in run, before the writer starts:
			// the first Process anchors the streams at the far audio
			// written by then, and that must be the same.
			c.Playback(far[:f])
			if err := c.Process(near[:f], got.out[:f]); err != nil {
				t.Fatal(err)
			}
			record()
			// Both channels hold every message ever sent: neither side
			// blocks sending.
			written := make(chan int, len(far))   // far samples written
			processed := make(chan int, len(far)) // near samples processed
			go func() {
				defer close(written)
				rng := rand.New(rand.NewPCG(8, 8))
				done := 0
				for w := f; w < len(far); {
					n := min(1+rng.IntN(3*f), len(far)-w)
					// Stay within the lead the ring allows for.
					for w+n > done+f+maxLead {
						done = <-processed
					}
					c.Playback(far[w : w+n])
					w += n
					written <- w
				}
			}()
			processed <- f
			w := f
			for i := f; i+f <= len(got.out); i += f {
				// Wait for the far frame played with this near frame; the
				// writer is often further ahead.
				for w < i+f {
					w = <-written
				}
				if err := c.Process(near[i:i+f], got.out[i:i+f]); err != nil {
					t.Fatal(err)
				}
				processed <- i + f
				record()
			}
			for range written {
			}
			if !slices.Equal(got.out, want.out) {
				i := 0
				for got.out[i] == want.out[i] {
					i++
				}
				t.Errorf("output differs from sample %d (%v) on", i, time.Duration(i)*time.Second/time.Duration(rate))
			}
			if !slices.Equal(got.delay, want.delay) || !slices.Equal(got.ok, want.ok) {
				t.Error("Delay differs")
			}
			if !slices.Equal(got.active, want.active) {
				t.Error("FarActive differs")
			}
		})
	}
}

func TestFarActive(t *testing.T) {
	const rate = 8000
	c := newCanceller(t, rate)
	f := c.FrameSize()
	speech := agent(rate)[:samplesFor(rate, 3*time.Second)]
	silence := make([]int16, samplesFor(rate, 2*time.Second))
	far := slices.Concat(silence, speech, silence)
	p := path{delay: 100 * time.Millisecond, gainDB: -6}
	near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
	tr := run(t, c, far, near)

	at := func(d time.Duration) bool { return tr.active[samplesFor(rate, d)/f-1] }
	if at(time.Second) {
		t.Error("FarActive during the silence before the agent spoke")
	}
	if !at(3 * time.Second) {
		t.Error("not FarActive while the agent spoke")
	}
	if !tr.ok[len(tr.ok)-1] {
		t.Fatal("no delay locked")
	}
	// Locked, the window is the reference the filter sees for the frame:
	// a tail and a frame of it, at the delay. So FarActive stays on a
	// little after the agent stops, while the echo is still to come, and
	// goes off a delay and a tail later.
	stop := 5 * time.Second
	if !at(stop) {
		t.Error("not FarActive at the end of the agent's speech, which is still to echo")
	}
	if at(stop + p.delay + DefaultTail + 50*time.Millisecond) {
		t.Error("still FarActive a delay and a tail after the agent stopped")
	}

	// The level threshold: -60 dBFS noise is not audible, -40 dBFS is.
	for _, tc := range []struct {
		dBFS float64
		want bool
	}{{-60, false}, {-40, true}} {
		c := newCanceller(t, rate)
		far := mix(noise(samplesFor(rate, time.Second), tc.dBFS, 6))
		tr := run(t, c, far, make([]int16, len(far)))
		if got := tr.active[len(tr.active)-1]; got != tc.want {
			t.Errorf("far noise at %v dBFS: FarActive = %v, want %v", tc.dBFS, got, tc.want)
		}
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate int
		opts []Option
	}{
		{"rate 24000", 24000, nil},
		{"rate 44100", 44100, nil},
		{"rate 0", 0, nil},
		{"frame 15ms", 8000, []Option{WithFrameDuration(15 * time.Millisecond)}},
		{"frame 40ms", 8000, []Option{WithFrameDuration(40 * time.Millisecond)}},
		{"tail 0", 8000, []Option{WithTail(0)}},
		{"tail 1s", 8000, []Option{WithTail(time.Second)}},
		{"max delay 0", 8000, []Option{WithMaxDelay(0)}},
		{"max delay 2s", 8000, []Option{WithMaxDelay(2 * time.Second)}},
		{"nil option", 8000, []Option{nil}},
	} {
		c, err := New(tc.rate, tc.opts...)
		if err == nil {
			c.Close()
			t.Errorf("%s: New succeeded, want an error", tc.name)
			continue
		}
		if errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: %v, want an option error", tc.name, err)
		}
	}

	for _, tc := range []struct {
		rate  int
		opts  []Option
		frame int
	}{
		{8000, nil, 160},
		{16000, nil, 320},
		{8000, []Option{WithFrameDuration(10 * time.Millisecond)}, 80},
		{16000, []Option{WithFrameDuration(10 * time.Millisecond), WithTail(64 * time.Millisecond), WithMaxDelay(time.Second), WithSuppression(false)}, 160},
	} {
		c := newCanceller(t, tc.rate, tc.opts...)
		if c.FrameSize() != tc.frame {
			t.Errorf("%d Hz: FrameSize() = %d, want %d", tc.rate, c.FrameSize(), tc.frame)
		}
		if _, ok := c.Delay(); ok {
			t.Error("Delay ok before any audio")
		}
		if c.FarActive() {
			t.Error("FarActive before any audio")
		}
	}
}

func TestOptionsWork(t *testing.T) {
	// 10 ms frames, the longest delay allowed, and an echo near it.
	const rate = 8000
	c := newCanceller(t, rate, WithFrameDuration(10*time.Millisecond), WithMaxDelay(time.Second))
	p := path{delay: 800 * time.Millisecond, gainDB: -6}
	far := agent(rate)
	near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
	tr := run(t, c, far, near)
	last := len(tr.ok) - 1
	if want := truth(p.delay, c); !tr.ok[last] || !within(tr.delay[last], want) {
		t.Errorf("Delay() = %v, %v; want %v", tr.delay[last], tr.ok[last], want)
	}
	tail := samplesFor(rate, 2*time.Second)
	n := len(tr.out)
	atten := ratioDB(energy(near[n-tail:n]), energy(tr.out[n-tail:]))
	t.Logf("10 ms frames, 800 ms delay: attenuation %.1f dB", atten)
	if atten < minAtten {
		t.Errorf("attenuation %.1f dB, want at least %.0f dB", atten, minAtten)
	}
}

func TestFrameErrors(t *testing.T) {
	c := newCanceller(t, 8000)
	f := c.FrameSize()
	buf := make([]int16, 2*f)
	for _, tc := range []struct {
		name      string
		near, out []int16
	}{
		{"short near", buf[:f-1], buf[:f]},
		{"long near", buf[:f+1], buf[:f]},
		{"empty near", nil, buf[:f]},
		{"short out", buf[:f], buf[f : 2*f-1]},
		{"nil out", buf[:f], nil},
	} {
		if err := c.Process(tc.near, tc.out); err == nil {
			t.Errorf("%s: Process succeeded, want an error", tc.name)
		}
	}
	// In place is fine.
	if err := c.Process(buf[:f], buf[:f]); err != nil {
		t.Errorf("in place: %v", err)
	}
}

func TestClose(t *testing.T) {
	c := newCanceller(t, 8000) // which closes it again at the end
	f := c.FrameSize()
	frame := make([]int16, f)
	c.Playback(frame)
	if err := c.Process(frame, frame); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Process(frame, frame); !errors.Is(err, ErrClosed) {
		t.Errorf("Process after Close = %v, want ErrClosed", err)
	}
	c.Playback(frame) // no effect, no crash
	c.Delay()
	c.FarActive()
}

func TestZeroAllocs(t *testing.T) {
	for _, rate := range []int{8000, 16000} {
		for _, sup := range []bool{true, false} {
			c := newCanceller(t, rate, WithSuppression(sup))
			p := path{delay: 120 * time.Millisecond, gainDB: -6}
			far := agent(rate)
			near := mix(p.echo(far, rate), noise(len(far), noiseDBFS, 3))
			f := c.FrameSize()
			out := make([]int16, f)
			i := 0
			step := func() {
				k := i % (len(far)/f - 1) * f
				c.Playback(far[k : k+f])
				if err := c.Process(near[k:k+f], out); err != nil {
					t.Fatal(err)
				}
				i++
			}
			// 3 s, through delay searches and a lock, then 2 s more
			// measured, with searches in it.
			for range 150 {
				step()
			}
			if allocs := testing.AllocsPerRun(100, step); allocs != 0 {
				t.Errorf("%d Hz, suppression %v: %v allocations per frame, want 0", rate, sup, allocs)
			}
		}
	}
}
