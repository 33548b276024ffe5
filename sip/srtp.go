package sip

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"
)

// SRTPMode says whether a Server's calls encrypt their media with SRTP
// (RFC 3711), keyed by SDES (RFC 4568).
type SRTPMode int

const (
	// SRTPOptional, the default, answers SRTP when it is offered, by
	// RTP/SAVP or by RTP/AVP with a=crypto (the "best effort" SRTP of
	// baresip's mediaenc srtp), and plain RTP otherwise. Calls it places
	// offer RTP/SAVP and, if the callee refuses that with 488, call again
	// with plain RTP; a plain RTP/AVP answer is taken as a plain call.
	SRTPOptional SRTPMode = iota
	// SRTPRequired answers only SRTP offers (a plain one gets 488 with a
	// Warning saying why), and calls it places offer RTP/SAVP only.
	SRTPRequired
	// SRTPOff answers every call with plain RTP: an RTP/SAVP offer gets
	// 488, an RTP/AVP offer's a=crypto lines are ignored.
	SRTPOff
)

// String is the mode's name as ParseSRTPMode reads it.
func (m SRTPMode) String() string {
	switch m {
	case SRTPOptional:
		return "optional"
	case SRTPRequired:
		return "required"
	case SRTPOff:
		return "off"
	}
	return fmt.Sprintf("SRTPMode(%d)", int(m))
}

// ParseSRTPMode reads "off", "optional" or "required".
func ParseSRTPMode(s string) (SRTPMode, error) {
	for _, m := range []SRTPMode{SRTPOff, SRTPOptional, SRTPRequired} {
		if strings.EqualFold(strings.TrimSpace(s), m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("sip: SRTP mode %q: want off, optional or required", s)
}

// WithSRTP sets whether calls encrypt their media (default SRTPOptional).
// SDES keys travel in the SIP messages: SRTP keeps the media private only
// when the signalling is too (ServeTLS).
func WithSRTP(m SRTPMode) Option {
	return func(c *config) error {
		if m < SRTPOptional || m > SRTPOff {
			return fmt.Errorf("sip: %v", m)
		}
		c.srtp = m
		return nil
	}
}

// srtpSession is a call's SRTP: the keys its SDP carries and the
// contexts that use them. Encryption happens at the leg's socket edge
// only: the player, the echo canceller's reference, the pacer's timing and
// the jitter buffer all see the media in the clear.
type srtpSession struct {
	savp   bool   // the SDP says RTP/SAVP, else RTP/AVP with a=crypto
	local  Crypto // ours: what our packets are protected with
	remote Crypto // the other side's

	// out protects what the leg sends, under the leg's out.mu only; in
	// checks and decrypts what comes, on the leg's read goroutine only
	// (pion's contexts are not safe for concurrent use, and each keeps
	// one direction's rollover and replay state).
	out, in *srtp.Context
	outHdr  rtp.Header // out's scratch, under out.mu
	inHdr   rtp.Header // in's scratch, on the read goroutine
	inRTCP  rtcp.Header
	plain   []byte // in's scratch: the last packet decrypted
	rtcp    atomic.Uint64
}

// srtpReplayWindow is how far back (in packets) a replayed SRTP packet
// is still recognised; a phone call's jitter never reorders that far.
const srtpReplayWindow = 128

// newSRTPSession makes the SRTP of a call with these keys. A context of
// prev whose key is unchanged is kept, with its rollover counter and
// replay window: a re-INVITE that does not rekey must not restart them.
func newSRTPSession(savp bool, local, remote Crypto, prev *srtpSession) (*srtpSession, error) {
	s := &srtpSession{savp: savp, local: local, remote: remote, plain: make([]byte, 0, 1500)}
	var err error
	if prev != nil && sameKey(prev.local, local) {
		s.out = prev.out
	} else if s.out, err = srtpContext(local); err != nil {
		return nil, err
	}
	if prev != nil && sameKey(prev.remote, remote) {
		s.in = prev.in
	} else if s.in, err = srtpContext(remote,
		srtp.SRTPReplayProtection(srtpReplayWindow), srtp.SRTCPReplayProtection(srtpReplayWindow),
		srtp.MasterKeyIndicator(remote.MKI)); err != nil {
		return nil, err
	}
	return s, nil
}

func sameKey(a, b Crypto) bool {
	return a.Suite == b.Suite && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.MKI, b.MKI)
}

// srtpContext makes a pion context for k. Its errors are pion's, which
// never include the key.
func srtpContext(k Crypto, opts ...srtp.ContextOption) (*srtp.Context, error) {
	profile, ok := sdesSuites[k.Suite]
	if !ok || len(k.Key) != sdesKeyLen {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCryptoSuite, k.Suite)
	}
	ctx, err := srtp.CreateContext(k.Key[:16], k.Key[16:], profile, opts...)
	if err != nil {
		return nil, fmt.Errorf("sip: SRTP context: %w", err)
	}
	return ctx, nil
}

// protect encrypts an RTP packet into dst (its capacity reused), with
// our key. Under the leg's out.mu.
func (s *srtpSession) protect(dst, pkt []byte) ([]byte, error) {
	return s.out.EncryptRTP(dst, pkt, &s.outHdr)
}

// unprotect checks and decrypts a datagram from the other side: the RTP
// packet in the clear (valid until the next call), or nil and "" for an
// SRTCP packet, which is checked and dropped (the leg takes no RTCP).
// When the datagram is not taken, why says so, without the key.
func (s *srtpSession) unprotect(datagram []byte) (plain []byte, why string) {
	// RFC 5761: RTCP multiplexed on the RTP port has a second byte of
	// 192 to 223, which RTP never has with the payload types offered.
	if len(datagram) >= 2 && datagram[1] >= 192 && datagram[1] <= 223 {
		if _, err := s.in.DecryptRTCP(s.plain[:0], datagram, &s.inRTCP); err != nil {
			return nil, srtpWhy("SRTCP", err)
		}
		s.rtcp.Add(1)
		return nil, ""
	}
	p, err := s.in.DecryptRTP(s.plain[:0], datagram, &s.inHdr)
	if err != nil {
		return nil, srtpWhy("SRTP", err)
	}
	s.plain = p[:0]
	return p, ""
}

