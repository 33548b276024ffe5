package media

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const (
	testRate  = Rate16k
	testFrame = 20 * time.Millisecond
	frameLen  = testRate * 20 / 1000 // samples per test frame
)

// tagged returns n samples of epoch's audio: each carries the epoch in its
// top bits and a running 1..1023 sequence below, so a test can tell what
// was written from which epoch, in what order, and from padding (zero).
func tagged(epoch uint64, start, n int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(epoch<<10 | uint64((start+i)%1023+1))
	}
	return s
}

func sampleEpoch(v int16) uint64 { return uint64(v) >> 10 }

type writtenFrame struct {
	at      time.Time
	epoch   uint64
	rate    int
	samples []int16
}

// recSink records what a Player writes, with the (fake) time of each write.
type recSink struct {
	mu     sync.Mutex
	frames []writtenFrame
	// block, if set, is called inside WriteFrame before it returns.
	block func(f Frame)
	err   error
}

func (s *recSink) WriteFrame(f Frame) error {
	s.mu.Lock()
	s.frames = append(s.frames, writtenFrame{
		at: time.Now(), epoch: f.Epoch, rate: f.SampleRate, samples: slices.Clone(f.Samples),
	})
	block, err := s.block, s.err
	s.mu.Unlock()
	if block != nil {
		block(f)
	}
	return err
}

func (s *recSink) written() []writtenFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.frames)
}

// audioOf returns the non-padding samples written for epoch, in order.
func audioOf(frames []writtenFrame, epoch uint64) []int16 {
	var out []int16
	for _, f := range frames {
		if f.epoch != epoch {
			continue
		}
		for _, v := range f.samples {
			if v != 0 {
				out = append(out, v)
			}
		}
	}
	return out
}

// doneLog records WithEpochDone calls.
type doneLog struct {
	mu    sync.Mutex
	calls []doneCall
	sink  *recSink
}

type doneCall struct {
	epoch  uint64
	at     time.Time
	frames int // frames written when it fired
}

func (d *doneLog) fn(epoch uint64) {
	n := len(d.sink.written())
	d.mu.Lock()
	d.calls = append(d.calls, doneCall{epoch: epoch, at: time.Now(), frames: n})
	d.mu.Unlock()
}

func (d *doneLog) get() []doneCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func newTestPlayer(t *testing.T, opts ...PlayerOption) (*Player, *recSink, *doneLog) {
	t.Helper()
	sink := &recSink{}
	done := &doneLog{sink: sink}
	opts = append([]PlayerOption{WithEpochDone(done.fn)}, opts...)
	p, err := NewPlayer(sink, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p, sink, done
}

// startPlayer runs p until the test ends and then checks Run's result.
func startPlayer(t *testing.T, p *Player) {
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
}

func enqueue(t *testing.T, p *Player, epoch uint64, s []int16) {
	t.Helper()
	if err := p.Enqueue(t.Context(), epoch, s); err != nil {
		t.Fatal(err)
	}
}

func TestPlayerPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sink, _ := newTestPlayer(t)
		start := time.Now()
		audio := tagged(1, 0, 10*frameLen)
		enqueue(t, p, 1, audio)
		startPlayer(t, p)

		time.Sleep(testFrame / 2)
		if n := len(sink.written()); n != 0 {
			t.Fatalf("%d frames written before the first period ended", n)
		}
		time.Sleep(4 * testFrame)
		if n := len(sink.written()); n != 4 {
			t.Fatalf("%d frames after 4.5 periods, want 4", n)
		}
		if got, want := p.Played(1), 4*testFrame; got != want {
			t.Errorf("Played = %v after 4 frames, want %v", got, want)
		}

		time.Sleep(20 * testFrame) // well past the end of the audio
		frames := sink.written()
		if len(frames) != 10 {
			t.Fatalf("%d frames written for 10 frames of audio", len(frames))
		}
		for i, f := range frames {
			if want := start.Add(time.Duration(i+1) * testFrame); !f.at.Equal(want) {
				t.Errorf("frame %d written at %v, want %v", i, f.at.Sub(start), want.Sub(start))
			}
			if f.epoch != 1 || f.rate != testRate || len(f.samples) != frameLen {
				t.Errorf("frame %d: epoch %d, rate %d, %d samples", i, f.epoch, f.rate, len(f.samples))
			}
		}
		if got := audioOf(frames, 1); !slices.Equal(got, audio) {
			t.Error("written audio differs from the enqueued audio")
		}
		if got, want := p.Played(1), 10*testFrame; got != want {
			t.Errorf("Played = %v, want %v", got, want)
		}
	})
}

func TestPlayerEpochDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sink, done := newTestPlayer(t)
		start := time.Now()
		// Two and a half frames: the last one is half silence.
		enqueue(t, p, 1, tagged(1, 0, frameLen*5/2))
		p.EndEpoch(1)
		p.EndEpoch(1) // idempotent
		startPlayer(t, p)

		time.Sleep(2*testFrame + testFrame/2)
		if calls := done.get(); len(calls) != 0 {
			t.Fatalf("done fired before the last sample was written: %+v", calls)
		}
		time.Sleep(testFrame)
		calls := done.get()
		if len(calls) != 1 || calls[0].epoch != 1 || calls[0].frames != 3 || !calls[0].at.Equal(start.Add(3*testFrame)) {
			t.Fatalf("done calls %+v, want epoch 1 once, right after frame 3 at %v", calls, 3*testFrame)
		}
		last := sink.written()[2]
		if sampleEpoch(last.samples[frameLen/2-1]) != 1 || slices.ContainsFunc(last.samples[frameLen/2:], func(v int16) bool { return v != 0 }) {
			t.Error("last frame is not half audio, half silence")
		}
		if got, want := p.Played(1), testFrame*5/2; got != want {
			t.Errorf("Played = %v, want %v (padding not counted)", got, want)
		}

		// An utterance with no audio completes at the next tick.
		time.Sleep(testFrame / 4)
		endAt := time.Now()
		p.EndEpoch(2)
		time.Sleep(testFrame)
		calls = done.get()
		if len(calls) != 2 || calls[1].epoch != 2 || calls[1].at.Sub(endAt) > testFrame {
			t.Fatalf("done calls %+v, want epoch 2 within a period of %v", calls, endAt.Sub(start))
		}

		// Ending an epoch whose audio has all been played fires at the next
		// tick too; ending it again never fires again.
		enqueue(t, p, 3, tagged(3, 0, frameLen))
		time.Sleep(2 * testFrame)
		p.EndEpoch(3)
		time.Sleep(testFrame)
		p.EndEpoch(3)
		p.EndEpoch(1)
		time.Sleep(3 * testFrame)
		calls = done.get()
		if len(calls) != 3 || calls[2].epoch != 3 {
			t.Fatalf("done calls %+v, want epochs 1, 2, 3 once each", calls)
		}
	})
}

func TestPlayerFlushDuringPlayout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sink, done := newTestPlayer(t)
		enqueue(t, p, 1, tagged(1, 0, testRate)) // one second
		p.EndEpoch(1)
		startPlayer(t, p)

		time.Sleep(5*testFrame + testFrame/2)
		flushAt := time.Now()
		p.Flush(1)
		enqueue(t, p, 2, tagged(2, 0, 3*frameLen))
		p.EndEpoch(2)
		// Late audio of the flushed epoch is dropped without error.
		enqueue(t, p, 1, tagged(1, 0, frameLen))
		p.EndEpoch(1)
		time.Sleep(10 * testFrame)

		frames := sink.written()
		var lastOld time.Time
		for _, f := range frames {
			if f.epoch == 1 {
				lastOld = f.at
			}
		}
		if lastOld.After(flushAt.Add(testFrame)) {
			t.Errorf("epoch 1 frame written %v after Flush", lastOld.Sub(flushAt))
		}
		if n := len(audioOf(frames, 1)); n != 5*frameLen {
			t.Errorf("%d samples of epoch 1 written, want the 5 frames before Flush", n)
		}
		if got := audioOf(frames, 2); !slices.Equal(got, tagged(2, 0, 3*frameLen)) {
			t.Errorf("epoch 2 wrote %d samples, want its 3 frames intact", len(got))
		}
		if got, want := p.Played(1), 5*testFrame; got != want {
			t.Errorf("Played(1) = %v, want %v", got, want)
		}
		calls := done.get()
		if len(calls) != 1 || calls[0].epoch != 2 {
			t.Errorf("done calls %+v, want only epoch 2 (epoch 1 was flushed)", calls)
		}
	})
}

func TestPlayerFlushWhileSinkBusy(t *testing.T) {
	// Flush while a frame is inside WriteFrame: that frame is allowed to
	// finish, but no other frame of the epoch may follow it.
	synctest.Test(t, func(t *testing.T) {
		p, sink, done := newTestPlayer(t)
		release := make(chan struct{})
		sink.block = func(f Frame) {
			if f.Epoch == 1 && sampleEpoch(f.Samples[0]) == 1 && f.Samples[0]&1023 == 2*frameLen%1023+1 {
				<-release // the third frame hangs
			}
		}
		enqueue(t, p, 1, tagged(1, 0, 10*frameLen))
		p.EndEpoch(1)
		startPlayer(t, p)

		time.Sleep(3 * testFrame)
		synctest.Wait()
		if n := len(sink.written()); n != 3 {
			t.Fatalf("%d frames written, want 3 with the third one stuck in the sink", n)
		}
		p.Flush(1) // must not wait for the sink
		if got, want := p.Played(1), 3*testFrame; got != want {
			t.Errorf("Played(1) = %v right after Flush, want %v (the frame in the sink counts)", got, want)
		}
		enqueue(t, p, 2, tagged(2, 0, frameLen))
		close(release)
		time.Sleep(5 * testFrame)

		frames := sink.written()
		for i, f := range frames[3:] {
			if f.epoch == 1 {
				t.Errorf("frame %d of flushed epoch 1 written after the in-flight one", i+3)
			}
		}
		if got := audioOf(frames, 2); len(got) != frameLen {
			t.Errorf("epoch 2 wrote %d samples, want %d", len(got), frameLen)
		}
		// The in-flight frame was handed to the sink, so it counts.
		if got, want := p.Played(1), 3*testFrame; got != want {
			t.Errorf("Played(1) = %v, want %v", got, want)
		}
		if calls := done.get(); len(calls) != 0 {
			t.Errorf("done fired for %+v", calls)
		}
	})
}

