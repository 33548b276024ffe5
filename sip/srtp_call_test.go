package sip_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/baresiptest"
	"github.com/holdline/holdline/sip"
)

// waitMedia polls the server's calls until ok says they are as wanted,
// and returns them; it fails the test after timeout.
func waitMedia(t *testing.T, srv *sip.Server, timeout time.Duration, what string, ok func([]sip.CallMedia) bool) []sip.CallMedia {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m := sip.Media(srv)
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: calls %+v", what, m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// callsOver waits until none of the servers has a call in progress, so
// that their Close (the test's cleanup) comes after each call's end; it
// fails the test after a few seconds.
func callsOver(t *testing.T, servers ...*sip.Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, srv := range servers {
		for srv.Calls() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d calls still up", srv.Calls())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// One Holdline server calls another, both with SRTP: the callee takes
// SRTP only, so the call is up only if the caller offered it; the answer
// is RTP/SAVP with a key for the first suite offered, and both agents'
// audio crosses, every packet authentic.
func TestSRTPCallBetweenTwoServers(t *testing.T) {
	callee, addr, heard := startServer(t, sip.WithSRTP(sip.SRTPRequired))
	caller, _, _ := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- caller.Call(ctx, "sip:agent@"+addr.String()) }()
	// A second of audio each way.
	flowing := func(m []sip.CallMedia) bool { return len(m) == 1 && m[0].PacketsIn >= 50 }
	in := waitMedia(t, callee, 10*time.Second, "the callee's call", flowing)[0]
	out := waitMedia(t, caller, 10*time.Second, "the caller's call", flowing)[0]
	if !in.SRTP || !out.SRTP {
		t.Fatalf("SRTP: callee %v, caller %v", in.SRTP, out.SRTP)
	}
	sdp := string(in.SDP)
	if !strings.Contains(sdp, " RTP/SAVP ") || !strings.Contains(sdp, "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:") {
		t.Errorf("the callee's answer is not RTP/SAVP with a key for tag 1:\n%s", sdp)
	}
	if in.SRTPFailed+out.SRTPFailed+in.Bad+out.Bad != 0 {
		t.Errorf("packets refused: callee %+v, caller %+v", in, out)
	}
	// The caller's greeting, decrypted, is heard by the callee's agent as
	// the caller's voice (over its own greeting: speech or a barge-in).
	for deadline := time.Now().Add(10 * time.Second); !heard.find(events.SpeechStarted, "") && !heard.find(events.BargeInSuspected, ""); {
		if time.Now().After(deadline) {
			t.Fatalf("the callee's agent never heard the caller: %v", heard.kinds())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Call: %v", err)
	}
	callsOver(t, caller, callee)
}

// A caller with SRTP optional calls a server with SRTP off: the RTP/SAVP
// offer is refused with 488, and the call made again with plain RTP. With
// SRTP required, the caller gives up instead.
func TestSRTPOptionalCallFallsBackToPlain(t *testing.T) {
	callee, addr, _ := startServer(t, sip.WithSRTP(sip.SRTPOff))
	caller, _, _ := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- caller.Call(ctx, "sip:agent@"+addr.String()) }()
	m := waitMedia(t, callee, 10*time.Second, "the plain call", func(m []sip.CallMedia) bool { return len(m) == 1 && m[0].PacketsIn >= 10 })[0]
	if m.SRTP || strings.Contains(string(m.SDP), "a=crypto") || !strings.Contains(string(m.SDP), " RTP/AVP ") {
		t.Errorf("the fallback call is not plain RTP:\n%s", m.SDP)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Call: %v", err)
	}
	callsOver(t, caller, callee)

	strict, _, _ := startServer(t, sip.WithSRTP(sip.SRTPRequired))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	err := strict.Call(ctx2, "sip:agent@"+addr.String())
	if !errors.Is(err, sip.ErrCallFailed) || !strings.Contains(err.Error(), "488") {
		t.Errorf("a required-SRTP call to a server without SRTP: %v; want ErrCallFailed with 488", err)
	}
}

// srtpCallerKey is the raw caller's key; srtpInline its base64.
var (
	srtpCallerKey = bytes.Repeat([]byte{0x3c, 0xc3, 0x5a}, 10)
	srtpInline    = base64.StdEncoding.EncodeToString(srtpCallerKey)
)

// savpOffer is an offer of PCMU to port, of profile proto, with a=crypto
// lines.
func savpOffer(port int, proto string, crypto ...string) string {
	s := fmt.Sprintf("v=0\no=- 1 1 IN IP4 127.0.0.1\ns=-\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio %d %s 0\na=rtpmap:0 PCMU/8000\n", port, proto)
	for _, c := range crypto {
		s += "a=crypto:" + c + "\n"
	}
	return s
}

// Each mode answers what it should: SRTP in the offer's profile with the
// offer's tag, plain RTP, or 488 with a Warning saying why.
func TestSRTPModesAnswerOffers(t *testing.T) {
	k80 := "3 AES_CM_128_HMAC_SHA1_80 inline:" + srtpInline + "|2^31|1:1"
	for _, tc := range []struct {
		name    string
		mode    sip.SRTPMode
		offer   string
		status  string
		profile string // of a 200's answer
		crypto  string // its a=crypto prefix, "" for none
		warning string // of a 488
	}{
		{"optional, RTP/SAVP", sip.SRTPOptional, savpOffer(4000, "RTP/SAVP", k80), "200", "RTP/SAVP", "a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:", ""},
		{"optional, RTP/AVP with a=crypto", sip.SRTPOptional, savpOffer(4000, "RTP/AVP", k80), "200", "RTP/AVP", "a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:", ""},
		{"optional, plain", sip.SRTPOptional, savpOffer(4000, "RTP/AVP"), "200", "RTP/AVP", "", ""},
		{"optional, RTP/SAVP of an unknown suite", sip.SRTPOptional, savpOffer(4000, "RTP/SAVP", "1 AEAD_AES_256_GCM inline:"+srtpInline), "488", "", "", "no SRTP crypto suite in common"},
		{"required, plain", sip.SRTPRequired, savpOffer(4000, "RTP/AVP"), "488", "", "", "SRTP is required"},
		{"required, RTP/SAVP", sip.SRTPRequired, savpOffer(4000, "RTP/SAVP", k80), "200", "RTP/SAVP", "a=crypto:3 ", ""},
		{"off, RTP/SAVP", sip.SRTPOff, savpOffer(4000, "RTP/SAVP", k80), "488", "", "", "SRTP is off"},
		{"off, RTP/AVP with a=crypto", sip.SRTPOff, savpOffer(4000, "RTP/AVP", k80), "200", "RTP/AVP", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr, logs := serveOn(t, "udp", nil, sip.WithSRTP(tc.mode))
			u := dialRaw(t, addr)
			id := strings.NewReplacer(" ", "-", ",", "", "/", "", "=", "").Replace(tc.name)
			u.send(invite(u.local(), id, "application/sdp", tc.offer))
			res := u.final(3 * time.Second)
			first, _, _ := strings.Cut(res, "\r\n")
			if !strings.HasPrefix(first, "SIP/2.0 "+tc.status+" ") {
				t.Fatalf("answered %q; want %s\n%s", first, tc.status, res)
			}
			if strings.Contains(res, srtpInline[:12]) || strings.Contains(logs.String(), srtpInline[:12]) {
				t.Errorf("the caller's key came back in the response or the log")
			}
			if tc.status != "200" {
				if w := header(res, "Warning"); !strings.Contains(w, tc.warning) {
					t.Errorf("Warning %q does not say %q", w, tc.warning)
				}
				return
			}
			c := &rawCall{u: u, id: id, toTag: header(res, "To"), answer: res, cseq: 1}
			c.request("ACK", "", "")
			defer callsOver(t, srv)
			defer c.request("BYE", "", "")
			if !strings.Contains(res, fmt.Sprintf(" %s 0\r\n", tc.profile)) {
				t.Errorf("the answer is not %s:\n%s", tc.profile, res)
			}
			if tc.crypto == "" && strings.Contains(res, "a=crypto") || tc.crypto != "" && !strings.Contains(res, tc.crypto) {
				t.Errorf("the answer's a=crypto: want %q\n%s", tc.crypto, res)
			}
		})
	}
}

// srtpPeer is a raw SRTP caller: its RTP socket, and what it sends and
// reads with.
type srtpPeer struct {
	conn *net.UDPConn
	to   netip.AddrPort
	seq  uint16
	ssrc uint32
}

func (p *srtpPeer) packet() []byte {
	p.seq++
	pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: p.seq, Timestamp: uint32(p.seq) * 160, SSRC: p.ssrc},
		Payload: bytes.Repeat([]byte{0x2a}, 160)}
	b, _ := pkt.Marshal()
	return b
}

