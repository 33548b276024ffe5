package sip

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// sdesTestKey is a key||salt whose base64 is easy to spot in output.
var sdesTestKey = bytes.Repeat([]byte{0xA5, 0x5A, 0x01}, 10)

var sdesTestInline = base64.StdEncoding.EncodeToString(sdesTestKey)

func TestParseCrypto(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Crypto
	}{
		{"baresip's bare form", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline,
			Crypto{Tag: 1, Suite: SuiteAES128SHA1_80, Key: sdesTestKey}},
		{"lifetime and MKI", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|2^31|1:1",
			Crypto{Tag: 1, Suite: SuiteAES128SHA1_80, Key: sdesTestKey, Lifetime: 1 << 31, MKI: []byte{1}}},
		{"with a=crypto: and the 32-bit tag", "a=crypto:7 AES_CM_128_HMAC_SHA1_32 inline:" + sdesTestInline,
			Crypto{Tag: 7, Suite: SuiteAES128SHA1_32, Key: sdesTestKey}},
		{"decimal lifetime", "2 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|1048576",
			Crypto{Tag: 2, Suite: SuiteAES128SHA1_80, Key: sdesTestKey, Lifetime: 1048576}},
		{"MKI without lifetime, 4 bytes", "3 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|258:4",
			Crypto{Tag: 3, Suite: SuiteAES128SHA1_80, Key: sdesTestKey, MKI: []byte{0, 0, 1, 2}}},
		{"WSH session parameter", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + " WSH=64",
			Crypto{Tag: 1, Suite: SuiteAES128SHA1_80, Key: sdesTestKey}},
		{"INLINE in capitals, extra blanks", "  1  AES_CM_128_HMAC_SHA1_80   INLINE:" + sdesTestInline + "\r",
			Crypto{Tag: 1, Suite: SuiteAES128SHA1_80, Key: sdesTestKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCrypto(tc.line)
			if err != nil {
				t.Fatalf("ParseCrypto: %v", err)
			}
			if got.Tag != tc.want.Tag || got.Suite != tc.want.Suite || !bytes.Equal(got.Key, tc.want.Key) ||
				got.Lifetime != tc.want.Lifetime || !bytes.Equal(got.MKI, tc.want.MKI) {
				t.Fatalf("got tag %d %s lifetime %d MKI %x key ok %v; want tag %d %s lifetime %d MKI %x",
					got.Tag, got.Suite, got.Lifetime, got.MKI, bytes.Equal(got.Key, tc.want.Key),
					tc.want.Tag, tc.want.Suite, tc.want.Lifetime, tc.want.MKI)
			}
			back, err := ParseCrypto(got.Marshal())
			if err != nil || back.Marshal() != got.Marshal() {
				t.Fatalf("Marshal %q reads back as %v, %v", got.Marshal(), back.Marshal(), err)
			}
		})
	}
}

