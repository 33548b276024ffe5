package jitter

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

const (
	rate   = 8000
	frameN = 160 // 20 ms at 8 kHz
	depthF = 3   // default depth (60 ms) in frames
)

func newBuffer(t testing.TB, opts ...Option) *Buffer {
	t.Helper()
	b, err := New(rate, 20*time.Millisecond, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signal returns n samples, all distinct from their neighbours and nonzero,
// so any misplaced, repeated or missing sample shows.
func signal(n int) []int16 {
	s := make([]int16, n)
	for i := range s {
		s[i] = int16(i%30000 + 1)
	}
	return s
}

// sim is a simulated receive leg: packets of ptime samples cut from sig,
// packet k at timestamp base+k*ptime with the marker on packet 0.
type sim struct {
	t     *testing.T
	b     *Buffer
	base  uint32
	sig   []int16
	ptime int

	sts  []Status
	out  []int16
	errs map[int][]error // Push errors by packet index
}

func newSim(t *testing.T, b *Buffer, base uint32, sig []int16, ptime int) *sim {
	return &sim{t: t, b: b, base: base, sig: sig, ptime: ptime, errs: map[int][]error{}}
}

func (s *sim) push(k int) error {
	pcm := slices.Clone(s.sig[k*s.ptime : (k+1)*s.ptime])
	err := s.b.Push(uint16(k), s.base+uint32(k*s.ptime), k == 0, pcm)
	clear(pcm) // the buffer must have copied
	if err != nil {
		s.errs[k] = append(s.errs[k], err)
	}
	return err
}

func (s *sim) pop() Status {
	out := make([]int16, frameN)
	st := s.b.Pop(out)
	s.sts = append(s.sts, st)
	s.out = append(s.out, out...)
	return st
}

// run plays ticks frame periods: each tick pops a frame, then pushes the
// packets that arrived during it, arrivals[tick], in that order.
func (s *sim) run(arrivals [][]int, ticks int) {
	for tick := range ticks {
		s.pop()
		if tick < len(arrivals) {
			for _, k := range arrivals[tick] {
				s.push(k)
			}
		}
	}
}

// completionArrivals delivers each of n packets of ptime samples at the end
// of the tick during which its last sample was captured.
func completionArrivals(n, ptime int) [][]int {
	var a [][]int
	for k := range n {
		tick := ((k+1)*ptime+frameN-1)/frameN - 1
		for len(a) <= tick {
			a = append(a, nil)
		}
		a[tick] = append(a[tick], k)
	}
	return a
}

func inOrder(n int) [][]int { return completionArrivals(n, frameN) }

func frame(s []int16, i int) []int16 { return s[i*frameN : (i+1)*frameN] }

func halve(f []int16, times int) []int16 {
	g := slices.Clone(f)
	for range times {
		for i := range g {
			g[i] /= 2
		}
	}
	return g
}

func checkNoErrs(t *testing.T, s *sim) {
	t.Helper()
	if len(s.errs) > 0 {
		t.Fatalf("Push errors: %v", s.errs)
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  int
		frame time.Duration
		opts  []Option
		ok    bool
	}{
		{"8k", 8000, 20 * time.Millisecond, nil, true},
		{"16k", 16000, 20 * time.Millisecond, nil, true},
		{"48k", 48000, 10 * time.Millisecond, []Option{WithDepth(time.Second), WithMaxConcealment(0)}, true},
		{"zero depth", 8000, 20 * time.Millisecond, []Option{WithDepth(0)}, true},
		{"bad rate", 11025, 20 * time.Millisecond, nil, false},
		{"zero frame", 8000, 0, nil, false},
		{"sub-sample frame", 8000, time.Microsecond, nil, false},
		{"long frame", 8000, 2 * time.Second, nil, false},
		{"negative depth", 8000, 20 * time.Millisecond, []Option{WithDepth(-time.Millisecond)}, false},
		{"deep", 8000, 20 * time.Millisecond, []Option{WithDepth(1001 * time.Millisecond)}, false},
		{"negative concealment", 8000, 20 * time.Millisecond, []Option{WithMaxConcealment(-1)}, false},
		{"long concealment", 8000, 20 * time.Millisecond, []Option{WithMaxConcealment(2 * time.Second)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(tc.rate, tc.frame, tc.opts...)
			if (err == nil) != tc.ok {
				t.Fatalf("New: err = %v, want ok=%v", err, tc.ok)
			}
			if err == nil && b.FrameLen() != tc.rate*int(tc.frame/time.Millisecond)/1000 {
				t.Errorf("FrameLen = %d", b.FrameLen())
			}
		})
	}
}

func TestStatusString(t *testing.T) {
	for st, want := range map[Status]string{Played: "Played", Concealed: "Concealed", Silence: "Silence", 7: "Status(7)"} {
		if got := st.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(st), got, want)
		}
	}
}

