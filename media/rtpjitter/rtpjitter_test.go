package rtpjitter

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The tests run a sender and a receiver on a virtual clock: packet i of a
// 20 ms stream is sent at i*20 ms with timestamp i*960 and arrives after
// its network delay; the receiver ticks every 20 ms, 7 ms out of phase
// with the sender.

const frameTicks = 960

var t0 = time.Unix(1_700_000_000, 0)

// send is one packet on the wire.
type send struct {
	p  Packet
	at time.Duration // arrival, from t0
}

// stream makes n packets starting at seq0/ts0, sent every 20 ms from
// start, each delayed by delay(i) (negative: lost).
func stream(n int, seq0 uint16, ts0 uint32, start time.Duration, delay func(i int) time.Duration) []send {
	var out []send
	for i := range n {
		d := delay(i)
		if d < 0 {
			continue
		}
		out = append(out, send{
			p:  Packet{Seq: seq0 + uint16(i), Timestamp: ts0 + uint32(i)*frameTicks, Payload: []byte{byte(i), byte(i >> 8)}},
			at: start + time.Duration(i)*20*time.Millisecond + d,
		})
	}
	return out
}

// played is what the receiver handed out, one entry per item.
type played struct {
	kind Kind
	id   int // Play, Recover: the payload's packet index
	skip bool
}

// run delivers the packets and ticks until `until`, returning the items
// and the errors Push returned by packet index.
func run(t *testing.T, b *Buffer, packets []send, until time.Duration) ([]played, map[int]error) {
	t.Helper()
	slices.SortStableFunc(packets, func(a, b send) int { return int(a.at - b.at) })
	errs := map[int]error{}
	var out []played
	buf := make([]byte, MaxPayload)
	next := 0
	for tick := 7 * time.Millisecond; tick <= until; tick += 20 * time.Millisecond {
		for next < len(packets) && packets[next].at <= tick {
			p := packets[next].p
			if err := b.Push(p, t0.Add(packets[next].at)); err != nil {
				errs[int(p.Payload[0])|int(p.Payload[1])<<8] = err
			}
			next++
		}
		if next == len(packets) && b.held == 0 {
			break // all played: what comes after is the stream's end
		}
		b.Tick(t0.Add(tick))
		for {
			it, ok := b.Next(buf)
			if !ok {
				break
			}
			id := -1
			if len(it.Payload) == 2 {
				id = int(it.Payload[0]) | int(it.Payload[1])<<8
			}
			out = append(out, played{it.Kind, id, it.Skip})
		}
	}
	return out, errs
}