func TestPlayerFlushDuringLastFrame(t *testing.T) {
	// The frame completing an epoch is in the sink when Flush comes: the
	// epoch was flushed, so its done callback must not follow.
	synctest.Test(t, func(t *testing.T) {
		p, sink, done := newTestPlayer(t)
		release := make(chan struct{})
		sink.block = func(f Frame) {
			if f.Epoch == 1 {
				<-release
			}
		}
		enqueue(t, p, 1, tagged(1, 0, frameLen/2))
		p.EndEpoch(1)
		startPlayer(t, p)
		time.Sleep(testFrame)
		synctest.Wait()
		p.Flush(1)
		close(release)
		time.Sleep(3 * testFrame)
		if calls := done.get(); len(calls) != 0 {
			t.Errorf("done fired for %+v after its epoch was flushed", calls)
		}
		if n := len(sink.written()); n != 1 {
			t.Errorf("%d frames written, want 1", n)
		}
	})
}

func TestPlayerEnqueueBlocksUntilFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, _ := newTestPlayer(t, WithBufferDuration(5*testFrame))
		enqueue(t, p, 1, tagged(1, 0, 5*frameLen)) // full

		// Three producers wait: two for the epoch about to be flushed, one
		// for the next. Flush must release all of them.
		type result struct {
			epoch uint64
			err   error
		}
		results := make(chan result, 3)
		for _, e := range []uint64{1, 1, 2} {
			go func() {
				results <- result{e, p.Enqueue(t.Context(), e, tagged(e, 0, frameLen))}
			}()
		}
		synctest.Wait()
		if len(results) != 0 {
			t.Fatalf("Enqueue on a full queue returned: %+v", <-results)
		}

		p.Flush(1)
		synctest.Wait()
		if len(results) != 3 {
			t.Fatalf("%d of 3 blocked Enqueue calls returned after Flush", len(results))
		}
		for range 3 {
			if r := <-results; r.err != nil {
				t.Errorf("Enqueue(%d) = %v", r.epoch, r.err)
			}
		}
		// Only epoch 2's frame is queued now.
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
		if got := p.Played(2); got != testFrame {
			t.Errorf("Played(2) = %v after one tick, want %v", got, testFrame)
		}
	})
}

func TestPlayerEnqueueCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, _ := newTestPlayer(t, WithBufferDuration(2*testFrame))
		enqueue(t, p, 1, tagged(1, 0, 2*frameLen))

		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Enqueue(ctx, 1, tagged(1, 0, frameLen)) }()
		synctest.Wait()
		if len(errc) != 0 {
			t.Fatalf("Enqueue on a full queue returned %v", <-errc)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Enqueue = %v, want context.Canceled", err)
		}

		// A waiter that gave up must not swallow the next wake-up.
		go func() { errc <- p.Enqueue(t.Context(), 1, tagged(1, 0, frameLen)) }()
		synctest.Wait()
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if len(errc) != 1 {
			t.Fatal("Enqueue still blocked after a frame was played")
		}
		if err := <-errc; err != nil {
			t.Error(err)
		}
	})
}

func TestPlayerEnqueueLargerThanBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sink, _ := newTestPlayer(t, WithBufferDuration(5*testFrame))
		startPlayer(t, p)
		synctest.Wait() // Run is waiting for its first period
		start := time.Now()
		audio := tagged(1, 0, 12*frameLen)
		enqueue(t, p, 1, audio) // blocks while playout drains the buffer
		// It fits once 7 frames have been played: the first at once (the
		// output was idle), then one a period.
		if got := time.Since(start); got != 6*testFrame {
			t.Errorf("Enqueue of 12 frames into 5 returned after %v, want %v", got, 6*testFrame)
		}
		time.Sleep(6 * testFrame)
		if got := audioOf(sink.written(), 1); !slices.Equal(got, audio) {
			t.Errorf("played %d samples, want the %d enqueued, in order", len(got), len(audio))
		}
	})
}