func TestInOrder(t *testing.T) {
	const n = 50
	sig := signal(n * frameN)
	s := newSim(t, newBuffer(t), 1000, sig, frameN)
	s.run(inOrder(n), n+depthF+10)
	checkNoErrs(t, s)

	// depth of silence, every packet once and in order, the last frame
	// concealed three times (60 ms), 6 dB down each, then silence.
	var want []int16
	var wantSts []Status
	add := func(st Status, f []int16) {
		wantSts = append(wantSts, st)
		want = append(want, f...)
	}
	for range depthF {
		add(Silence, make([]int16, frameN))
	}
	for k := range n {
		add(Played, frame(sig, k))
	}
	for i := range 3 {
		add(Concealed, halve(frame(sig, n-1), i+1))
	}
	for len(wantSts) < len(s.sts) {
		add(Silence, make([]int16, frameN))
	}
	if !slices.Equal(s.sts, wantSts) {
		t.Fatalf("statuses\n got %v\nwant %v", s.sts, wantSts)
	}
	if !slices.Equal(s.out, want) {
		t.Fatal("output differs from the input delayed by the depth")
	}
	st := s.b.Stats()
	if st.Received != n || st.Played != n || st.Concealed != 3 || st.Resyncs != 0 ||
		st.Played+st.Concealed+st.Silence != uint64(len(s.sts)) {
		t.Errorf("stats %+v", st)
	}
}

// reference is the in-order run every reordering must reproduce exactly.
func reference(t *testing.T, n int, base uint32) *sim {
	s := newSim(t, newBuffer(t), base, signal(n*frameN), frameN)
	s.run(inOrder(n), n+depthF+5)
	checkNoErrs(t, s)
	return s
}

func sameRun(t *testing.T, got, want *sim) {
	t.Helper()
	if !slices.Equal(got.sts, want.sts) {
		t.Fatalf("statuses\n got %v\nwant %v", got.sts, want.sts)
	}
	if !slices.Equal(got.out, want.out) {
		t.Fatal("output differs from the in-order run")
	}
}

func TestReorderSwapPairs(t *testing.T) {
	const n = 40
	want := reference(t, n, 0)
	arr := inOrder(n)
	for i := 0; i+1 < n; i += 2 {
		arr[i][0], arr[i+1][0] = arr[i+1][0], arr[i][0]
	}
	s := newSim(t, newBuffer(t), 0, signal(n*frameN), frameN)
	s.run(arr, n+depthF+5)
	checkNoErrs(t, s)
	sameRun(t, s, want)
}

func TestReorderPermutationWithinDepth(t *testing.T) {
	const n = 60
	want := reference(t, n, 0)
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		arr := inOrder(n)
		for blk := 0; blk < n; blk += depthF {
			p := r.Perm(depthF)
			for i := range depthF {
				arr[blk+i] = []int{blk + p[i]}
			}
		}
		s := newSim(t, newBuffer(t), 0, signal(n*frameN), frameN)
		s.run(arr, n+depthF+5)
		checkNoErrs(t, s)
		sameRun(t, s, want)
	}
}

