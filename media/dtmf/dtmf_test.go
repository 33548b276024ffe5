package dtmf

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
)

func TestParseKnown(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want Event
	}{
		{[]byte{0x01, 0x8a, 0x03, 0x20}, Event{Code: 1, End: true, Volume: 10, Duration: 800}},
		{[]byte{0x0b, 0x0a, 0x00, 0xa0}, Event{Code: 11, Volume: 10, Duration: 160}},
		{[]byte{0x00, 0x3f, 0xff, 0xff}, Event{Code: 0, Volume: 63, Duration: 0xffff}},
		{[]byte{0x10, 0x80, 0x00, 0x00}, Event{Code: 16, End: true}},
		{[]byte{0x05, 0x40 | 0x07, 0x01, 0x00}, Event{Code: 5, Volume: 7, Duration: 256}},                   // R bit ignored
		{[]byte{0x0a, 0x8a, 0x03, 0x20, 0x0b, 0x8a}, Event{Code: 10, End: true, Volume: 10, Duration: 800}}, // extra bytes ignored
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(% x) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestAppendTo(t *testing.T) {
	got := Event{Code: 1, End: true, Volume: 10, Duration: 800}.AppendTo([]byte{0xee})
	if want := []byte{0xee, 0x01, 0x8a, 0x03, 0x20}; !bytes.Equal(got, want) {
		t.Errorf("AppendTo = % x, want % x", got, want)
	}
	if got := (Event{Volume: 0xff}).AppendTo(nil); got[1] != 0x3f {
		t.Errorf("volume 255 encoded as %#x, want 0x3f", got[1])
	}
}

func TestRoundTripAllDigits(t *testing.T) {
	for code := range uint8(16) {
		for _, end := range []bool{false, true} {
			ev := Event{Code: code, End: end, Volume: code * 4, Duration: uint16(code) * 4099}
			b := ev.AppendTo(nil)
			if len(b) != PayloadLen {
				t.Fatalf("AppendTo wrote %d bytes", len(b))
			}
			got, err := Parse(b)
			if err != nil || got != ev {
				t.Errorf("Parse(AppendTo(%+v)) = %+v, %v", ev, got, err)
			}
			r, ok := got.Digit()
			if !ok || r != rune("0123456789*#ABCD"[code]) {
				t.Errorf("code %d: Digit = %q, %v", code, r, ok)
			}
			if c, ok := DigitCode(r); !ok || c != code {
				t.Errorf("DigitCode(%q) = %d, %v; want %d", r, c, ok, code)
			}
		}
	}
}

func TestDigitCode(t *testing.T) {
	for r, want := range map[rune]uint8{'a': 12, 'd': 15, '*': 10, '#': 11, '0': 0} {
		if c, ok := DigitCode(r); !ok || c != want {
			t.Errorf("DigitCode(%q) = %d, %v; want %d", r, c, ok, want)
		}
	}
	for _, r := range []rune{'E', 'e', ' ', '+', 'x', '٣', -1} {
		if c, ok := DigitCode(r); ok {
			t.Errorf("DigitCode(%q) = %d, true; want false", r, c)
		}
	}
	for _, code := range []uint8{16, 32, 255} {
		if r, ok := (Event{Code: code}).Digit(); ok {
			t.Errorf("code %d: Digit = %q, true; want false", code, r)
		}
	}
}

func TestParseShort(t *testing.T) {
	for n := range PayloadLen {
		if _, err := Parse(make([]byte, n)); !errors.Is(err, ErrShortPayload) {
			t.Errorf("Parse(%d bytes): %v, want ErrShortPayload", n, err)
		}
	}
	if _, err := Parse(nil); !errors.Is(err, ErrShortPayload) {
		t.Errorf("Parse(nil): %v", err)
	}
}

func TestPackets(t *testing.T) {
	for _, tc := range []struct {
		length  time.Duration
		rate    int
		updates int // non-end packets
		final   uint16
	}{
		{100 * time.Millisecond, 8000, 4, 800},
		{110 * time.Millisecond, 8000, 5, 880},
		{40 * time.Millisecond, 48000, 1, 1920},
		{10 * time.Millisecond, 8000, 1, 80},
		{8 * time.Second, 8000, 399, 64000},
	} {
		evs, err := Packets('7', tc.length, tc.rate)
		if err != nil {
			t.Fatalf("Packets(%v, %d): %v", tc.length, tc.rate, err)
		}
		if len(evs) != tc.updates+3 {
			t.Fatalf("Packets(%v, %d): %d packets, want %d", tc.length, tc.rate, len(evs), tc.updates+3)
		}
		step := uint16(media.SamplesFor(tc.rate, 20*time.Millisecond))
		for i, ev := range evs {
			if ev.Code != 7 || ev.Volume != 10 {
				t.Fatalf("packet %d: %+v", i, ev)
			}
			if i < tc.updates {
				if ev.End {
					t.Fatalf("packet %d: end bit before the end", i)
				}
				if want := min(uint16(i+1)*step, tc.final); ev.Duration != want {
					t.Fatalf("packet %d: duration %d, want %d", i, ev.Duration, want)
				}
				if i > 0 && ev.Duration <= evs[i-1].Duration {
					t.Fatalf("packet %d: duration %d does not grow", i, ev.Duration)
				}
				continue
			}
			if !ev.End || ev.Duration != tc.final {
				t.Fatalf("packet %d: %+v, want an end with duration %d", i, ev, tc.final)
			}
		}
	}
}

func TestPacketsErrors(t *testing.T) {
	for _, tc := range []struct {
		digit  rune
		length time.Duration
		rate   int
		want   error
	}{
		{'x', 100 * time.Millisecond, 8000, ErrNotDigit},
		{'1', 0, 8000, ErrLength},
		{'1', -time.Second, 8000, ErrLength},
		{'1', time.Microsecond, 8000, ErrLength},
		{'1', 9 * time.Second, 8000, ErrLength},
		{'1', 2 * time.Second, 48000, ErrLength},
		{'1', 1 << 62, 8000, ErrLength},
		{'1', 100 * time.Millisecond, 11025, media.ErrUnsupportedRate},
	} {
		if _, err := Packets(tc.digit, tc.length, tc.rate); !errors.Is(err, tc.want) {
			t.Errorf("Packets(%q, %v, %d) = %v, want %v", tc.digit, tc.length, tc.rate, err, tc.want)
		}
	}
}

// press feeds the packets of one key press to d and returns what it reported.
func press(t *testing.T, d *Detector, ts uint32, evs []Event) []rune {
	t.Helper()
	var got []rune
	for _, ev := range evs {
		if r, ok := d.Push(ts, ev); ok {
			got = append(got, r)
		}
	}
	return got
}

func packets(t *testing.T, digit rune) []Event {
	t.Helper()
	evs, err := Packets(digit, 120*time.Millisecond, 8000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestDetectorFullPress(t *testing.T) {
	var d Detector
	evs := packets(t, '5')
	if r, ok := d.Push(1000, evs[0]); !ok || r != '5' {
		t.Fatalf("first packet: %q, %v; want '5' at once", r, ok)
	}
	if got := press(t, &d, 1000, evs[1:]); len(got) != 0 {
		t.Fatalf("rest of the press reported %q", got)
	}
}

func TestDetectorEndRepeats(t *testing.T) {
	var d Detector
	evs := packets(t, '#')
	press(t, &d, 1000, evs)
	end := evs[len(evs)-1]
	for range 5 { // more repeats, and a late update after the end
		if r, ok := d.Push(1000, end); ok {
			t.Fatalf("end repeat reported %q", r)
		}
	}
	if r, ok := d.Push(1000, evs[1]); ok {
		t.Fatalf("late update after the end reported %q", r)
	}
}

func TestDetectorLostStart(t *testing.T) {
	evs := packets(t, '9')
	for lost := 1; lost <= len(evs)-1; lost++ {
		var d Detector
		if got := press(t, &d, 4242, evs[lost:]); !slices.Equal(got, []rune{'9'}) {
			t.Errorf("first %d packets lost: reported %q, want once", lost, got)
		}
	}
}

func TestDetectorRepeatedDigit(t *testing.T) {
	var d Detector
	evs := packets(t, '3')
	var got []rune
	got = append(got, press(t, &d, 8000, evs)...)
	got = append(got, press(t, &d, 8000+2000, evs)...)
	if !slices.Equal(got, []rune{'3', '3'}) {
		t.Fatalf("two presses of 3 reported %q", got)
	}
	// a straggler of the first press after the second started is not new
	if r, ok := d.Push(8000, evs[len(evs)-1]); ok {
		t.Fatalf("straggler reported %q", r)
	}
}

func TestDetectorSequence(t *testing.T) {
	var d Detector
	var got []rune
	ts := uint32(1<<32 - 3000) // across the wrap
	for _, r := range "0123456789*#ABCD" {
		got = append(got, press(t, &d, ts, packets(t, r))...)
		ts += 2400
	}
	if string(got) != "0123456789*#ABCD" {
		t.Fatalf("reported %q", string(got))
	}
}

func TestDetectorNotDigit(t *testing.T) {
	var d Detector
	if r, ok := d.Push(10, Event{Code: 16, Duration: 160}); ok {
		t.Fatalf("flash reported as %q", r)
	}
	if r, ok := d.Push(10, Event{Code: 16, End: true, Duration: 320}); ok {
		t.Fatalf("flash end reported as %q", r)
	}
}

// A key held past the duration field's range is sent in segments with new
// timestamps (RFC 4733 section 2.5.1.3): still one press.
func TestDetectorLongPressSegments(t *testing.T) {
	var d Detector
	ts := uint32(500)
	var got []rune
	for seg := range 3 {
		for dur := 160; dur <= 0xffff; dur += 160 {
			if r, ok := d.Push(ts, Event{Code: 1, Volume: 10, Duration: uint16(dur)}); ok {
				got = append(got, r)
			}
		}
		if seg < 2 {
			if r, ok := d.Push(ts, Event{Code: 1, Volume: 10, Duration: 0xffff}); ok {
				got = append(got, r)
			}
			ts += 0xffff
		}
	}
	got = append(got, press(t, &d, ts, []Event{{Code: 1, End: true, Volume: 10, Duration: 4000}})...)
	if !slices.Equal(got, []rune{'1'}) {
		t.Fatalf("long press reported %q, want once", got)
	}
	// the next press of the same key is new
	if got := press(t, &d, ts+8000, packets(t, '1')); !slices.Equal(got, []rune{'1'}) {
		t.Fatalf("next press reported %q", got)
	}
}

// FuzzParse checks that Parse never panics and that what it accepts comes
// back unchanged from AppendTo (but for the reserved bit, which a receiver
// must ignore).
func FuzzParse(f *testing.F) {
	f.Add([]byte{0x01, 0x8a, 0x03, 0x20})
	f.Add([]byte{0x0b, 0x4a, 0xff, 0xff, 0x00})
	f.Add([]byte{0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		ev, err := Parse(payload)
		if len(payload) < PayloadLen {
			if !errors.Is(err, ErrShortPayload) {
				t.Fatalf("Parse(% x): %v, want ErrShortPayload", payload, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Parse(% x): %v", payload, err)
		}
		want := slices.Clone(payload[:PayloadLen])
		want[1] &^= 0x40
		if got := ev.AppendTo(nil); !bytes.Equal(got, want) {
			t.Fatalf("AppendTo(Parse(% x)) = % x", payload[:PayloadLen], got)
		}
		if again, err := Parse(ev.AppendTo(nil)); err != nil || again != ev {
			t.Fatalf("Parse(AppendTo(%+v)) = %+v, %v", ev, again, err)
		}
		var d Detector
		d.Push(0, ev)
	})
}