func newBuffer(t *testing.T, opts ...Option) *Buffer {
	t.Helper()
	b, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// plays returns the packet indexes played (not skipped), in order.
func plays(items []played) []int {
	var ids []int
	for _, it := range items {
		if it.kind == Play && !it.skip {
			ids = append(ids, it.id)
		}
	}
	return ids
}

func count(items []played, k Kind) int {
	n := 0
	for _, it := range items {
		if it.kind == k {
			n++
		}
	}
	return n
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func TestInOrderPlaysEveryPacketAtTheInitialDelay(t *testing.T) {
	b := newBuffer(t)
	items, errs := run(t, b, stream(100, 1000, 5000, 0, func(int) time.Duration { return 5 * time.Millisecond }), 2200*time.Millisecond)
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if got := plays(items); !slices.Equal(got, seq(0, 100)) {
		t.Fatalf("played %v", got)
	}
	// Prebuffering is silent; nothing is concealed in a clean stream
	// until it ends.
	first := slices.IndexFunc(items, func(p played) bool { return p.kind == Play })
	if first < 1 || first > 3 {
		t.Errorf("the first packet played at item %d: want after 40 ms of prebuffering", first)
	}
	st := b.Stats()
	if st.Lost != 0 || st.Late != 0 || st.Stretched != 0 || st.Skipped != 0 || st.Resyncs != 0 {
		t.Errorf("stats %+v", st)
	}
	if b.Delay() != DefaultDelay {
		t.Errorf("delay %v; want %v", b.Delay(), DefaultDelay)
	}
}

func TestReorderingWithinTheDelayIsPutBackInOrder(t *testing.T) {
	// Every tenth packet is held 20-30 ms: it arrives after the next one,
	// within the 40 ms delay.
	rng := rand.New(rand.NewPCG(1, 2))
	b := newBuffer(t)
	items, errs := run(t, b, stream(200, 0, 0, 0, func(i int) time.Duration {
		if i%10 == 5 {
			return 20*time.Millisecond + time.Duration(rng.IntN(10))*time.Millisecond
		}
		return 2 * time.Millisecond
	}), 4200*time.Millisecond)
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if got := plays(items); !slices.Equal(got, seq(0, 200)) {
		t.Fatalf("played %v", got)
	}
	if st := b.Stats(); st.Late != 0 || st.Lost != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestReorderingBeyondTheDelayGrowsIt(t *testing.T) {
	// Every tenth packet is held 60 ms: the first may come too late, and
	// the delay grows so that none after it does.
	b := newBuffer(t)
	items, errs := run(t, b, stream(300, 0, 0, 0, func(i int) time.Duration {
		if i%10 == 5 {
			return 60 * time.Millisecond
		}
		return 0
	}), 6200*time.Millisecond)
	st := b.Stats()
	if st.Late > 1 {
		t.Errorf("%d late; want at most the first (errors %v)", st.Late, errs)
	}
	if d := b.Delay(); d < 70*time.Millisecond || d > 80*time.Millisecond {
		t.Errorf("delay %v; want 70-80 ms (the 60 ms lateness and half a frame)", d)
	}
	got := plays(items)
	if len(got) < 298 || !slices.IsSorted(got) {
		t.Errorf("played %d packets, in order %v", len(got), slices.IsSorted(got))
	}
	if st.Stretched == 0 {
		t.Error("the delay grew without the clock stretching")
	}
}

func TestASingleLossIsRecoveredFromTheNextPacket(t *testing.T) {
	b := newBuffer(t)
	items, _ := run(t, b, stream(50, 0, 0, 0, func(i int) time.Duration {
		if i == 20 {
			return -1
		}
		return time.Millisecond
	}), 1100*time.Millisecond)
	i := slices.IndexFunc(items, func(p played) bool { return p.kind == Recover })
	if i < 0 || items[i].id != 21 || items[i-1] != (played{Play, 19, false}) || items[i+1] != (played{Play, 21, false}) {
		t.Fatalf("items %v; want 19 played, 20 recovered from 21, 21 played", items)
	}
	if st := b.Stats(); st.Lost != 1 || st.Recover != 1 || st.Concealed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestABurstIsConcealedThenRecovered(t *testing.T) {
	b := newBuffer(t)
	items, _ := run(t, b, stream(60, 0, 0, 0, func(i int) time.Duration {
		if i >= 20 && i < 24 {
			return -1
		}
		return time.Millisecond
	}), 1300*time.Millisecond)
	st := b.Stats()
	if st.Lost != 4 || st.Concealed != 3 || st.Recover != 1 {
		t.Errorf("stats %+v; want 4 lost: 3 concealed, the last recovered from 24", st)
	}
	if got := plays(items); len(got) != 56 {
		t.Errorf("played %v", got)
	}
}

func TestALongBurstEndsInSilence(t *testing.T) {
	b := newBuffer(t, WithMaxConcealment(60*time.Millisecond))
	items, _ := run(t, b, stream(80, 0, 0, 0, func(i int) time.Duration {
		if i >= 20 && i < 40 {
			return -1
		}
		return time.Millisecond
	}), 1700*time.Millisecond)
	st := b.Stats()
	if st.Lost != 20 || st.Concealed != 3 || st.Recover != 1 {
		t.Errorf("stats %+v; want 20 lost, 3 concealed (60 ms), the last recovered", st)
	}
	// Between the concealment and the recovery: silence.
	i := slices.IndexFunc(items, func(p played) bool { return p.kind == Conceal })
	if i < 0 || count(items[i+3:i+19], Silence) != 16 {
		t.Errorf("items %v", items)
	}
}

func TestAPauseIsSilenceNotLoss(t *testing.T) {
	// 40 packets, a 2 s pause (DTX, a muted caller: the timestamps jump,
	// the sequence does not), 40 more starting with the marker.
	b := newBuffer(t)
	first := stream(40, 100, 0, 0, func(int) time.Duration { return time.Millisecond })
	second := stream(40, 140, 140*frameTicks, 2800*time.Millisecond, func(int) time.Duration { return time.Millisecond })
	second[0].p.Marker = true
	for i := range second {
		second[i].p.Payload = []byte{byte(40 + i), 0}
	}
	items, errs := run(t, b, append(first, second...), 4000*time.Millisecond)
	if len(errs) != 0 {
		t.Fatalf("errors %v", errs)
	}
	st := b.Stats()
	if st.Lost != 0 || st.Late != 0 || st.Resyncs != 0 {
		t.Errorf("stats %+v", st)
	}
	if st.Concealed > 5 {
		t.Errorf("%d frames concealed; want at most the 100 ms a loss would be", st.Concealed)
	}
	if got := plays(items); !slices.Equal(got, seq(0, 80)) {
		t.Errorf("played %v", got)
	}
	// Each frame period of the pause is one item of silence.
	if n := count(items, Silence); n < 90 {
		t.Errorf("%d silent items over a 2 s pause", n)
	}
}

func TestSequenceAndTimestampWrap(t *testing.T) {
	b := newBuffer(t)
	items, errs := run(t, b, stream(100, 65500, 1<<32-30*frameTicks, 0, func(i int) time.Duration {
		if i == 40 {
			return -1
		}
		return time.Millisecond
	}), 2200*time.Millisecond)
	if len(errs) != 0 {
		t.Fatalf("errors %v", errs)
	}
	want := append(seq(0, 40), seq(41, 100)...)
	if got := plays(items); !slices.Equal(got, want) {
		t.Errorf("played %v", got)
	}
	if st := b.Stats(); st.Lost != 1 || st.Recover != 1 || st.Resyncs != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestDuplicatesAreDropped(t *testing.T) {
	b := newBuffer(t)
	packets := stream(50, 0, 0, 0, func(int) time.Duration { return time.Millisecond })
	// 10 again at once (held), and 5 again long after it played.
	packets = append(packets, send{packets[10].p, packets[10].at + time.Millisecond}, send{packets[5].p, 500 * time.Millisecond})
	items, errs := run(t, b, packets, 1100*time.Millisecond)
	if !errors.Is(errs[10], ErrDuplicate) || !errors.Is(errs[5], ErrDuplicate) {
		t.Errorf("errors %v", errs)
	}
	if got := plays(items); !slices.Equal(got, seq(0, 50)) {
		t.Errorf("played %v", got)
	}
	if st := b.Stats(); st.Duplicate != 2 || st.Late != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestALatePacketIsDroppedAndCounted(t *testing.T) {
	b := newBuffer(t)
	items, errs := run(t, b, stream(50, 0, 0, 0, func(i int) time.Duration {
		if i == 20 {
			return 150 * time.Millisecond
		}
		return time.Millisecond
	}), 1100*time.Millisecond)
	if !errors.Is(errs[20], ErrLate) {
		t.Errorf("errors %v", errs)
	}
	if st := b.Stats(); st.Late != 1 || st.Lost != 1 || st.Recover != 1 {
		t.Errorf("stats %+v; want 20 lost at its time (recovered from 21), then late", st)
	}
	if got := plays(items); slices.Contains(got, 20) {
		t.Errorf("played %v", got)
	}
	if d := b.Delay(); d < 150*time.Millisecond {
		t.Errorf("delay %v after a packet 150 ms late; want it grown to cover it", d)
	}
}

func TestTheDelayIsBoundedAndShrinksSlowly(t *testing.T) {
	b := newBuffer(t)
	// One packet 500 ms late, then 30 s of a clean stream.
	items, _ := run(t, b, stream(1600, 0, 0, 0, func(i int) time.Duration {
		if i == 10 {
			return 500 * time.Millisecond
		}
		return time.Millisecond
	}), 32*time.Second)
	_ = items
	st := b.Stats()
	if st.Skipped == 0 {
		t.Errorf("stats %+v: the delay never shrank", st)
	}
	if d := b.Delay(); d != DefaultMinDelay {
		t.Errorf("delay %v after 30 clean seconds; want the minimum %v", d, DefaultMinDelay)
	}

	b = newBuffer(t)
	run(t, b, stream(40, 0, 0, 0, func(i int) time.Duration {
		if i == 10 {
			return 500 * time.Millisecond
		}
		return time.Millisecond
	}), 900*time.Millisecond)
	if d := b.Delay(); d != DefaultMaxDelay {
		t.Errorf("delay %v after a packet 500 ms late; want the maximum %v", d, DefaultMaxDelay)
	}
}

func TestOverflow(t *testing.T) {
	b := newBuffer(t)
	if err := b.Push(Packet{Seq: 1, Payload: make([]byte, MaxPayload+1)}, t0); !errors.Is(err, ErrOverflow) {
		t.Errorf("a %d-byte payload: %v", MaxPayload+1, err)
	}
	// A sender far faster than real time: 60 packets (1.2 s of audio) at
	// once. What fits the maximum delay is held, the rest dropped, and
	// the buffer never holds more than the ring.
	for i := range 60 {
		_ = b.Push(Packet{Seq: uint16(i), Timestamp: uint32(i * frameTicks), Payload: []byte{byte(i), 0}}, t0)
	}
	st := b.Stats()
	if st.Overflow == 0 || b.held > 13 {
		t.Errorf("held %d, stats %+v", b.held, st)
	}
}

func TestATimelineJumpResyncs(t *testing.T) {
	b := newBuffer(t)
	first := stream(40, 0, 0, 0, func(int) time.Duration { return time.Millisecond })
	// The sender restarts its timestamps far back, a marker on the first.
	second := stream(40, 40, 7, 1000*time.Millisecond, func(int) time.Duration { return time.Millisecond })
	second[0].p.Marker = true
	for i := range second {
		second[i].p.Payload = []byte{byte(40 + i), 0}
	}
	items, errs := run(t, b, append(first, second...), 2000*time.Millisecond)
	if len(errs) != 0 {
		t.Fatalf("errors %v", errs)
	}
	if st := b.Stats(); st.Resyncs != 1 || st.Late != 0 {
		t.Errorf("stats %+v", st)
	}
	if got := plays(items); !slices.Equal(got, seq(0, 80)) {
		t.Errorf("played %v", got)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, o := range []Option{
		WithClockRate(10), WithFrame(0), WithDelay(10*time.Millisecond, 20*time.Millisecond, 200*time.Millisecond),
		WithDelay(40*time.Millisecond, 20*time.Millisecond, 2*time.Second), WithMaxConcealment(-1),
	} {
		if _, err := New(o); err == nil {
			t.Error("New took a bad option")
		}
	}
}
