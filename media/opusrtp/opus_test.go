package opusrtp

import "testing"

func TestLBRRIsFoundWhereTheEncoderPutsIt(t *testing.T) {
	pcm := voice(100)
	with, without := encode(t, pcm, 20), encode(t, pcm, 0)
	n := 0
	for _, p := range with[5:] {
		if hasLBRR(p) {
			n++
		}
	}
	if n < 70 {
		t.Errorf("%d of 95 packets coded with FEC carry it", n)
	}
	for i, p := range without {
		if hasLBRR(p) {
			t.Fatalf("packet %d coded without FEC carries it", i)
		}
	}
	for _, p := range with {
		if opusSamples(p) != opusFrame {
			t.Fatalf("a 20 ms packet holds %d samples", opusSamples(p))
		}
	}
	if hasLBRR(nil) || hasLBRR([]byte{0xfc, 0xff}) || opusSamples(nil) != 0 {
		t.Error("an empty or CELT packet read as FEC")
	}
}

// The TOC byte alone says how much audio a packet holds, whatever its
// mode and frame count, so the jitter buffer can place a packet it has
// not decoded.
func TestOpusSamplesReadsTheTOC(t *testing.T) {
	for _, c := range []struct {
		name string
		p    []byte
		want int
	}{
		{"SILK 10 ms", []byte{0 << 3}, 480},
		{"SILK 20 ms", []byte{1 << 3}, 960},
		{"SILK 60 ms", []byte{3 << 3}, 2880},
		{"hybrid 10 ms", []byte{12 << 3}, 480},
		{"hybrid 20 ms", []byte{13 << 3}, 960},
		{"CELT 2.5 ms", []byte{16 << 3}, 120},
		{"CELT 20 ms", []byte{19 << 3}, 960},
		{"two frames, equal", []byte{1<<3 | 1}, 1920},
		{"two frames, unequal", []byte{1<<3 | 2, 3}, 1920},
		{"code 3, three frames", []byte{1<<3 | 3, 3}, 2880},
		{"code 3, no count byte", []byte{1<<3 | 3}, 0},
		{"code 3, over 120 ms", []byte{3<<3 | 3, 3}, 0},
		{"empty", nil, 0},
	} {
		if got := opusSamples(c.p); got != c.want {
			t.Errorf("%s: %d samples; want %d", c.name, got, c.want)
		}
	}
}