// TestReorderRandomDelay delays each packet by up to depth-1 frames: the
// start may come later than in order, but every sample plays once, in order,
// with nothing concealed.
func TestReorderRandomDelay(t *testing.T) {
	const n = 80
	sig := signal(n * frameN)
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 2))
		arr := make([][]int, n+depthF)
		for k := range n {
			tick := k + r.IntN(depthF)
			arr[tick] = append(arr[tick], k)
		}
		for _, a := range arr {
			r.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
		}
		s := newSim(t, newBuffer(t), 0, sig, frameN)
		s.run(arr, n+4*depthF)
		checkNoErrs(t, s)
		lead := slices.Index(s.sts, Played)
		if lead < depthF || lead+n > len(s.sts) {
			t.Fatalf("seed %d: played after %d frames, before the depth", seed, lead)
		}
		for i, st := range s.sts[lead : lead+n] {
			if st != Played {
				t.Fatalf("seed %d: frame %d is %v", seed, lead+i, st)
			}
		}
		if !slices.Equal(s.out[lead*frameN:(lead+n)*frameN], sig) {
			t.Fatalf("seed %d: played audio differs from the input", seed)
		}
	}
}

func TestLossConcealed(t *testing.T) {
	const n = 30
	want := reference(t, n, 0)
	for _, lost := range [][]int{{10}, {10, 11}, {10, 11, 12, 13, 14}} {
		arr := inOrder(n)
		for _, k := range lost {
			arr[k] = nil
		}
		s := newSim(t, newBuffer(t), 0, signal(n*frameN), frameN)
		s.run(arr, n+depthF+5)
		checkNoErrs(t, s)
		before := lost[0] - 1
		for i, k := range lost {
			tick := k + depthF
			wantSt := Concealed
			wantOut := halve(frame(want.out, before+depthF), i+1)
			if i >= 3 { // 60 ms of concealment, then silence
				wantSt, wantOut = Silence, make([]int16, frameN)
			}
			if s.sts[tick] != wantSt || !slices.Equal(frame(s.out, tick), wantOut) {
				t.Fatalf("lost %v: tick %d is %v, want %v (attenuated repeat)", lost, tick, s.sts[tick], wantSt)
			}
		}
		// everything else is exactly the in-order run: later audio on time
		for tick := range s.sts {
			if slices.Contains(lost, tick-depthF) {
				continue
			}
			if s.sts[tick] != want.sts[tick] || !slices.Equal(frame(s.out, tick), frame(want.out, tick)) {
				t.Fatalf("lost %v: tick %d differs from the in-order run", lost, tick)
			}
		}
		if st := s.b.Stats(); st.Concealed != uint64(min(len(lost), 3))+3 {
			t.Errorf("lost %v: Concealed = %d", lost, st.Concealed)
		}
	}
}

// TestPartialFrameConcealed loses one 10 ms packet: its half frame is
// concealed from the previous frame and the frame still counts as played.
func TestPartialFrameConcealed(t *testing.T) {
	const n = 40 // 10 ms packets
	sig := signal(n * 80)
	arr := completionArrivals(n, 80)
	arr[9] = slices.DeleteFunc(arr[9], func(k int) bool { return k == 19 })
	s := newSim(t, newBuffer(t), 0, sig, 80)
	s.run(arr, n/2+depthF+2)
	checkNoErrs(t, s)
	tick := 9 + depthF
	got := frame(s.out, tick)
	if s.sts[tick] != Played || !slices.Equal(got[:80], sig[18*80:19*80]) ||
		!slices.Equal(got[80:], halve(sig[17*80:18*80], 1)) {
		t.Fatalf("tick %d: %v, second half not concealed from the previous frame", tick, s.sts[tick])
	}
}