func TestPlayerFramesNeverMixEpochs(t *testing.T) {
	p, sink, done := newTestPlayer(t)
	ctx := t.Context()
	var want [6][]int16
	add := func(e uint64, n int) {
		s := tagged(e, len(want[e]), n)
		want[e] = append(want[e], s...)
		if err := p.Enqueue(ctx, e, s); err != nil {
			t.Fatal(err)
		}
	}
	add(1, 250)
	add(1, 170)
	add(2, 333)
	p.EndEpoch(2)
	add(3, 1)
	add(4, 700)
	add(3, 5) // back to an earlier epoch: a separate run
	p.EndEpoch(1)
	p.EndEpoch(5) // no audio at all
	add(4, 20)

	for range 20 {
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	}
	frames := sink.written()
	for i, f := range frames {
		if len(f.samples) != frameLen {
			t.Errorf("frame %d has %d samples", i, len(f.samples))
		}
		for _, v := range f.samples {
			if v != 0 && sampleEpoch(v) != f.epoch {
				t.Fatalf("frame %d (epoch %d) holds a sample of epoch %d", i, f.epoch, sampleEpoch(v))
			}
		}
	}
	for e := uint64(1); e <= 4; e++ {
		if got := audioOf(frames, e); !slices.Equal(got, want[e]) {
			t.Errorf("epoch %d: wrote %d samples, want the %d enqueued in order", e, len(got), len(want[e]))
		}
	}
	var order []uint64
	for _, c := range done.get() {
		order = append(order, c.epoch)
	}
	// 5 has no audio: it completes at the first tick. 1 completes with its
	// (only) run, 2 with its run, 3 and 4 were never ended.
	if want := []uint64{5, 1, 2}; !slices.Equal(order, want) {
		t.Errorf("done order %v, want %v", order, want)
	}
}

func TestPlayerPadsAtEpochEnd(t *testing.T) {
	// Audio queued after EndEpoch still plays, but the ended part of the
	// epoch finishes its frame with silence first.
	p, sink, done := newTestPlayer(t)
	enqueue(t, p, 1, tagged(1, 0, 100))
	p.EndEpoch(1)
	enqueue(t, p, 1, tagged(1, 100, 50))
	for range 3 {
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	}
	frames := sink.written()
	if len(frames) != 2 {
		t.Fatalf("%d frames written, want 2", len(frames))
	}
	for i, want := range [][]int16{tagged(1, 0, 100), tagged(1, 100, 50)} {
		if got := audioOf(frames[i:i+1], 1); !slices.Equal(got, want) || frames[i].samples[len(want)] != 0 {
			t.Errorf("frame %d: %d samples of audio, want %d then silence", i, len(got), len(want))
		}
	}
	if calls := done.get(); len(calls) != 1 || calls[0].frames != 1 {
		t.Errorf("done calls %+v, want one, right after the first frame", calls)
	}
}

func TestPlayerFlushOutOfOrder(t *testing.T) {
	// Queue order 3, 2, 4, 2: flushing 2 drops runs in the middle, and the
	// audio around them must close up intact.
	p, sink, done := newTestPlayer(t)
	ctx := t.Context()
	for _, c := range []struct {
		e     uint64
		start int
		n     int
	}{{3, 0, 300}, {2, 0, 200}, {4, 0, 500}, {2, 200, 100}} {
		if err := p.Enqueue(ctx, c.e, tagged(c.e, c.start, c.n)); err != nil {
			t.Fatal(err)
		}
	}
	p.EndEpoch(2)
	p.EndEpoch(4)
	p.Flush(2)
	if n := p.queued(); n != 800 {
		t.Fatalf("%d samples queued after Flush, want the 800 of epochs 3 and 4", n)
	}
	// One frame of epoch 3, then two of epoch 4, back to back.
	for range 3 {
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	}
	frames := sink.written()
	if len(frames) != 3 || p.queued() != 0 {
		t.Fatalf("%d frames written in 3 periods, %d samples left; want 3 and 0", len(frames), p.queued())
	}
	if got := audioOf(frames, 3); !slices.Equal(got, tagged(3, 0, 300)) {
		t.Errorf("epoch 3: %d samples written, want 300 intact", len(got))
	}
	if got := audioOf(frames, 4); !slices.Equal(got, tagged(4, 0, 500)) {
		t.Errorf("epoch 4: %d samples written, want 500 intact", len(got))
	}
	if got := audioOf(frames, 2); len(got) != 0 {
		t.Errorf("flushed epoch 2: %d samples written", len(got))
	}
	if calls := done.get(); len(calls) != 1 || calls[0].epoch != 4 {
		t.Errorf("done calls %+v, want epoch 4 only", calls)
	}
	// Epoch 0 is at the initial watermark: always dropped.
	if err := p.Enqueue(ctx, 0, tagged(0, 0, 10)); err != nil {
		t.Fatal(err)
	}
	if err := p.tick(); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.written()); n != len(frames) {
		t.Error("epoch 0 audio was played")
	}
}