// srtpWhy is the reason a datagram was refused, for the log.
func srtpWhy(proto string, err error) string {
	if errors.Is(err, srtp.ErrFailedToVerifyAuthTag) {
		return proto + " authentication failed: a wrong key, or plain RTP on an SRTP call"
	}
	return "not " + proto + " of this call: " + err.Error()
}

// sdes is what the call's SDP says of its SRTP: the profile and our key,
// nil for plain RTP.
func (s *srtpSession) sdes() (savp bool, local *Crypto) {
	if s == nil {
		return false, nil
	}
	k := s.local
	return s.savp, &k
}

// sdesAnswer is the SRTP with which the server answers o, given the
// call's current SRTP (nil for a new call or a plain one): nil for plain
// RTP. Its errors call for 488 with the error as the Warning.
func (s *Server) sdesAnswer(o MediaOffer, cur *srtpSession) (*srtpSession, error) {
	mode := s.cfg.srtp
	if mode == SRTPOff {
		if o.SAVP {
			return nil, fmt.Errorf("%w on this server: offer RTP/AVP, not RTP/SAVP", ErrSRTPOff)
		}
		return nil, nil // "best effort" a=crypto on RTP/AVP: declined by answering plain
	}
	if len(o.Crypto) == 0 {
		why := "no a=crypto line (SDES key)"
		if o.cryptoErr != nil {
			why = "no usable a=crypto line: " + strings.TrimPrefix(o.cryptoErr.Error(), "sip: ")
		}
		switch {
		case o.SAVP:
			return nil, fmt.Errorf("%w: the RTP/SAVP offer has %s; Holdline takes %s and %s", ErrNoCommonCrypto, why, SuiteAES128SHA1_80, SuiteAES128SHA1_32)
		case mode == SRTPRequired:
			return nil, fmt.Errorf("%w on this server: the offer has %s; offer RTP/SAVP with an %s or %s key", ErrSRTPRequired, why, SuiteAES128SHA1_80, SuiteAES128SHA1_32)
		case cur != nil:
			return nil, fmt.Errorf("%w: the call is SRTP and the new offer has %s: its media would go in the clear", ErrNoCommonCrypto, why)
		}
		return nil, nil
	}
	// The offerer's first key of a suite Holdline speaks (o.Crypto holds
	// only those), answered with the same tag and suite and a key of our
	// own; a re-offer keeps our key when the suite stays (RFC 4568 7.1.4
	// lets an answerer keep its key; the other side's may change).
	remote := o.Crypto[0]
	var local Crypto
	if cur != nil && cur.local.Suite == remote.Suite {
		local = cur.local
	} else {
		var err error
		if local, err = newCrypto(remote.Tag, remote.Suite); err != nil {
			return nil, err
		}
	}
	local.Tag = remote.Tag
	return newSRTPSession(o.SAVP, local, remote, cur)
}

// sdesOffer is the keys a call the server places offers, one per suite,
// tags 1 and 2, the 80-bit tag first; nil when SRTP is off.
func (s *Server) sdesOffer() ([]Crypto, error) {
	if s.cfg.srtp == SRTPOff {
		return nil, nil
	}
	keys := make([]Crypto, 0, 2)
	for i, suite := range []string{SuiteAES128SHA1_80, SuiteAES128SHA1_32} {
		k, err := newCrypto(i+1, suite)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// sdesAnswered is the SRTP of a placed call whose offer had the keys
// offered (nil for a plain offer), from the callee's answer a: nil for
// plain RTP. Unless SRTP is required, a plain RTP/AVP answer to the SRTP
// offer is taken as a plain call: RFC 3264 wants the offer's profile
// back, but callees that answer a fixed SDP (test tools, some gateways)
// do not, and optional means the call goes on in the clear.
func sdesAnswered(offered []Crypto, a MediaOffer, required bool) (*srtpSession, error) {
	if offered == nil {
		if a.SAVP || len(a.Crypto) > 0 {
			return nil, fmt.Errorf("%w: SRTP answered to a plain RTP offer", ErrNoCommonCrypto)
		}
		return nil, nil
	}
	if len(a.Crypto) == 0 && !a.SAVP && a.cryptoErr == nil && !required {
		return nil, nil
	}
	if len(a.Crypto) == 0 {
		why := "no a=crypto line"
		if a.cryptoErr != nil {
			why = a.cryptoErr.Error()
		}
		return nil, fmt.Errorf("%w: the answer to an SRTP offer has %s", ErrNoCommonCrypto, why)
	}
	remote := a.Crypto[0]
	for _, k := range offered {
		if k.Tag == remote.Tag && k.Suite == remote.Suite {
			return newSRTPSession(true, k, remote, nil)
		}
	}
	return nil, fmt.Errorf("%w: the answer's a=crypto %d %s was not offered", ErrNoCommonCrypto, remote.Tag, remote.Suite)
}

// offerSDP is the offer of a call the server places from port, with the
// keys when there are some (RTP/SAVP), else plain.
func (s *Server) offerSDP(port int, sessionID uint64, keys []Crypto) []byte {
	sd := newOfferSession(s.sdpAddr(), port, sessionID, 1)
	if keys != nil {
		sdesSecure(sd.MediaDescriptions[0], true, keys...)
	}
	return sdpBytes(sd)
}