func TestLate(t *testing.T) {
	const n = 30
	arr := inOrder(n)
	arr[10] = nil
	arr[10+depthF+1] = append(arr[10+depthF+1], 10) // after its slot was concealed
	s := newSim(t, newBuffer(t), 0, signal(n*frameN), frameN)
	s.run(arr, n+depthF+5)
	if errs := s.errs[10]; len(errs) != 1 || !errors.Is(errs[0], ErrLate) || len(s.errs) != 1 {
		t.Fatalf("errors %v, want ErrLate for packet 10", s.errs)
	}
	// identical to losing it
	loss := inOrder(n)
	loss[10] = nil
	l := newSim(t, newBuffer(t), 0, signal(n*frameN), frameN)
	l.run(loss, n+depthF+5)
	sameRun(t, s, l)
	if st := s.b.Stats(); st.Late != 1 || st.Received != n {
		t.Errorf("stats %+v", st)
	}
}

// A packet that straddles the playout point keeps its unplayed part.
func TestPartlyLate(t *testing.T) {
	b := newBuffer(t, WithDepth(0))
	sig := signal(4 * frameN)
	out := make([]int16, frameN)
	if err := b.Push(0, 0, false, sig[:frameN]); err != nil {
		t.Fatal(err)
	}
	b.Pop(out) // plays ts 0
	b.Pop(out) // conceals ts 160
	if err := b.Push(1, 80, false, sig[80:480]); err != nil {
		t.Fatalf("partly late packet: %v", err)
	}
	if st := b.Pop(out); st != Played || !slices.Equal(out, sig[320:480]) {
		t.Fatalf("Pop = %v, want the packet's unplayed part", st)
	}
}

func TestDuplicate(t *testing.T) {
	const n = 30
	want := reference(t, n, 0)
	arr := inOrder(n)
	arr[5] = append(arr[5], 5)   // twice at once
	arr[7] = append(arr[7], 5)   // again, still held
	arr[12] = append(arr[12], 5) // again, long played
	s := newSim(t, newBuffer(t), 0, signal(n*frameN), frameN)
	s.run(arr, n+depthF+5)
	sameRun(t, s, want)
	errs := s.errs[5]
	if len(s.errs) != 1 || len(errs) != 3 || !errors.Is(errs[0], ErrDuplicate) ||
		!errors.Is(errs[1], ErrDuplicate) || !errors.Is(errs[2], ErrLate) {
		t.Fatalf("errors %v, want 2 ErrDuplicate then ErrLate", s.errs)
	}
	if st := s.b.Stats(); st.Duplicate != 2 || st.Late != 1 || st.Received != n+3 {
		t.Errorf("stats %+v", st)
	}
}

func TestPacketSizes(t *testing.T) {
	for _, ptime := range []int{80, 240, 400} { // 10, 30, 50 ms
		t.Run(time.Duration(ptime/8*int(time.Millisecond)).String(), func(t *testing.T) {
			const frames = 60
			n := frames * frameN / ptime
			sig := signal(n * ptime)
			s := newSim(t, newBuffer(t), 12345, sig, ptime)
			s.run(completionArrivals(n, ptime), frames+10)
			checkNoErrs(t, s)
			lead := slices.Index(s.sts, Played)
			if lead < depthF {
				t.Fatalf("played after %d frames", lead)
			}
			for i, st := range s.sts[lead : lead+frames] {
				if st != Played {
					t.Fatalf("frame %d is %v", lead+i, st)
				}
			}
			if !slices.Equal(s.out[lead*frameN:(lead+frames)*frameN], sig) {
				t.Fatal("played audio differs from the input")
			}
		})
	}
}

func TestTimestampWrap(t *testing.T) {
	const n = 40
	want := reference(t, n, 0)
	base := uint32(1<<32 - 17*frameN - 37) // wraps mid-stream, mid-frame
	s := newSim(t, newBuffer(t), base, signal(n*frameN), frameN)
	s.run(inOrder(n), n+depthF+5)
	checkNoErrs(t, s)
	sameRun(t, s, want)

	arr := inOrder(n)
	for i := 0; i+1 < n; i += 2 {
		arr[i][0], arr[i+1][0] = arr[i+1][0], arr[i][0]
	}
	r := newSim(t, newBuffer(t), base, signal(n*frameN), frameN)
	r.run(arr, n+depthF+5)
	checkNoErrs(t, r)
	sameRun(t, r, want)
	if st := r.b.Stats(); st.Resyncs != 1 { // the late marker packet 0 only
		t.Errorf("Resyncs = %d", st.Resyncs)
	}
	if st := s.b.Stats(); st.Resyncs != 0 {
		t.Errorf("in order: Resyncs = %d", st.Resyncs)
	}
}