func TestPlayerWrapAround(t *testing.T) {
	// Chunks that do not divide the ring make runs and frames straddle its
	// end many times over.
	p, sink, _ := newTestPlayer(t, WithBufferDuration(3*testFrame))
	ctx := t.Context()
	var want []int16
	for i := range 50 {
		s := tagged(1, len(want), 77+i*13%150)
		want = append(want, s...)
		for len(s) > 0 {
			n := min(len(s), 3*frameLen-p.queued())
			if err := p.Enqueue(ctx, 1, s[:n]); err != nil {
				t.Fatal(err)
			}
			s = s[n:]
			if len(s) > 0 {
				if err := p.tick(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for p.queued() > 0 {
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	}
	if got := audioOf(sink.written(), 1); !slices.Equal(got, want) {
		t.Errorf("wrote %d samples, want the %d enqueued in order", len(got), len(want))
	}
}

// queued reports how many samples wait in the ring.
func (p *Player) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

func TestPlayerIdleSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sink, _ := newTestPlayer(t, WithIdleSilence(true), WithPlayerRate(Rate48k), WithFrameDuration(10*time.Millisecond))
		startPlayer(t, p)
		time.Sleep(3*10*time.Millisecond + time.Millisecond)
		queued := time.Now()
		enqueue(t, p, 7, tagged(7, 0, 240)) // half a frame
		time.Sleep(3 * 10 * time.Millisecond)
		synctest.Wait()
		// Three silent frames; the audio, at once rather than at the next
		// period; and three periods from it on.
		frames := sink.written()
		if len(frames) != 7 {
			t.Fatalf("%d frames in 6 periods with audio queued in between, want 7", len(frames))
		}
		if !frames[3].at.Equal(queued) {
			t.Errorf("the audio left %v after it was queued, want at once", frames[3].at.Sub(queued))
		}
		for i, f := range frames {
			wantEpoch := uint64(0)
			if i == 3 {
				wantEpoch = 7
			}
			if f.epoch != wantEpoch || f.rate != Rate48k || len(f.samples) != 480 {
				t.Errorf("frame %d: epoch %d, rate %d, %d samples; want epoch %d, 48 kHz, 480", i, f.epoch, f.rate, len(f.samples), wantEpoch)
			}
			if wantEpoch == 0 && slices.ContainsFunc(f.samples, func(v int16) bool { return v != 0 }) {
				t.Errorf("idle frame %d is not silent", i)
			}
		}
	})
}

func TestPlayerPlayedForgetsOldEpochs(t *testing.T) {
	p, _, _ := newTestPlayer(t)
	for e := uint64(1); e <= 40; e++ {
		enqueue(t, p, e, tagged(e%16, 0, frameLen/2))
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	}
	for e := uint64(1); e <= 40; e++ {
		want := testFrame / 2
		if e <= 40-playerEpochs {
			want = 0
		}
		if got := p.Played(e); got != want {
			t.Errorf("Played(%d) = %v, want %v", e, got, want)
		}
	}
	if got := p.Played(41); got != 0 {
		t.Errorf("Played of a future epoch = %v", got)
	}
}

func TestPlayerSinkError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, sink, _ := newTestPlayer(t)
		wantErr := errors.New("transport closed")
		sink.err = wantErr
		enqueue(t, p, 1, tagged(1, 0, frameLen))
		err := p.Run(t.Context())
		if !errors.Is(err, wantErr) {
			t.Errorf("Run = %v, want it to wrap %v", err, wantErr)
		}
		if got := p.Played(1); got != 0 {
			t.Errorf("Played = %v for a frame the sink rejected", got)
		}
	})
}

func TestPlayerRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _, _ := newTestPlayer(t)
		startPlayer(t, p)
		synctest.Wait()
		if err := p.Run(t.Context()); err == nil {
			t.Error("second concurrent Run: no error")
		}
	})
}

