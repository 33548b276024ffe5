package dtmf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/holdline/holdline/media"
)

// PayloadLen is the length of a telephone-event payload.
const PayloadLen = 4

// Errors.
var (
	// ErrShortPayload is returned by Parse for a payload shorter than
	// PayloadLen.
	ErrShortPayload = errors.New("dtmf: telephone-event payload shorter than 4 bytes")
	// ErrNotDigit is returned by Packets for a rune that is not a DTMF key.
	ErrNotDigit = errors.New("dtmf: not a DTMF digit")
	// ErrLength is returned by Packets for a key press that is not positive
	// or does not fit the 16-bit duration field.
	ErrLength = errors.New("dtmf: key press length out of range")
)

// Event is one RFC 4733 telephone-event payload (4 bytes):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     event     |E|R| volume    |          duration             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type Event struct {
	// Code is the event: 0-9 the digits, 10 '*', 11 '#', 12-15 'A'-'D'.
	// Other codes (16 flash, the tones and signals of RFC 4734) are legal
	// but are not digits.
	Code uint8
	// End is set in the packets that end the event.
	End bool
	// Volume is the tone's power level in -dBm0, 0-63. AppendTo keeps only
	// the low 6 bits.
	Volume uint8
	// Duration is how long the event has lasted so far, in RTP clock units
	// from the event's timestamp.
	Duration uint16
}

const (
	endBit     = 0x80
	volumeMask = 0x3f
)

// Parse decodes a telephone-event payload. Only the first 4 bytes are read:
// more (several events in one packet are not used) are ignored. The reserved
// R bit is ignored, as RFC 4733 requires of a receiver.
func Parse(payload []byte) (Event, error) {
	if len(payload) < PayloadLen {
		return Event{}, ErrShortPayload
	}
	return Event{
		Code:     payload[0],
		End:      payload[1]&endBit != 0,
		Volume:   payload[1] & volumeMask,
		Duration: binary.BigEndian.Uint16(payload[2:4]),
	}, nil
}

// AppendTo appends the 4-byte wire form of e to b and returns the result.
func (e Event) AppendTo(b []byte) []byte {
	flags := e.Volume & volumeMask
	if e.End {
		flags |= endBit
	}
	return binary.BigEndian.AppendUint16(append(b, e.Code, flags), e.Duration)
}

const digits = "0123456789*#ABCD"

// Digit returns the key of a DTMF event: '0'-'9', '*', '#' or 'A'-'D'. ok is
// false for the other event codes.
func (e Event) Digit() (r rune, ok bool) {
	if int(e.Code) < len(digits) {
		return rune(digits[e.Code]), true
	}
	return 0, false
}

// DigitCode returns the event code of a DTMF key, the inverse of Digit. It
// accepts 'a'-'d' for 'A'-'D'.
func DigitCode(r rune) (code uint8, ok bool) {
	switch {
	case r >= '0' && r <= '9':
		return uint8(r - '0'), true
	case r == '*':
		return 10, true
	case r == '#':
		return 11, true
	case r >= 'A' && r <= 'D':
		return uint8(r-'A') + 12, true
	case r >= 'a' && r <= 'd':
		return uint8(r-'a') + 12, true
	}
	return 0, false
}

// longEvent is the duration past which an event that is continued under a
// new timestamp is taken for one long key press split in segments (RFC 4733
// section 2.5.1.3) rather than a new press whose predecessor's end packets
// were all lost.
const longEvent = 0x8000

// Detector turns the telephone-event packets of one RTP stream into key
// presses, each reported once. All packets of one event share its RTP
// timestamp; the first of them may be lost, and the end is sent three times.
//
// The zero Detector is ready to use. It is not safe for concurrent use.
type Detector struct {
	cur    Event  // the current event: its code, whether its end was seen, its longest duration
	ts     uint32 // the current event's timestamp
	active bool   // cur and ts are set

	recent [4]uint32 // timestamps of earlier events, so their stragglers are not new
	n      int       // how many of recent are set
	next   int       // where the next one goes
}

// Push takes one telephone-event packet with its RTP timestamp ts. It
// returns the key the first time it sees an event, so a key press is
// reported at its first packet that arrives and only then: the updates, the
// repeated end packets, packets of the same event arriving after the end, and
// stragglers of the last few events are all not new. An event is new when its
// timestamp is; the exception is a long press that the sender split into
// segments with new timestamps (RFC 4733 section 2.5.1.3), which stays one
// press. Events that are not DTMF keys are tracked but not reported.
func (d *Detector) Push(ts uint32, ev Event) (digit rune, ok bool) {
	if d.active && ts == d.ts {
		d.cur.End = d.cur.End || ev.End
		d.cur.Duration = max(d.cur.Duration, ev.Duration)
		return 0, false
	}
	for _, old := range d.recent[:d.n] {
		if ts == old {
			return 0, false
		}
	}
	gap := ts - d.ts
	segment := d.active && !d.cur.End && ev.Code == d.cur.Code &&
		d.cur.Duration >= longEvent && gap >= uint32(d.cur.Duration) && gap <= 1<<16
	if d.active {
		d.recent[d.next] = d.ts
		d.next = (d.next + 1) % len(d.recent)
		d.n = min(d.n+1, len(d.recent))
	}
	d.cur, d.ts, d.active = ev, ts, true
	if segment {
		return 0, false
	}
	return ev.Digit()
}

// packetInterval is how often Packets has the sender report a held key.
const packetInterval = 20 * time.Millisecond

// Packets returns the payloads a sender emits for a press of digit lasting
// length, with an RTP clock of rate (one media.CheckRate accepts): a start
// packet, an update every 20 ms with the duration so far, and three end
// packets with the final duration, all at volume 10 (-10 dBm0). Every packet
// is sent with the same RTP timestamp, the press's start; the start packet
// goes out 20 ms after it, so its duration is 20 ms (or the whole press, if
// shorter). The length must fit the 16-bit duration field (8.19 s at 8 kHz,
// 1.36 s at 48 kHz): longer presses need segments, which Packets does not
// produce.
func Packets(digit rune, length time.Duration, rate int) ([]Event, error) {
	code, ok := DigitCode(digit)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotDigit, digit)
	}
	if err := media.CheckRate(rate); err != nil {
		return nil, fmt.Errorf("dtmf: %w", err)
	}
	total := 0
	if length > 0 && length <= time.Minute { // beyond, the product could overflow
		total = media.SamplesFor(rate, length)
	}
	if total < 1 || total > 0xffff {
		return nil, fmt.Errorf("%w: %v at %d Hz", ErrLength, length, rate)
	}
	step := media.SamplesFor(rate, packetInterval)
	evs := make([]Event, 0, (total-1)/step+4)
	evs = append(evs, Event{Code: code, Volume: 10, Duration: uint16(min(step, total))})
	for dur := 2 * step; dur < total; dur += step {
		evs = append(evs, Event{Code: code, Volume: 10, Duration: uint16(dur)})
	}
	end := Event{Code: code, End: true, Volume: 10, Duration: uint16(total)}
	return append(evs, end, end, end), nil
}