// stream pushes packets k0..k0+n-1 of sig (20 ms) at timestamps from ts,
// one per tick after a pop, and returns the statuses popped.
func stream(t *testing.T, b *Buffer, sig []int16, k0, n int, ts uint32, marker bool, out *[]int16) []Status {
	t.Helper()
	var sts []Status
	f := make([]int16, frameN)
	for i := range n {
		sts = append(sts, b.Pop(f))
		*out = append(*out, f...)
		k := k0 + i
		if err := b.Push(uint16(k), ts+uint32(i*frameN), marker && i == 0, sig[k*frameN:(k+1)*frameN]); err != nil {
			t.Fatalf("packet %d: %v", k, err)
		}
	}
	return sts
}

func pops(b *Buffer, n int, out *[]int16) []Status {
	var sts []Status
	f := make([]int16, frameN)
	for range n {
		sts = append(sts, b.Pop(f))
		*out = append(*out, f...)
	}
	return sts
}

func repeat(st Status, n int) []Status { return slices.Repeat([]Status{st}, n) }

// played checks that out holds sig's packets k0.. from frame at on.
func checkPlayed(t *testing.T, out, sig []int16, at, k0, n int) {
	t.Helper()
	if !slices.Equal(out[at*frameN:(at+n)*frameN], sig[k0*frameN:(k0+n)*frameN]) {
		t.Fatalf("frames %d..%d are not packets %d..%d", at, at+n, k0, k0+n)
	}
}

func TestMarkerResync(t *testing.T) {
	b := newBuffer(t)
	sig := signal(60 * frameN)
	var out []int16
	sts := stream(t, b, sig, 0, 20, 0, true, &out)                   // talkspurt A
	sts = append(sts, pops(b, 10, &out)...)                          // DTX pause
	tsB := uint32(20*frameN + 7000)                                  // B's start: not where the playout point is
	sts = append(sts, stream(t, b, sig, 20, 20, tsB, true, &out)...) // talkspurt B
	sts = append(sts, pops(b, depthF, &out)...)

	if err := b.Push(20, tsB, true, sig[20*frameN:21*frameN]); !errors.Is(err, ErrLate) {
		t.Fatalf("repeated marker packet after it played: %v, want ErrLate", err)
	}
	want := slices.Concat(repeat(Silence, depthF), repeat(Played, 20), repeat(Concealed, 3),
		repeat(Silence, 10-6+depthF), repeat(Played, 20))
	if !slices.Equal(sts, want) {
		t.Fatalf("statuses\n got %v\nwant %v", sts, want)
	}
	checkPlayed(t, out, sig, depthF, 0, 20)
	checkPlayed(t, out, sig, 30+depthF, 20, 20) // B delayed by the depth again
	if st := b.Stats(); st.Resyncs != 1 || st.Duplicate != 0 {
		t.Errorf("stats %+v, want one resync", st)
	}
}

func TestMarkerDuplicateNoResync(t *testing.T) {
	b := newBuffer(t)
	sig := signal(frameN)
	if err := b.Push(0, 500, true, sig); err != nil {
		t.Fatal(err)
	}
	if err := b.Push(0, 500, true, sig); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second copy: %v, want ErrDuplicate", err)
	}
	if st := b.Stats(); st.Resyncs != 0 || st.Duplicate != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A timestamp jump of 2 s (a new source, no marker) resyncs at once.
