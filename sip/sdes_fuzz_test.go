package sip

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzCryptoLine feeds arbitrary a=crypto lines to ParseCrypto, as any
// caller's SDP can: it never panics, what it accepts is a usable key of a
// suite Holdline speaks that writes out and reads back the same, what it
// refuses is refused with one of its two sentinels, and no error repeats
// the key it was given.
func FuzzCryptoLine(f *testing.F) {
	for _, s := range []string{
		"1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline,
		"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|2^31|1:1",
		"2 AES_CM_128_HMAC_SHA1_32 inline:" + sdesTestInline + "|2^20",
		"3 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|7:2 WSH=64",
		"1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|2^20|1:4;inline:" + sdesTestInline + "|2^20|2:4",
		"1 AES_256_CM_HMAC_SHA1_80 inline:" + sdesTestInline,
		"1 AES_CM_128_HMAC_SHA1_80 inline:!!!",
		"1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|2^64",
		"1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|18446744073709551615:128",
		"1 AES_CM_128_HMAC_SHA1_80",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := ParseCrypto(line)
		if err != nil {
			if !errors.Is(err, ErrBadCrypto) && !errors.Is(err, ErrUnknownCryptoSuite) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			if _, key, ok := strings.Cut(line, "inline:"); ok {
				key, _, _ = strings.Cut(key, "|")
				// (A key that also appears elsewhere in the line, as a
				// suite name made of digits, may be echoed as that.)
				if len(key) >= 12 && strings.Count(line, key) == 1 && strings.Contains(err.Error(), key) {
					t.Fatalf("error %q repeats the key %q", err, key)
				}
			}
			return
		}
		if _, ok := sdesSuites[c.Suite]; !ok || len(c.Key) != sdesKeyLen {
			t.Fatalf("accepted suite %q with a %d-byte key", c.Suite, len(c.Key))
		}
		if strings.Contains(c.String(), "inline:") && !strings.Contains(c.String(), "[redacted]") {
			t.Fatalf("String %q is not redacted", c.String())
		}
		back, err := ParseCrypto(c.Marshal())
		if err != nil {
			t.Fatalf("Marshal %q does not read back: %v", c.Marshal(), err)
		}
		if back.Tag != c.Tag || back.Suite != c.Suite || !bytes.Equal(back.Key, c.Key) ||
			back.Lifetime != c.Lifetime || !bytes.Equal(back.MKI, c.MKI) {
			t.Fatalf("%q read back differently", c.Marshal())
		}
		if _, err := newSRTPSession(true, c, c, nil); err != nil {
			t.Fatalf("an accepted key makes no SRTP context: %v", err)
		}
	})
}