// Malformed lines are refused with the error saying why, and never with
// the key in it.
func TestParseCryptoMalformed(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(sdesTestKey[:20])
	for _, tc := range []struct {
		name, line string
		want       error
		says       string
	}{
		{"bad base64", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline[:20] + "!!" + sdesTestInline[22:], ErrBadCrypto, "not base64"},
		{"key too short", "1 AES_CM_128_HMAC_SHA1_80 inline:" + short, ErrBadCrypto, "20 bytes"},
		{"key too long", "1 AES_CM_128_HMAC_SHA1_80 inline:" + base64.StdEncoding.EncodeToString(append(sdesTestKey, 1, 2)), ErrBadCrypto, "32 bytes"},
		{"unknown suite", "1 AES_256_CM_HMAC_SHA1_80 inline:" + sdesTestInline, ErrUnknownCryptoSuite, "AES_256_CM_HMAC_SHA1_80"},
		{"GCM suite", "1 AEAD_AES_128_GCM inline:" + sdesTestInline, ErrUnknownCryptoSuite, "AEAD_AES_128_GCM"},
		{"missing inline:", "1 AES_CM_128_HMAC_SHA1_80 " + sdesTestInline, ErrBadCrypto, "inline:"},
		{"another key method", "1 AES_CM_128_HMAC_SHA1_80 uri:" + sdesTestInline, ErrBadCrypto, "inline:"},
		{"no key at all", "1 AES_CM_128_HMAC_SHA1_80", ErrBadCrypto, "<tag> <suite>"},
		{"empty", "", ErrBadCrypto, "<tag> <suite>"},
		{"tag not a number", "x AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline, ErrBadCrypto, "tag"},
		{"tag of ten digits", "1234567890 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline, ErrBadCrypto, "tag"},
		{"two keys", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|2^20|1:4;inline:" + sdesTestInline + "|2^20|2:4", ErrBadCrypto, "more than one key"},
		{"lifetime 2^64", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|2^64", ErrBadCrypto, "lifetime"},
		{"lifetime 0", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|0", ErrBadCrypto, "lifetime"},
		{"MKI length 0", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|1:0", ErrBadCrypto, "MKI length"},
		{"MKI too big for its length", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|256:1", ErrBadCrypto, "does not fit"},
		{"MKI before lifetime", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|1:1|2^31", ErrBadCrypto, "before the MKI"},
		{"too many parts", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|2^31|1:1|x", ErrBadCrypto, "want inline"},
		{"unencrypted SRTP asked", "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + " UNENCRYPTED_SRTP", ErrBadCrypto, "UNENCRYPTED_SRTP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCrypto(tc.line)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ParseCrypto = %v; want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), sdesTestInline[:16]) || strings.Contains(err.Error(), short[:16]) {
				t.Errorf("error %q contains the key", err)
			}
		})
	}
}

// However a key or an offer holding one is printed or logged, the key
// does not show.
func TestCryptoNeverPrintsItsKey(t *testing.T) {
	c, err := ParseCrypto("1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline + "|2^31|1:1")
	if err != nil {
		t.Fatal(err)
	}
	o := MediaOffer{Crypto: []Crypto{c}}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, o), fmt.Sprintf(verb, &c))
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("offer", "crypto", c, "offer", o)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("offer", "crypto", c, "offer", o)
	out = append(out, logs.String())
	j, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(j))
	for _, s := range out {
		for _, leak := range []string{sdesTestInline[:12], hex.EncodeToString(sdesTestKey[:6]), fmt.Sprint(sdesTestKey[:4])[1:10]} {
			if strings.Contains(strings.ToLower(s), strings.ToLower(leak)) {
				t.Errorf("the key shows in %q", s)
			}
		}
	}
	if !strings.Contains(out[0], "AES_CM_128_HMAC_SHA1_80") || !strings.Contains(out[0], "redacted") {
		t.Errorf("the redacted form %q does not say what it is", out[0])
	}
}

// sdesOffer is an SDP offer with an audio line of profile proto and the
// given a=crypto values.
func sdesOffer(proto string, crypto ...string) []byte {
	s := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 " + proto + " 0\r\na=rtpmap:0 PCMU/8000\r\n"
	for _, c := range crypto {
		s += "a=crypto:" + c + "\r\n"
	}
	return []byte(s)
}

// Each mode answers each kind of offer as documented: SRTP with the
// offer's tag, suite and profile and a fresh key of our own; plain RTP; or
// an error whose sentinel says why.
func TestSRTPAnswerByMode(t *testing.T) {
	k80 := "1 AES_CM_128_HMAC_SHA1_80 inline:" + sdesTestInline
	k32 := "5 AES_CM_128_HMAC_SHA1_32 inline:" + sdesTestInline + "|2^31|1:1"
	unknown := "1 AES_256_CM_HMAC_SHA1_80 inline:" + sdesTestInline + sdesTestInline[:3]
	bad := "1 AES_CM_128_HMAC_SHA1_80 inline:!!!!"
	type want struct {
		srtp bool
		tag  int
		err  error
	}
	for _, tc := range []struct {
		name  string
		offer []byte
		modes map[SRTPMode]want
	}{
		{"RTP/SAVP with a key", sdesOffer("RTP/SAVP", k80), map[SRTPMode]want{
			SRTPOptional: {srtp: true, tag: 1}, SRTPRequired: {srtp: true, tag: 1}, SRTPOff: {err: ErrSRTPOff}}},
		{"RTP/SAVP, first suite unknown, then _32", sdesOffer("RTP/SAVP", unknown, k32), map[SRTPMode]want{
			SRTPOptional: {srtp: true, tag: 5}, SRTPRequired: {srtp: true, tag: 5}, SRTPOff: {err: ErrSRTPOff}}},
		{"RTP/AVP with a key (best effort)", sdesOffer("RTP/AVP", k80), map[SRTPMode]want{
			SRTPOptional: {srtp: true, tag: 1}, SRTPRequired: {srtp: true, tag: 1}, SRTPOff: {}}},
		{"plain RTP/AVP", sdesOffer("RTP/AVP"), map[SRTPMode]want{
			SRTPOptional: {}, SRTPRequired: {err: ErrSRTPRequired}, SRTPOff: {}}},
		{"RTP/SAVP without a key", sdesOffer("RTP/SAVP"), map[SRTPMode]want{
			SRTPOptional: {err: ErrNoCommonCrypto}, SRTPRequired: {err: ErrNoCommonCrypto}, SRTPOff: {err: ErrSRTPOff}}},
		{"RTP/SAVP, unknown suite only", sdesOffer("RTP/SAVP", unknown), map[SRTPMode]want{
			SRTPOptional: {err: ErrNoCommonCrypto}, SRTPRequired: {err: ErrNoCommonCrypto}, SRTPOff: {err: ErrSRTPOff}}},
		{"RTP/AVP with a malformed key", sdesOffer("RTP/AVP", bad), map[SRTPMode]want{
			SRTPOptional: {}, SRTPRequired: {err: ErrSRTPRequired}, SRTPOff: {}}},
	} {
		o, err := ParseOffer(tc.offer)
		if err != nil {
			t.Fatalf("%s: ParseOffer: %v", tc.name, err)
		}
		for mode, w := range tc.modes {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				s := &Server{cfg: config{srtp: mode}}
				sec, err := s.sdesAnswer(o, nil)
				if !errors.Is(err, w.err) || (w.err == nil && err != nil) {
					t.Fatalf("sdesAnswer = %v; want %v", err, w.err)
				}
				if err != nil {
					if strings.Contains(err.Error(), sdesTestInline[:12]) {
						t.Errorf("error %q contains the key", err)
					}
					return
				}
				if (sec != nil) != w.srtp {
					t.Fatalf("SRTP %v; want %v", sec != nil, w.srtp)
				}
				if sec == nil {
					return
				}
				if sec.local.Tag != w.tag || sec.local.Suite != sec.remote.Suite || sec.remote.Tag != w.tag {
					t.Errorf("answered tag %d %s to tag %d %s; want tag %d", sec.local.Tag, sec.local.Suite, sec.remote.Tag, sec.remote.Suite, w.tag)
				}
				if sec.savp != o.SAVP {
					t.Errorf("answered SAVP %v to an offer with SAVP %v", sec.savp, o.SAVP)
				}
				if bytes.Equal(sec.local.Key, sec.remote.Key) || len(sec.local.Key) != sdesKeyLen {
					t.Errorf("our key is the offerer's, or %d bytes", len(sec.local.Key))
				}
				body := string(Answer{Codec: Codec{Name: "PCMU", ClockRate: 8000}, Port: 4000, SAVP: sec.savp, Crypto: &sec.local}.Marshal())
				wantProfile := "RTP/AVP"
				if o.SAVP {
					wantProfile = "RTP/SAVP"
				}
				if !strings.Contains(body, "m=audio 4000 "+wantProfile+" 0\r\n") || !strings.Contains(body, "a=crypto:"+sec.local.Marshal()+"\r\n") {
					t.Errorf("the answer does not carry the profile %s and our key:\n%s", wantProfile, body)
				}
			})
		}
	}
	// Two answers, two keys.
	o, _ := ParseOffer(sdesOffer("RTP/SAVP", k80))
	s := &Server{}
	a, _ := s.sdesAnswer(o, nil)
	b, _ := s.sdesAnswer(o, nil)
	if bytes.Equal(a.local.Key, b.local.Key) {
		t.Error("two calls answered with the same key")
	}
}

// A re-INVITE on an SRTP call: the same key keeps both contexts (their
// rollover and replay state) and our key; a new key from the other side
// replaces only the context that reads it; a new suite gets a new key of
// ours; and an offer without a key is refused rather than sending the
// media in the clear.
func TestSRTPReofferKeepsOrRekeys(t *testing.T) {
	s := &Server{}
	first, _ := ParseOffer(sdesOffer("RTP/SAVP", "1 AES_CM_128_HMAC_SHA1_80 inline:"+sdesTestInline))
	cur, err := s.sdesAnswer(first, nil)
	if err != nil {
		t.Fatal(err)
	}
	same, err := s.sdesAnswer(first, cur)
	if err != nil {
		t.Fatal(err)
	}
	if same.in != cur.in || same.out != cur.out || !bytes.Equal(same.local.Key, cur.local.Key) {
		t.Error("a re-offer of the same key replaced the contexts or our key")
	}
	other := bytes.Repeat([]byte{7}, sdesKeyLen)
	rekey, _ := ParseOffer(sdesOffer("RTP/SAVP", "1 AES_CM_128_HMAC_SHA1_80 inline:"+base64.StdEncoding.EncodeToString(other)))
	re, err := s.sdesAnswer(rekey, cur)
	if err != nil {
		t.Fatal(err)
	}
	if re.in == cur.in || re.out != cur.out || !bytes.Equal(re.remote.Key, other) || !bytes.Equal(re.local.Key, cur.local.Key) {
		t.Error("a new remote key: want a new reading context, our key and sending context kept")
	}
	suite, _ := ParseOffer(sdesOffer("RTP/SAVP", "2 AES_CM_128_HMAC_SHA1_32 inline:"+sdesTestInline))
	su, err := s.sdesAnswer(suite, cur)
	if err != nil {
		t.Fatal(err)
	}
	if su.out == cur.out || bytes.Equal(su.local.Key, cur.local.Key) || su.local.Suite != SuiteAES128SHA1_32 || su.local.Tag != 2 {
		t.Errorf("a new suite: want a new key of ours, tag 2 %s; got tag %d %s", SuiteAES128SHA1_32, su.local.Tag, su.local.Suite)
	}
	plain, _ := ParseOffer(sdesOffer("RTP/AVP"))
	if _, err := s.sdesAnswer(plain, cur); !errors.Is(err, ErrNoCommonCrypto) {
		t.Errorf("a plain re-offer on an SRTP call: %v; want ErrNoCommonCrypto", err)
	}
}

// The answer to a placed call's offer: the key answered must be one
// offered (tag and suite), and an SRTP offer answered plain fails.
func TestSRTPAnswered(t *testing.T) {
	s := &Server{}
	keys, err := s.sdesOffer()
	if err != nil || len(keys) != 2 || keys[0].Suite != SuiteAES128SHA1_80 || keys[1].Suite != SuiteAES128SHA1_32 {
		t.Fatalf("sdesOffer = %v, %v", keys, err)
	}
	theirs := "2 AES_CM_128_HMAC_SHA1_32 inline:" + sdesTestInline
	a, _ := ParseOffer(sdesOffer("RTP/SAVP", theirs))
	sec, err := sdesAnswered(keys, a, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sec.local.Key, keys[1].Key) || !bytes.Equal(sec.remote.Key, sdesTestKey) {
		t.Error("the answer's tag 2 did not select our second key")
	}
	for name, answer := range map[string][]byte{
		"plain":           sdesOffer("RTP/AVP"),
		"SAVP, no key":    sdesOffer("RTP/SAVP"),
		"tag not offered": sdesOffer("RTP/SAVP", "3 AES_CM_128_HMAC_SHA1_80 inline:"+sdesTestInline),
		"suite changed":   sdesOffer("RTP/SAVP", "1 AES_CM_128_HMAC_SHA1_32 inline:"+sdesTestInline),
	} {
		a, _ := ParseOffer(answer)
		if _, err := sdesAnswered(keys, a, true); !errors.Is(err, ErrNoCommonCrypto) {
			t.Errorf("%s answer: %v; want ErrNoCommonCrypto", name, err)
		}
	}
	// SRTP optional: a plain RTP/AVP answer is a plain call; an RTP/SAVP
	// one without a key, or with keys that do not read, is not.
	a, _ = ParseOffer(sdesOffer("RTP/AVP"))
	if sec, err := sdesAnswered(keys, a, false); sec != nil || err != nil {
		t.Errorf("plain answer, SRTP optional: %v, %v; want a plain call", sec, err)
	}
	for _, answer := range [][]byte{sdesOffer("RTP/SAVP"), sdesOffer("RTP/AVP", "1 AES_CM_128_HMAC_SHA1_80 inline:!!")} {
		a, _ = ParseOffer(answer)
		if _, err := sdesAnswered(keys, a, false); !errors.Is(err, ErrNoCommonCrypto) {
			t.Errorf("SRTP optional, answer %q: %v; want ErrNoCommonCrypto", answer, err)
		}
	}
	a, _ = ParseOffer(sdesOffer("RTP/SAVP", theirs))
	if _, err := sdesAnswered(nil, a, false); !errors.Is(err, ErrNoCommonCrypto) {
		t.Errorf("SRTP answered to a plain offer: %v; want ErrNoCommonCrypto", err)
	}
	body := string(s.offerSDP(4000, 1, keys))
	if !strings.Contains(body, "m=audio 4000 RTP/SAVP 0 8 111 101\r\n") || !strings.Contains(body, "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:") ||
		!strings.Contains(body, "a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:") {
		t.Errorf("the SRTP offer:\n%s", body)
	}
	if body := string(s.offerSDP(4000, 1, nil)); string(NewOffer(s.sdpAddr(), 4000, 1, 1)) != body {
		t.Errorf("the plain offer is not NewOffer's:\n%s", body)
	}
}

func TestParseSRTPMode(t *testing.T) {
	for _, m := range []SRTPMode{SRTPOff, SRTPOptional, SRTPRequired} {
		got, err := ParseSRTPMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseSRTPMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseSRTPMode("mandatory"); err == nil || !strings.Contains(err.Error(), "off, optional or required") {
		t.Errorf("ParseSRTPMode(mandatory) = %v", err)
	}
	var c config
	if err := WithSRTP(SRTPMode(9))(&c); err == nil {
		t.Error("WithSRTP took an unknown mode")
	}
}