func TestGapJumpResyncs(t *testing.T) {
	b := newBuffer(t)
	sig := signal(40 * frameN)
	var out []int16
	sts := stream(t, b, sig, 0, 20, 0, false, &out)
	sts = append(sts, pops(b, 5, &out)...)
	sts = append(sts, stream(t, b, sig, 20, 20, 20*frameN+2*rate, false, &out)...)
	sts = append(sts, pops(b, depthF, &out)...)
	// the far packet arrives after the third concealed frame, then the
	// buffer prebuffers again
	want := slices.Concat(repeat(Silence, depthF), repeat(Played, 20), repeat(Concealed, 3),
		repeat(Silence, depthF-1), repeat(Played, 20))
	if !slices.Equal(sts, want) {
		t.Fatalf("statuses\n got %v\nwant %v", sts, want)
	}
	checkPlayed(t, out, sig, 25+depthF, 20, 20)
	if st := b.Stats(); st.Resyncs != 1 {
		t.Errorf("Resyncs = %d", st.Resyncs)
	}
}

// The sender stops for 2 s and resumes without advancing its timestamps:
// the buffer conceals, plays silence while the playout point runs on, then
// the resumed audio is 2 s behind it and resyncs.
func TestGapStalledTimestampsResync(t *testing.T) {
	b := newBuffer(t)
	sig := signal(40 * frameN)
	var out []int16
	sts := stream(t, b, sig, 0, 20, 0, false, &out)
	sts = append(sts, pops(b, 100, &out)...)
	sts = append(sts, stream(t, b, sig, 20, 20, 20*frameN, false, &out)...)
	sts = append(sts, pops(b, depthF, &out)...)
	want := slices.Concat(repeat(Silence, depthF), repeat(Played, 20), repeat(Concealed, 3),
		repeat(Silence, 100-6+depthF), repeat(Played, 20))
	if !slices.Equal(sts, want) {
		t.Fatalf("statuses\n got %v\nwant %v", sts, want)
	}
	checkPlayed(t, out, sig, 120+depthF, 20, 20)
	if st := b.Stats(); st.Resyncs != 1 || st.Late != 0 {
		t.Errorf("stats %+v", st)
	}
}

// The sender pauses 2 s and its timestamps advance with real time (RFC 3550):
// no resync, the audio after the gap plays exactly on time.
func TestGapContinuousTimestamps(t *testing.T) {
	b := newBuffer(t)
	sig := signal(40 * frameN)
	var out []int16
	sts := stream(t, b, sig, 0, 20, 0, false, &out)
	sts = append(sts, pops(b, 100, &out)...)
	sts = append(sts, stream(t, b, sig, 20, 20, 120*frameN, false, &out)...)
	sts = append(sts, pops(b, depthF, &out)...)
	want := slices.Concat(repeat(Silence, depthF), repeat(Played, 20), repeat(Concealed, 3),
		repeat(Silence, 100-3), repeat(Played, 20))
	if !slices.Equal(sts, want) {
		t.Fatalf("statuses\n got %v\nwant %v", sts, want)
	}
	checkPlayed(t, out, sig, 120+depthF, 20, 20)
	if st := b.Stats(); st.Resyncs != 0 {
		t.Errorf("Resyncs = %d", st.Resyncs)
	}
}

