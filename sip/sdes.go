package sip

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"strconv"
	"strings"

	"github.com/pion/sdp/v3"
	"github.com/pion/srtp/v3"
)

// SDES (RFC 4568): SRTP master keys carried in the SDP, one a=crypto
// attribute per key:
//
//	a=crypto:<tag> <suite> inline:<base64 key||salt>[|<lifetime>][|<MKI>:<length>] [<session params>]
//
// The keys travel in the clear inside the SIP messages, so SDES protects
// the media only as well as the signalling is protected (SIP over TLS).
// The key material never leaves this file's types in readable form: a
// Crypto formats and logs with its key redacted, and no error says what a
// key was.

// The SRTP crypto suites Holdline speaks (RFC 4568 section 6.2), in the
// order it prefers them: both are AES-128 in counter mode with an
// HMAC-SHA1 tag, 80 or 32 bits long.
const (
	SuiteAES128SHA1_80 = "AES_CM_128_HMAC_SHA1_80"
	SuiteAES128SHA1_32 = "AES_CM_128_HMAC_SHA1_32"
)

// sdesSuites maps the suites Holdline speaks to pion's profiles.
var sdesSuites = map[string]srtp.ProtectionProfile{
	SuiteAES128SHA1_80: srtp.ProtectionProfileAes128CmHmacSha1_80,
	SuiteAES128SHA1_32: srtp.ProtectionProfileAes128CmHmacSha1_32,
}

// sdesKeyLen is the inline key's length for both suites: a 16-byte
// master key and a 14-byte master salt.
const sdesKeyLen = 16 + 14

// The errors of SDES. ParseCrypto's say what is wrong with one a=crypto
// line; the others are why an offer or an answer cannot be taken, and the
// SIP response they call for is 488 Not Acceptable Here.
var (
	// ErrBadCrypto is an a=crypto line that cannot be read.
	ErrBadCrypto = errors.New("sip: malformed a=crypto")
	// ErrUnknownCryptoSuite is an a=crypto line of a suite Holdline does
	// not speak (AES_256, GCM, ...): RFC 4568 has it ignored.
	ErrUnknownCryptoSuite = errors.New("sip: unknown SRTP crypto suite")
	// ErrNoCommonCrypto is SRTP asked for without a key Holdline can
	// use: no a=crypto, or none with a known suite that reads.
	ErrNoCommonCrypto = errors.New("sip: no SRTP crypto suite in common")
	// ErrSRTPRequired is a plain RTP offer to a server that takes SRTP
	// only (SRTPRequired).
	ErrSRTPRequired = errors.New("sip: SRTP is required")
	// ErrSRTPOff is an RTP/SAVP offer to a server with SRTP off.
	ErrSRTPOff = errors.New("sip: SRTP is off")
)

// Crypto is one SDES key: an a=crypto attribute. It formats (fmt, slog,
// JSON) with its key redacted, so that logging an offer never leaks one.
type Crypto struct {
	// Tag is the attribute's tag, which the answer echoes.
	Tag int
	// Suite is one of SuiteAES128SHA1_80 and SuiteAES128SHA1_32.
	Suite string
	// Key is the master key followed by the master salt (30 bytes).
	Key []byte
	// Lifetime is how many packets the key may protect, 0 when the line
	// does not say (it is kept, not enforced: a call never reaches 2^31).
	Lifetime uint64
	// MKI is the master key identifier every packet carries, big-endian
	// in its declared length; nil when the line has none.
	MKI []byte
}

// String is the attribute value with the key redacted.
func (c Crypto) String() string {
	return strconv.Itoa(c.Tag) + " " + c.Suite + " inline:[redacted]"
}

// GoString is String: %#v must not print the key either.
func (c Crypto) GoString() string { return c.String() }

// Format writes String for every verb, so that no verb (%x, %d, %+v)
// prints the key's bytes.
func (c Crypto) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// LogValue is String, for slog.
func (c Crypto) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON is String as a JSON string: events and checkpoints never
// carry a key.
func (c Crypto) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(c.String())), nil }