func (p *srtpPeer) send(t *testing.T, n int, seal *srtp.Context) {
	t.Helper()
	for range n {
		b := p.packet()
		if seal != nil {
			var err error
			if b, err = seal.EncryptRTP(nil, b, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := p.conn.WriteToUDPAddrPort(b, p.to); err != nil {
			t.Fatal(err)
		}
	}
}

func srtpCtx(t *testing.T, key []byte, suite string) *srtp.Context {
	t.Helper()
	profile := srtp.ProtectionProfileAes128CmHmacSha1_80
	if suite == sip.SuiteAES128SHA1_32 {
		profile = srtp.ProtectionProfileAes128CmHmacSha1_32
	}
	c, err := srtp.CreateContext(key[:16], key[16:], profile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// answerCrypto is the key of a 200's SDP, and its RTP port.
func answerCrypto(t *testing.T, res string) (sip.Crypto, netip.AddrPort) {
	t.Helper()
	_, body, _ := strings.Cut(res, "\r\n\r\n")
	o, err := sip.ParseOffer([]byte(body))
	if err != nil || len(o.Crypto) != 1 {
		t.Fatalf("the answer's SDP (%v) has %d keys:\n%s", err, len(o.Crypto), res)
	}
	return o.Crypto[0], netip.AddrPortFrom(o.Addr, uint16(o.Port))
}

// Bad input on an SRTP call: plain RTP and SRTP under a wrong key are
// dropped, counted and logged once with the reason and without a key;
// the call stays up and takes the caller's real SRTP after them, and the
// agent's audio decrypts with the answer's key. Then re-INVITEs: the same
// key keeps the server's key and the call's state, a new caller key is
// taken (the old one is then refused) and the server keeps its own key.
func TestSRTPBadInputKeepsTheCallUp(t *testing.T) {
	srv, addr, logs := serveOn(t, "udp", nil)
	rtpConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rtpConn.Close()
	port := rtpConn.LocalAddr().(*net.UDPAddr).Port
	key := "1 AES_CM_128_HMAC_SHA1_80 inline:" + srtpInline
	u := dialRaw(t, addr)
	u.send(invite(u.local(), "srtp-bad", "application/sdp", savpOffer(port, "RTP/SAVP", key)))
	res := u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("INVITE answered %q", res)
	}
	c := &rawCall{u: u, id: "srtp-bad", toTag: header(res, "To"), answer: res, cseq: 1}
	c.request("ACK", "", "")
	defer callsOver(t, srv)
	defer c.request("BYE", "", "")
	theirs, to := answerCrypto(t, res)
	peer := &srtpPeer{conn: rtpConn, to: to, ssrc: 0x5e11}

	// The agent's greeting decrypts with the answer's key, and only so.
	dec := srtpCtx(t, theirs.Key, theirs.Suite)
	wrong := srtpCtx(t, bytes.Repeat([]byte{9}, 30), theirs.Suite)
	buf := make([]byte, 1500)
	_ = rtpConn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range 5 {
		n, err := rtpConn.Read(buf)
		if err != nil {
			t.Fatalf("packet %d of the agent's: %v", i, err)
		}
		if _, err := wrong.DecryptRTP(nil, buf[:n], nil); err == nil {
			t.Fatal("the agent's packet decrypts under a wrong key")
		}
		plain, err := dec.DecryptRTP(nil, buf[:n], nil)
		if err != nil {
			t.Fatalf("the agent's packet %d does not decrypt with the answer's key: %v", i, err)
		}
		var p rtp.Packet
		if err := p.Unmarshal(plain); err != nil || p.PayloadType != 0 || len(p.Payload) != 160 {
			t.Fatalf("decrypted, the agent's packet is not 20 ms of PCMU: %v", err)
		}
	}

	ours := srtpCtx(t, srtpCallerKey, sip.SuiteAES128SHA1_80)
	peer.send(t, 5, nil)                                                             // plain RTP
	peer.send(t, 5, srtpCtx(t, bytes.Repeat([]byte{7}, 30), sip.SuiteAES128SHA1_80)) // a wrong key
	peer.send(t, 20, ours)
	m := waitMedia(t, srv, 5*time.Second, "20 packets taken after 10 bad", func(m []sip.CallMedia) bool {
		return len(m) == 1 && m[0].PacketsIn >= 20 && m[0].SRTPFailed >= 10
	})[0]
	if m.SRTPFailed != 10 {
		t.Errorf("%d packets failed; want the 10 bad ones", m.SRTPFailed)
	}
	log := logs.String()
	if n := strings.Count(log, "SRTP packet dropped"); n != 1 || !strings.Contains(log, "authentication failed") {
		t.Errorf("want one log line saying SRTP authentication failed; got %d:\n%s", n, log)
	}
	inline := theirs.Marshal()[strings.Index(theirs.Marshal(), "inline:")+7:]
	if strings.Contains(log, srtpInline[:12]) || strings.Contains(log, inline[:12]) {
		t.Errorf("a key is in the log:\n%s", log)
	}

	// A re-INVITE with the same key: the server's key stays, and the
	// caller's packets go on being taken where they were.
	c.request("INVITE", "application/sdp", strings.Replace(savpOffer(port, "RTP/SAVP", key), "o=- 1 1", "o=- 1 2", 1))
	res = c.u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("re-INVITE answered %q", res)
	}
	c.request("ACK", "", "")
	if again, _ := answerCrypto(t, res); !bytes.Equal(again.Key, theirs.Key) {
		t.Error("a re-INVITE with the same key changed the server's key")
	}
	before := sip.Media(srv)[0].PacketsIn
	peer.send(t, 10, ours)
	waitMedia(t, srv, 5*time.Second, "10 more packets after the re-INVITE", func(m []sip.CallMedia) bool {
		return len(m) == 1 && m[0].PacketsIn >= before+10
	})

	// A re-INVITE with a new caller key: taken; the old key no longer is.
	newKey := bytes.Repeat([]byte{0x11, 0x22, 0x33}, 10)
	c.request("INVITE", "application/sdp", strings.Replace(savpOffer(port, "RTP/SAVP", "1 AES_CM_128_HMAC_SHA1_80 inline:"+base64.StdEncoding.EncodeToString(newKey)), "o=- 1 1", "o=- 1 3", 1))
	res = c.u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("rekeying re-INVITE answered %q", res)
	}
	c.request("ACK", "", "")
	if again, _ := answerCrypto(t, res); !bytes.Equal(again.Key, theirs.Key) {
		t.Error("the caller's rekey changed the server's key too")
	}
	m0 := sip.Media(srv)[0]
	peer.send(t, 3, ours)
	peer.send(t, 10, srtpCtx(t, newKey, sip.SuiteAES128SHA1_80))
	waitMedia(t, srv, 5*time.Second, "the new key's packets taken, the old key's refused", func(m []sip.CallMedia) bool {
		return len(m) == 1 && m[0].PacketsIn >= m0.PacketsIn+10 && m[0].SRTPFailed >= m0.SRTPFailed+3
	})
	if srv.Calls() != 1 {
		t.Errorf("%d calls up; want the one", srv.Calls())
	}
	// A re-offer that would drop SRTP is refused.
	c.request("INVITE", "application/sdp", strings.Replace(savpOffer(port, "RTP/AVP"), "o=- 1 1", "o=- 1 4", 1))
	if res := c.u.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 488 ") {
		t.Errorf("a plain re-offer on an SRTP call answered %q; want 488", res)
	}
}