func TestOverflow(t *testing.T) {
	b := newBuffer(t, WithDepth(0)) // holds 1 s
	sig := signal(rate + 1)
	if err := b.Push(0, 0, false, sig[:frameN]); err != nil {
		t.Fatal(err)
	}
	if err := b.Push(1, rate-frameN, false, sig[:frameN]); err != nil {
		t.Fatalf("last slot: %v", err)
	}
	if err := b.Push(2, 7000, false, sig[:1100]); !errors.Is(err, ErrOverflow) {
		t.Fatalf("past the end: %v, want ErrOverflow", err)
	}
	if err := b.Push(3, 0, true, sig); !errors.Is(err, ErrOverflow) {
		t.Fatalf("packet longer than the buffer: %v, want ErrOverflow", err)
	}
	if st := b.Stats(); st.Overflow != 2 || st.Resyncs != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPopLength(t *testing.T) {
	b := newBuffer(t, WithDepth(0))
	sig := signal(2 * frameN)
	for _, n := range []int{0, 100, frameN + 100} {
		buf := make([]int16, 400)
		for i := range buf {
			buf[i] = -7
		}
		b.Push(0, 0, false, sig) // plays once, then is late
		out := buf[:n]
		b.Pop(out)
		for i, v := range buf {
			if i < n && v == -7 {
				t.Fatalf("len %d: out[%d] not written", n, i)
			}
			if i >= n && v != -7 {
				t.Fatalf("len %d: wrote past out at %d", n, i)
			}
			if i >= frameN && i < n && v != 0 {
				t.Fatalf("len %d: out[%d] = %d past the frame, want 0", n, i, v)
			}
		}
	}
}

func TestStats(t *testing.T) {
	b := newBuffer(t)
	sig := signal(20 * frameN)
	out := make([]int16, frameN)
	var popped uint64
	pop := func() { b.Pop(out); popped++ }
	push := func(k int, ts uint32, marker bool, want error) {
		t.Helper()
		if err := b.Push(uint16(k), ts, marker, sig[k*frameN:(k+1)*frameN]); !errors.Is(err, want) {
			t.Fatalf("Push(%d, %d, %v) = %v, want %v", k, ts, marker, err, want)
		}
	}
	pop() // nothing yet: Silence
	for k := range 10 {
		push(k, uint32(k*frameN), k == 0, nil)
		pop() // Silence twice, then packets 0..7 played
	}
	push(9, 9*frameN, false, ErrDuplicate)
	push(0, 0, false, ErrLate)
	push(0, 0, true, ErrLate) // the marker packet it synced to: no resync
	if err := b.Push(10, 10*frameN, false, nil); err != nil {
		t.Fatalf("empty packet: %v", err)
	}
	far := uint32(10*frameN + 7*rate)
	push(11, far, false, nil) // resync
	if err := b.Push(12, far+rate, false, sig[:4*frameN]); !errors.Is(err, ErrOverflow) {
		t.Fatalf("beyond depth+1s: %v, want ErrOverflow", err)
	}
	for range 20 {
		pop() // one packet held, less than the depth: prebuffering
	}
	want := Stats{Received: 16, Played: 8, Late: 2, Duplicate: 1, Overflow: 1, Concealed: 0, Resyncs: 1, Silence: 23}
	if st := b.Stats(); st != want || st.Played+st.Concealed+st.Silence != popped {
		t.Errorf("stats\n got %+v\nwant %+v", st, want)
	}
}

func TestConcurrent(t *testing.T) {
	b := newBuffer(t)
	const n = 500
	var wg sync.WaitGroup
	wg.Go(func() {
		pcm := make([]int16, frameN)
		for k := range n {
			b.Push(uint16(k), uint32(k*frameN), false, pcm)
		}
	})
	wg.Go(func() {
		out := make([]int16, frameN)
		for range n {
			b.Pop(out)
		}
	})
	wg.Wait()
	if st := b.Stats(); st.Received != n || st.Played+st.Concealed+st.Silence != n {
		t.Errorf("stats %+v", st)
	}
}

func BenchmarkPushPop(b *testing.B) {
	for _, rate := range []int{8000, 48000} {
		b.Run(strconv.Itoa(rate/1000)+"k", func(b *testing.B) {
			buf, err := New(rate, 20*time.Millisecond)
			if err != nil {
				b.Fatal(err)
			}
			n := buf.FrameLen()
			pcm := make([]int16, n)
			out := make([]int16, n)
			ts := uint32(0)
			for i := range 10 { // reach steady state
				buf.Push(uint16(i), ts, i == 0, pcm)
				buf.Pop(out)
				ts += uint32(n)
			}
			b.ReportAllocs()
			b.SetBytes(int64(2 * n))
			seq := uint16(10)
			for b.Loop() {
				if err := buf.Push(seq, ts, false, pcm); err != nil {
					b.Fatal(err)
				}
				if buf.Pop(out) != Played {
					b.Fatal("not played")
				}
				seq++
				ts += uint32(n)
			}
		})
	}
}

// FuzzBuffer drives a Buffer with a random mix of pushes and pops and checks
// its invariants.
func FuzzBuffer(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0x10, 0x11, 0x12, 0, 0x13, 0, 0x14, 0, 0})
	f.Add([]byte{3, 1, 2, 0xff, 0xff, 0x90, 0x10, 0, 0x80, 0x91, 0, 0, 0x7f, 0xc3})
	f.Add(slices.Repeat([]byte{0x21, 0, 0x22, 0}, 40))
	f.Fuzz(fuzzBuffer)
}