func TestNewPlayerOptions(t *testing.T) {
	sink := SinkFunc(func(Frame) error { return nil })
	for _, tc := range []struct {
		name string
		opts []PlayerOption
	}{
		{"rate", []PlayerOption{WithPlayerRate(22050)}},
		{"frame 30ms", []PlayerOption{WithFrameDuration(30 * time.Millisecond)}},
		{"frame 0", []PlayerOption{WithFrameDuration(0)}},
		{"buffer below a frame", []PlayerOption{WithBufferDuration(10 * time.Millisecond)}},
		{"buffer huge", []PlayerOption{WithBufferDuration(100 * time.Hour)}},
	} {
		if p, err := NewPlayer(sink, tc.opts...); err == nil || p != nil {
			t.Errorf("%s: NewPlayer = %v, %v; want an error", tc.name, p, err)
		}
	}
	if _, err := NewPlayer(nil); err == nil {
		t.Error("nil sink: no error")
	}

	p, err := NewPlayer(sink)
	if err != nil {
		t.Fatal(err)
	}
	if p.Rate() != Rate16k || p.FrameDuration() != 20*time.Millisecond || len(p.ring) != 10*Rate16k {
		t.Errorf("defaults: rate %d, frame %v, buffer %d samples", p.Rate(), p.FrameDuration(), len(p.ring))
	}
	p, err = NewPlayer(sink, WithPlayerRate(Rate8k), WithFrameDuration(10*time.Millisecond), WithBufferDuration(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if p.Rate() != Rate8k || p.FrameDuration() != 10*time.Millisecond || len(p.frame) != 80 || len(p.ring) != Rate8k {
		t.Errorf("rate %d, frame %v (%d samples), buffer %d samples", p.Rate(), p.FrameDuration(), len(p.frame), len(p.ring))
	}
}

func TestPlayerNoAllocs(t *testing.T) {
	p, err := NewPlayer(SinkFunc(func(Frame) error { return nil }), WithEpochDone(func(uint64) {}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	chunk := tagged(1, 0, frameLen)
	n := testing.AllocsPerRun(100, func() {
		if err := p.Enqueue(ctx, 1, chunk); err != nil {
			t.Fatal(err)
		}
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("Enqueue + tick allocate %v times, want 0", n)
	}
}

func BenchmarkPlayerFramePath(b *testing.B) {
	p, err := NewPlayer(SinkFunc(func(Frame) error { return nil }))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	chunk := make([]int16, SamplesFor(p.Rate(), p.FrameDuration()))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Enqueue(ctx, 1, chunk); err != nil {
			b.Fatal(err)
		}
		if err := p.tick(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPlayerPauseResumesFromTheSameSample(t *testing.T) {
	p, sink, _ := newTestPlayer(t, WithIdleSilence(true))
	frame := SamplesFor(Rate16k, DefaultFrameDuration)
	enqueue(t, p, 1, tagged(1, 0, 4*frame))
	tick := func(n int) {
		for range n {
			if err := p.tick(); err != nil {
				t.Fatal(err)
			}
		}
	}
	tick(1)
	p.Pause()
	tick(3)
	if got := p.Played(1); got != DefaultFrameDuration {
		t.Fatalf("Played while paused = %v, want %v: the playout clock must stand still", got, DefaultFrameDuration)
	}
	frames := sink.written()
	for _, f := range frames[1:] {
		if f.epoch != 0 || slices.ContainsFunc(f.samples, func(v int16) bool { return v != 0 }) {
			t.Fatalf("a paused player wrote audio of epoch %d", f.epoch)
		}
	}
	p.Resume()
	tick(3)
	if got := audioOf(sink.written(), 1); !slices.Equal(got, tagged(1, 0, 4*frame)) {
		t.Fatalf("after resume: %d samples, want the 4 frames, in order, none lost or repeated", len(got))
	}
	// Flush while paused drops the audio: nothing of it plays on Resume.
	enqueue(t, p, 2, tagged(2, 0, 2*frame))
	p.Pause()
	p.Flush(2)
	p.Resume()
	tick(2)
	if got := audioOf(sink.written(), 2); len(got) != 0 {
		t.Fatalf("%d samples of an epoch flushed while paused were played", len(got))
	}
}

// A pause that ends where the agent's words pause too: the silence after
// the resume point is cut short by as long as the pause lasted, so the
// caller does not wait through both; what was skipped counts as played.
func TestPlayerResumeSkipsSilenceAsLongAsThePause(t *testing.T) {
	p, sink, _ := newTestPlayer(t, WithIdleSilence(true))
	frame := SamplesFor(Rate16k, DefaultFrameDuration)
	word := tagged(1, 0, frame)
	gap := make([]int16, 5*frame)
	audio := slices.Concat(word, gap, word)
	enqueue(t, p, 1, audio)
	tick := func(n int) {
		for range n {
			if err := p.tick(); err != nil {
				t.Fatal(err)
			}
		}
	}
	tick(1)
	p.Pause()
	tick(3) // three frames of pause
	p.Resume()
	tick(3)
	// Of the five silent frames, three were skipped: two play, then the
	// second word.
	heard := sink.written()[4:]
	if len(heard) != 3 || heard[2].epoch != 1 || !slices.Equal(heard[2].samples, word) {
		t.Fatalf("after the resume: %d frames, the third %v; want two silent frames, then the word", len(heard), heard)
	}
	if got := p.Played(1); got != 7*DefaultFrameDuration {
		t.Fatalf("Played = %v, want %v: skipped silence counts as played", got, 7*DefaultFrameDuration)
	}
	// Audio that resumes into a word plays on as before.
	enqueue(t, p, 2, slices.Concat(word, word))
	tick(1)
	p.Pause()
	tick(2)
	p.Resume()
	tick(1)
	if got := audioOf(sink.written(), 2); !slices.Equal(got, slices.Concat(word, word)) {
		t.Fatalf("resumed into a word: %d samples, want both frames", len(got))
	}
}

func TestPlayerEpochStartFiresOnceAtTheFirstFrameHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var starts []uint64
		var writesAtStart []int
		sink := &recSink{}
		p, err := NewPlayer(sink, WithPlayerRate(testRate), WithEpochStart(func(e uint64) {
			mu.Lock()
			starts = append(starts, e)
			writesAtStart = append(writesAtStart, len(sink.written()))
			mu.Unlock()
		}))
		if err != nil {
			t.Fatal(err)
		}
		startPlayer(t, p)
		time.Sleep(3 * testFrame) // idle: nothing started
		enqueue(t, p, 1, tagged(1, 0, 3*frameLen))
		time.Sleep(2 * testFrame)
		p.Pause() // a pause and resume is the same turn, not a new start
		time.Sleep(2 * testFrame)
		p.Resume()
		time.Sleep(2 * testFrame)
		p.Flush(1)
		enqueue(t, p, 2, tagged(2, 0, frameLen))
		time.Sleep(3 * testFrame)
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(starts, []uint64{1, 2}) {
			t.Fatalf("starts %v, want [1 2]", starts)
		}
		// Called after the frame reached the sink, never before.
		for i, n := range writesAtStart {
			if w := sink.written(); n == 0 || w[n-1].epoch != starts[i] {
				t.Errorf("start of epoch %d called before its first frame was written", starts[i])
			}
		}
	})
}

func TestPlayerCountsFramePeriodsItMissed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hold       int // frame periods the sink holds the player up, once
		missed     [2]uint64
		late       [2]uint64
		everyFrame bool
	}{
		// Held up two periods: the frames go late, none is lost.
		{"caught up", 2, [2]uint64{0, 0}, [2]uint64{1, 2}, true},
		// Held up five: MaxCatchUp frames catch up, the rest are skipped.
		{"skipped", 5, [2]uint64{1, 3}, [2]uint64{2, 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var slow atomic.Bool
				sink := &recSink{block: func(Frame) {
					if slow.CompareAndSwap(true, false) {
						time.Sleep(time.Duration(tc.hold) * testFrame)
					}
				}}
				p, err := NewPlayer(sink, WithPlayerRate(testRate), WithIdleSilence(true))
				if err != nil {
					t.Fatal(err)
				}
				startPlayer(t, p)
				time.Sleep(10*testFrame + testFrame/2)
				if n := p.Missed(); n != 0 || p.Late() != 0 {
					t.Fatalf("%d missed, %d late on time", n, p.Late())
				}
				slow.Store(true)
				time.Sleep(20 * testFrame)
				if n := p.Missed(); n < tc.missed[0] || n > tc.missed[1] {
					t.Errorf("%d missed after the sink held the player for %d periods; want %d to %d", n, tc.hold, tc.missed[0], tc.missed[1])
				}
				if n := p.Late(); n < tc.late[0] || n > tc.late[1] {
					t.Errorf("%d late after the sink held the player for %d periods; want %d to %d", n, tc.hold, tc.late[0], tc.late[1])
				}
				// Every period of the 30.5 is a frame at the sink, unless skipped.
				if got, want := uint64(len(sink.written())), 30-p.Missed(); tc.everyFrame && got != want {
					t.Errorf("%d frames written over 30 periods; want %d", got, want)
				}
			})
		})
	}
}