// baresip calls the server over UDP with SRTP: with its srtp module
// mandatory (srtp-mand: RTP/SAVP with one SDES key) the call is answered
// RTP/SAVP, and with it optional (srtp: "best effort", RTP/AVP with the
// key) RTP/AVP, both with a key; baresip's packets all authenticate, and
// the agent's greeting, encrypted at the leg's socket edge, is what
// baresip hears.
func TestBaresipCallsOverSRTP(t *testing.T) {
	bin := baresiptest.Need(t)
	for _, tc := range []struct{ mediaenc, profile string }{{"srtp-mand", "RTP/SAVP"}, {"srtp", "RTP/AVP"}} {
		t.Run(tc.mediaenc, func(t *testing.T) { baresipOverSRTP(t, bin, tc.mediaenc, tc.profile) })
	}
}

func baresipOverSRTP(t *testing.T, bin, mediaenc, profile string) {
	srv, addr, logs := serveOn(t, "udp", nil, sip.WithSRTP(sip.SRTPRequired))
	home, _ := baresiptest.Home(t, "", 1, 6)
	srtpHome(t, home, mediaenc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	phone, err := baresiptest.Start(ctx, bin, home, "-e", "/dial sip:agent@"+addr.String(), "-t", "30")
	if err != nil {
		t.Fatal(err)
	}
	defer phone.HangUp()
	m := waitMedia(t, srv, 15*time.Second, "baresip's call with media:\n"+phone.Out.String(), func(m []sip.CallMedia) bool {
		return len(m) == 1 && m[0].PacketsIn >= 50
	})[0]
	sdp := string(m.SDP)
	if !m.SRTP || !strings.Contains(sdp, " "+profile+" ") || !strings.Contains(sdp, "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:") {
		t.Errorf("the answer to baresip is not %s with a key:\n%s", profile, sdp)
	}
	if m.SRTPFailed != 0 {
		t.Errorf("%d of baresip's packets failed SRTP", m.SRTPFailed)
	}
	// baresip hangs up when its 7 s of caller audio end, and stays
	// running; its recording is complete once it has exited.
	for {
		if _, ended := phone.Out.When("terminated"); ended {
			break
		}
		select {
		case <-phone.Done():
		case <-ctx.Done():
			t.Fatalf("baresip did not hang up:\n%s", phone.Out.String())
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	phone.HangUp()
	callsOver(t, srv)
	out := phone.Out.String()
	if !strings.Contains(out, "Call established") {
		t.Errorf("baresip never saw the call established:\n%s", out)
	}
	heard, err := baresiptest.Heard(home)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	at, ok := baresiptest.FirstSound(heard)
	if !ok {
		t.Fatalf("baresip heard %.1f s of silence: the agent's SRTP did not reach it as audio\n%s\nserver log:\n%s",
			float64(len(heard))/8000, out, logs.String())
	}
	t.Logf("baresip heard the agent %v into the call, over SRTP (%d of its packets taken)", at.Round(10*time.Millisecond), m.PacketsIn)
}

// srtpHome makes the baresip of home (baresiptest.Home) use SRTP with
// SDES keys, its mediaenc "srtp" (optional) or "srtp-mand".
func srtpHome(t *testing.T, home, mediaenc string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(home, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("module srtp.so\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	accounts := filepath.Join(home, "accounts")
	b, err := os.ReadFile(accounts)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(b)) + ";mediaenc=" + mediaenc + "\n"
	if err := os.WriteFile(accounts, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Holdline calls baresip with SRTP required (holdline call --srtp
// required's path): baresip, its SRTP mandatory, takes the RTP/SAVP
// offer; each side hears the other through the keys exchanged.
func TestCallPlacedToBaresipOverSRTP(t *testing.T) {
	bin := baresiptest.Need(t)
	srv, _, rec := startServer(t, sip.WithSRTP(sip.SRTPRequired))
	home, port := baresiptest.Home(t, "Hello?", 1, 5)
	srtpHome(t, home, "srtp-mand")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	phone, err := baresiptest.Start(ctx, bin, home, "-t", "30")
	if err != nil {
		t.Fatal(err)
	}
	defer phone.HangUp()
	done := make(chan error, 1)
	go func() { done <- srv.Call(ctx, fmt.Sprintf("sip:baresip@127.0.0.1:%d", port)) }()
	m := waitMedia(t, srv, 15*time.Second, "the call to baresip with media:\n"+phone.Out.String(), func(m []sip.CallMedia) bool {
		return len(m) == 1 && m[0].PacketsIn >= 50
	})[0]
	if !m.SRTP || m.SRTPFailed != 0 {
		t.Errorf("the call to baresip: SRTP %v, %d packets failed", m.SRTP, m.SRTPFailed)
	}
	if err := <-done; err != nil {
		t.Fatalf("Call: %v\n%s", err, phone.Out.String())
	}
	callsOver(t, srv)
	phone.HangUp()
	if !strings.Contains(phone.Out.String(), "SRTP is Enabled") {
		t.Errorf("baresip did not say SRTP was on:\n%s", phone.Out.String())
	}
	if !rec.find(events.SpeechStarted, "") && !rec.find(events.BargeInSuspected, "") {
		t.Errorf("baresip's caller was never heard: %v", rec.kinds())
	}
	heard, err := baresiptest.Heard(home)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := baresiptest.FirstSound(heard); !ok {
		t.Errorf("baresip heard only silence over SRTP")
	}
}