// Marshal returns the attribute value as it goes in SDP, key included:
// only for the SDP body itself.
func (c Crypto) Marshal() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(c.Tag))
	b.WriteByte(' ')
	b.WriteString(c.Suite)
	b.WriteString(" inline:")
	b.WriteString(base64.StdEncoding.EncodeToString(c.Key))
	if c.Lifetime > 0 {
		b.WriteByte('|')
		if c.Lifetime > 1 && c.Lifetime&(c.Lifetime-1) == 0 {
			b.WriteString("2^" + strconv.Itoa(bits.TrailingZeros64(c.Lifetime)))
		} else {
			b.WriteString(strconv.FormatUint(c.Lifetime, 10))
		}
	}
	if len(c.MKI) > 0 {
		var v uint64
		for _, x := range c.MKI {
			v = v<<8 | uint64(x)
		}
		b.WriteString("|" + strconv.FormatUint(v, 10) + ":" + strconv.Itoa(len(c.MKI)))
	}
	return b.String()
}

// ParseCrypto reads one a=crypto attribute: its value, with or without
// the leading "a=crypto:". It accepts the bare form baresip sends
// ("1 AES_CM_128_HMAC_SHA1_80 inline:KEY") and the one with a lifetime
// and an MKI that other phones send ("...inline:KEY|2^31|1:1"), and the
// WSH session parameter (a hint, ignored). An unknown suite is
// ErrUnknownCryptoSuite; anything else wrong, ErrBadCrypto, wrapped with
// why. The errors never contain the key.
func ParseCrypto(line string) (Crypto, error) {
	s := strings.TrimSpace(line)
	s = strings.TrimPrefix(s, "a=")
	s = strings.TrimPrefix(s, "crypto:")
	f := strings.Fields(s)
	if len(f) < 3 {
		return Crypto{}, fmt.Errorf("%w: want <tag> <suite> inline:<key>", ErrBadCrypto)
	}
	var c Crypto
	// RFC 4568: the tag is 1 to 9 digits.
	tag, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil || len(f[0]) > 9 {
		return Crypto{}, fmt.Errorf("%w: the tag is not 1 to 9 digits", ErrBadCrypto)
	}
	c.Tag = int(tag)
	if _, ok := sdesSuites[f[1]]; !ok {
		return Crypto{}, fmt.Errorf("%w: %q", ErrUnknownCryptoSuite, sdesClip(f[1]))
	}
	c.Suite = f[1]
	method, params, ok := strings.Cut(f[2], ":")
	if !ok || !strings.EqualFold(method, "inline") {
		return Crypto{}, fmt.Errorf("%w: the key parameter is not inline:<key>", ErrBadCrypto)
	}
	// Several keys, told apart by their MKIs, are allowed by the RFC and
	// sent by nobody Holdline has met: refused, so that no packet is
	// decrypted with the wrong one.
	if strings.Contains(params, ";") {
		return Crypto{}, fmt.Errorf("%w: more than one key in the line", ErrBadCrypto)
	}
	parts := strings.Split(params, "|")
	if len(parts) > 3 {
		return Crypto{}, fmt.Errorf("%w: want inline:<key>[|<lifetime>][|<MKI>:<length>]", ErrBadCrypto)
	}
	key, err := base64.StdEncoding.DecodeString(parts[0])
	if err != nil {
		// The decoder's message names the offending byte's offset only;
		// the key itself is not repeated.
		return Crypto{}, fmt.Errorf("%w: the inline key is not base64", ErrBadCrypto)
	}
	if len(key) != sdesKeyLen {
		return Crypto{}, fmt.Errorf("%w: the inline key is %d bytes; %s takes %d (key and salt)", ErrBadCrypto, len(key), c.Suite, sdesKeyLen)
	}
	c.Key = key
	for i, p := range parts[1:] {
		if v, n, isMKI := strings.Cut(p, ":"); isMKI {
			if c.MKI, err = sdesMKI(v, n); err != nil {
				return Crypto{}, err
			}
			continue
		}
		if i > 0 || c.MKI != nil {
			return Crypto{}, fmt.Errorf("%w: the lifetime must come before the MKI", ErrBadCrypto)
		}
		if c.Lifetime, err = sdesLifetime(p); err != nil {
			return Crypto{}, err
		}
	}
	for _, sp := range f[3:] {
		name, _, _ := strings.Cut(sp, "=")
		if name != "WSH" {
			// UNENCRYPTED_SRTP, KDR and the rest change how packets are
			// protected: a line that asks for them cannot be honoured.
			return Crypto{}, fmt.Errorf("%w: session parameter %q is not supported", ErrBadCrypto, sdesClip(name))
		}
	}
	return c, nil
}