func TestPlayerHoldKeepsAnEpochUntilRelease(t *testing.T) {
	// Epoch 1 plays while epoch 2 is held behind it; with 1 done, the
	// sink gets nothing until 2 is released, and then 2 plays from its
	// first sample. An empty held epoch's done callback waits too.
	p, sink, done := newTestPlayer(t)
	p.Hold(2)
	enqueue(t, p, 1, tagged(1, 0, frameLen))
	p.EndEpoch(1)
	enqueue(t, p, 2, tagged(2, 0, 2*frameLen))
	p.EndEpoch(2)
	p.Hold(3)
	p.EndEpoch(3) // nothing queued: done at the next tick, were it not held
	p.Hold(2)
	for range 3 {
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	}
	if got := audioOf(sink.written(), 2); len(got) != 0 {
		t.Fatalf("%d samples of held epoch 2 played", len(got))
	}
	if got := p.Played(2); got != 0 {
		t.Errorf("Played(2) = %v while held, want 0", got)
	}
	if calls := done.get(); len(calls) != 1 || calls[0].epoch != 1 {
		t.Fatalf("done calls %+v while 2 is held, want epoch 1 only", calls)
	}
	p.Release(3) // not the one held: nothing changes
	if err := p.tick(); err != nil {
		t.Fatal(err)
	}
	if got := audioOf(sink.written(), 2); len(got) != 0 {
		t.Fatalf("Release of another epoch let %d samples of 2 play", len(got))
	}
	p.Release(2)
	for range 3 {
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	}
	if got := audioOf(sink.written(), 2); !slices.Equal(got, tagged(2, 0, 2*frameLen)) {
		t.Errorf("after Release, %d samples of epoch 2 played, want all %d in order", len(got), 2*frameLen)
	}
	var epochs []uint64
	for _, c := range done.get() {
		epochs = append(epochs, c.epoch)
	}
	slices.Sort(epochs) // an empty epoch's callback does not wait for audio before it
	if !slices.Equal(epochs, []uint64{1, 2, 3}) {
		t.Errorf("done for epochs %v, want 1, 2 and 3", epochs)
	}
}

func TestPlayerFlushDropsAHeldEpoch(t *testing.T) {
	// A held answer that is not wanted after all is flushed: none of it
	// plays, and the next epoch is not held.
	p, sink, done := newTestPlayer(t)
	p.Hold(1)
	enqueue(t, p, 1, tagged(1, 0, frameLen))
	p.EndEpoch(1)
	p.Flush(1)
	enqueue(t, p, 2, tagged(2, 0, frameLen))
	p.EndEpoch(2)
	for range 2 {
		if err := p.tick(); err != nil {
			t.Fatal(err)
		}
	}
	if got := audioOf(sink.written(), 1); len(got) != 0 {
		t.Errorf("%d samples of the flushed held epoch played", len(got))
	}
	if got := audioOf(sink.written(), 2); !slices.Equal(got, tagged(2, 0, frameLen)) {
		t.Errorf("the next epoch played %d samples, want %d", len(got), frameLen)
	}
	if calls := done.get(); len(calls) != 1 || calls[0].epoch != 2 {
		t.Errorf("done calls %+v, want epoch 2 only", calls)
	}
}