func fuzzBuffer(t *testing.T, data []byte) {
	if len(data) < 3 || len(data) > 300 {
		return // long inputs add nothing but slow exec and minimization
	}
	rates := []int{8000, 16000, 48000}
	rate := rates[int(data[0])%len(rates)]
	frame := time.Duration(10+10*(int(data[0]>>2)%3)) * time.Millisecond
	depth := time.Duration(data[1]%16) * 10 * time.Millisecond
	conceal := time.Duration(data[2]%8) * 10 * time.Millisecond
	b, err := New(rate, frame, WithDepth(depth), WithMaxConcealment(conceal))
	if err != nil {
		t.Fatal(err)
	}
	ms := rate / 1000
	fl := b.FrameLen()
	buf := make([]int16, 2*fl+8)
	pcm := make([]int16, 120*ms)
	for i := range pcm {
		pcm[i] = int16(i%2000 - 1000)
	}
	checkEnd := func() {
		if got := b.scanEnd(); b.end != got {
			t.Fatalf("end %d, but the last held sample ends at %d", b.end, got)
		}
	}
	var pushes, pops, dropped uint64
	var ts uint32
	var seq uint16
	data = data[3:]
	for ops := 0; len(data) > 0; ops++ {
		if ops%64 == 0 {
			checkEnd() // the scan is slow at 48 kHz
		}
		op := data[0]
		data = data[1:]
		if op&1 == 0 { // pop
			n := fl
			switch op >> 5 {
			case 1:
				n = fl / 2
			case 2:
				n = fl + 3
			}
			const sentinel = 0x7abc // never a sample: pushed samples are small
			area := buf[:n+8]
			for i := range area {
				area[i] = sentinel
			}
			st := b.Pop(area[:n])
			pops++
			for i, v := range area {
				if (i < n) == (v == sentinel) {
					t.Fatalf("Pop(len %d) wrote buf[%d] = %d", n, i, v)
				}
				if st == Silence && i < n && v != 0 {
					t.Fatalf("Silence with buf[%d] = %d", i, v)
				}
			}
			if st != Played && st != Concealed && st != Silence {
				t.Fatalf("status %v", st)
			}
			continue
		}
		arg := byte(0)
		if len(data) > 0 {
			arg, data = data[0], data[1:]
		}
		// timestamp step in 5 ms units, sometimes in 1/16 s, sometimes huge
		step := int(int8(arg)) * ms * 5
		switch op >> 6 {
		case 1:
			step = int(int8(arg)) * rate / 16 // up to ±8 s
		case 2:
			step = int(arg) << 24
		}
		ts += uint32(step)
		n := []int{0, 5, 10, 20, 30, 60, 120, 20}[op>>1&7] * ms
		marker := op&0x30 == 0x30
		err := b.Push(seq, ts, marker, pcm[:n])
		seq++
		pushes++
		switch {
		case err == nil:
		case errors.Is(err, ErrLate), errors.Is(err, ErrDuplicate), errors.Is(err, ErrOverflow):
			dropped++
		default:
			t.Fatalf("Push: unexpected error %v", err)
		}
		ts += uint32(n)
	}
	checkEnd()
	st := b.Stats()
	if st.Received != pushes || st.Late+st.Duplicate+st.Overflow != dropped ||
		st.Played+st.Concealed+st.Silence != pops || st.Resyncs > pushes {
		t.Fatalf("stats %+v after %d pushes (%d dropped) and %d pops", st, pushes, dropped, pops)
	}
}
