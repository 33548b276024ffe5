package opusrtp

// What a receiver needs to know of an Opus packet without decoding it
// (RFC 6716 section 3): how much audio it holds, and whether it carries
// in-band FEC (SILK's LBRR) for the packet before it. libopus has
// opus_packet_has_lbrr only from 1.5; Debian's is older.

// opusSamples returns the audio in an Opus packet, in 48 kHz samples, or 0
// for a packet it cannot read.
func opusSamples(p []byte) int {
	if len(p) == 0 {
		return 0
	}
	frames := 1
	switch p[0] & 3 {
	case 1, 2:
		frames = 2
	case 3:
		if len(p) < 2 {
			return 0
		}
		frames = int(p[1] & 0x3f)
	}
	n := frames * opusFrameSamples(p[0])
	if n > 5760 { // 120 ms, the most a packet may hold
		return 0
	}
	return n
}

// opusFrameSamples returns the samples at 48 kHz of each frame of a packet
// with this TOC byte.
func opusFrameSamples(toc byte) int {
	switch {
	case toc&0x80 != 0: // CELT: 2.5, 5, 10, 20 ms
		return 120 << (toc >> 3 & 3)
	case toc&0x60 == 0x60: // hybrid: 10, 20 ms
		if toc&0x08 != 0 {
			return 960
		}
		return 480
	default: // SILK: 10, 20, 40, 60 ms
		return [4]int{480, 960, 1920, 2880}[toc>>3&3]
	}
}

// hasLBRR reports whether an Opus packet carries in-band FEC: a SILK or
// hybrid packet whose first frame has its LBRR flag set, as libopus's
// opus_packet_has_lbrr reads it. The flags are the first bits the range
// coder codes, each with probability one half, so they are the frame's
// first bits: a VAD flag per 20 ms SILK frame, then the LBRR flag (per
// channel).
func hasLBRR(p []byte) bool {
	if len(p) < 2 || p[0]&0x80 != 0 {
		return false // empty, or CELT only: no SILK layer
	}
	silkFrames := max(opusFrameSamples(p[0])/960, 1)
	f := firstFrame(p)
	if len(f) == 0 {
		return false
	}
	lbrr := f[0]>>(7-silkFrames)&1 != 0
	if p[0]&0x04 != 0 { // stereo: the side channel's flag too
		lbrr = lbrr || f[0]>>(6-2*silkFrames)&1 != 0
	}
	return lbrr
}

// firstFrame returns the first frame of an Opus packet, or nil.
func firstFrame(p []byte) []byte {
	switch p[0] & 3 {
	case 0, 1:
		return p[1:]
	case 2:
		if len(p) < 2 {
			return nil
		}
		if p[1] < 252 {
			return p[2:]
		}
		if len(p) < 3 {
			return nil
		}
		return p[3:]
	}
	// Code 3: a frame count byte, padding lengths, frame lengths (VBR).
	if len(p) < 2 {
		return nil
	}
	c, off := p[1], 2
	if c&0x40 != 0 {
		for off < len(p) {
			v := p[off]
			off++
			if v != 255 {
				break
			}
		}
	}
	if c&0x80 != 0 {
		for range int(c&0x3f) - 1 {
			if off >= len(p) {
				return nil
			}
			if p[off] < 252 {
				off++
			} else {
				off += 2
			}
		}
	}
	if off >= len(p) {
		return nil
	}
	return p[off:]
}

// HasFEC reports whether an Opus packet carries in-band FEC for the packet
// before it (SILK's LBRR), as libopus 1.5's opus_packet_has_lbrr would.
func HasFEC(p []byte) bool { return hasLBRR(p) }