// sdesLifetime reads a key lifetime: a decimal number of packets or 2^n.
func sdesLifetime(s string) (uint64, error) {
	if exp, ok := strings.CutPrefix(s, "2^"); ok {
		n, err := strconv.ParseUint(exp, 10, 8)
		if err != nil || n < 1 || n > 63 {
			return 0, fmt.Errorf("%w: lifetime %q is not 2^1 to 2^63", ErrBadCrypto, sdesClip(s))
		}
		return 1 << n, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: lifetime %q is not a number of packets", ErrBadCrypto, sdesClip(s))
	}
	return n, nil
}

// sdesMKI reads an MKI and its length in bytes (1 to 128, RFC 4568) into
// the bytes packets carry.
func sdesMKI(value, length string) ([]byte, error) {
	n, err := strconv.ParseUint(length, 10, 8)
	if err != nil || n < 1 || n > 128 {
		return nil, fmt.Errorf("%w: MKI length %q is not 1 to 128 bytes", ErrBadCrypto, sdesClip(length))
	}
	v, err := strconv.ParseUint(value, 10, 64)
	if err != nil || (n < 8 && v>>(8*n) != 0) {
		return nil, fmt.Errorf("%w: MKI %q does not fit in %d bytes", ErrBadCrypto, sdesClip(value), n)
	}
	mki := make([]byte, n)
	for i := len(mki) - 1; i >= 0 && v > 0; i-- {
		mki[i] = byte(v)
		v >>= 8
	}
	return mki, nil
}

// sdesClip is a token of a remote a=crypto line fit for an error message:
// itself when it looks like what it should be (a suite name, a number),
// made of capitals, digits, '_' and '^' and short, else a placeholder. A
// line with a blank missing ("..._80inline:KEY") must not have its key
// echoed as part of a suite name, and a key is base64, which has small
// letters.
func sdesClip(s string) string {
	ok := len(s) <= 40
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '^') {
			ok = false
			break
		}
	}
	if !ok {
		return "(not shown)"
	}
	return s
}

// sdpCrypto reads the a=crypto lines of a media description: the keys
// Holdline can use, in the offerer's order, and why the first line left
// out was (nil if none was).
func sdpCrypto(attrs []sdp.Attribute) ([]Crypto, error) {
	var keys []Crypto
	var first error
	for _, a := range attrs {
		if a.Key != "crypto" {
			continue
		}
		c, err := ParseCrypto(a.Value)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		keys = append(keys, c)
	}
	return keys, first
}

// newCrypto makes a fresh key of suite under tag.
func newCrypto(tag int, suite string) (Crypto, error) {
	key := make([]byte, sdesKeyLen)
	if _, err := rand.Read(key); err != nil {
		return Crypto{}, fmt.Errorf("sip: SRTP key: %w", err)
	}
	return Crypto{Tag: tag, Suite: suite, Key: key}, nil
}

// sdesSecure makes m an SRTP stream: its profile RTP/SAVP when savp
// (else it stays RTP/AVP, the "best effort" form), with the keys' a=crypto
// lines.
func sdesSecure(m *sdp.MediaDescription, savp bool, keys ...Crypto) {
	if savp {
		m.MediaName.Protos = []string{"RTP", "SAVP"}
	}
	for _, k := range keys {
		m.Attributes = append(m.Attributes, sdp.NewAttribute("crypto", k.Marshal()))
	}
}