func TestPlayerAudioToAnIdleOutputLeavesAtOnce(t *testing.T) {
	// A turn's first audio does not wait for the next frame period of an
	// idle output, nor does a held turn's when it is released; the frames
	// after it keep the period.
	synctest.Test(t, func(t *testing.T) {
		p, sink, _ := newTestPlayer(t)
		startPlayer(t, p)
		time.Sleep(testFrame*5 + 7*time.Millisecond)
		queued := time.Now()
		enqueue(t, p, 1, tagged(1, 0, 3*frameLen))
		time.Sleep(3 * testFrame)
		synctest.Wait()
		frames := sink.written()
		if len(frames) != 3 || !frames[0].at.Equal(queued) {
			t.Fatalf("%d frames, the first %v after the audio was queued; want 3, the first at once", len(frames), frames[0].at.Sub(queued))
		}
		for i := 1; i < len(frames); i++ {
			if d := frames[i].at.Sub(frames[i-1].at); d != testFrame {
				t.Errorf("frame %d left %v after the one before, want %v", i, d, testFrame)
			}
		}

		p.Hold(2)
		enqueue(t, p, 2, tagged(2, 0, frameLen))
		time.Sleep(testFrame*2 + 3*time.Millisecond)
		released := time.Now()
		p.Release(2)
		synctest.Wait()
		frames = sink.written()
		if last := frames[len(frames)-1]; last.epoch != 2 || !last.at.Equal(released) {
			t.Errorf("the released turn's audio: epoch %d left %v after the release; want epoch 2 at once", last.epoch, last.at.Sub(released))
		}
	})
}

// farEnd is a sink's far end that reports what it played and counts the
// clears it was asked for.
type farEnd struct {
	mu      sync.Mutex
	played  map[uint64]time.Duration
	clears  int
	unknown bool
}

func (f *farEnd) PlayedOut(epoch uint64) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.played[epoch], !f.unknown
}

func (f *farEnd) ClearOutput() {
	f.mu.Lock()
	f.clears++
	f.mu.Unlock()
}

// A sink whose far end buffers: Played is what the far end reported, never
// more than was handed over, and a flush or a pause asks it to clear.
func TestPlayerPlayedIsWhatTheFarEndPlayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		far := &farEnd{played: map[uint64]time.Duration{}}
		p, _, _ := newTestPlayer(t, WithPlayoutReporter(far), WithOutputClearer(far))
		enqueue(t, p, 1, tagged(1, 0, testRate)) // one second
		p.EndEpoch(1)
		startPlayer(t, p)
		time.Sleep(10*testFrame + testFrame/2)
		if got := p.Played(1); got != 0 {
			t.Errorf("Played(1) = %v with nothing reported, want 0", got)
		}
		far.mu.Lock()
		far.played[1] = 4 * testFrame
		far.mu.Unlock()
		if got := p.Played(1); got != 4*testFrame {
			t.Errorf("Played(1) = %v, want the reported %v", got, 4*testFrame)
		}
		far.mu.Lock()
		far.played[1] = time.Hour // a far end never plays more than it got
		far.mu.Unlock()
		if got := p.Played(1); got != 10*testFrame {
			t.Errorf("Played(1) = %v, want what was handed over, %v", got, 10*testFrame)
		}
		far.mu.Lock()
		far.unknown = true
		far.mu.Unlock()
		if got := p.Played(1); got != 10*testFrame {
			t.Errorf("Played(1) = %v with the far end unsure, want the Player's own %v", got, 10*testFrame)
		}
		p.Pause()
		p.Pause() // already paused: no second clear
		p.Resume()
		p.Flush(1)
		p.Flush(1) // flushed already: nothing to clear
		far.mu.Lock()
		defer far.mu.Unlock()
		if far.clears != 2 {
			t.Errorf("%d clears, want 2 (the pause, the flush)", far.clears)
		}
	})
}

// With a far end that buffers, an epoch is done when the far end reports
// it played, not when its last frame was handed over; a far end that
// never reports holds it FarEndWait at most.
func TestPlayerEpochDoneWaitsForTheFarEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		far := &farEnd{played: map[uint64]time.Duration{}}
		p, _, done := newTestPlayer(t, WithPlayoutReporter(far), WithIdleSilence(true))
		enqueue(t, p, 1, tagged(1, 0, 5*frameLen))
		p.EndEpoch(1)
		enqueue(t, p, 2, tagged(2, 0, 5*frameLen))
		p.EndEpoch(2)
		startPlayer(t, p)
		time.Sleep(15 * testFrame)
		if got := done.get(); len(got) != 0 {
			t.Fatalf("done %+v before the far end reported anything", got)
		}
		far.mu.Lock()
		far.played[1] = 5 * testFrame
		far.mu.Unlock()
		time.Sleep(2 * testFrame)
		if got := done.get(); len(got) != 1 || got[0].epoch != 1 {
			t.Fatalf("done %+v; want epoch 1, reported played", got)
		}
		time.Sleep(FarEndWait)
		if got := done.get(); len(got) != 2 || got[1].epoch != 2 {
			t.Errorf("done %+v; want epoch 2 after FarEndWait without a report", got)
		}
	})
}
