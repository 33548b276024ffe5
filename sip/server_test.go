package sip_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pion/rtp"

	"github.com/holdline/holdline/sip"
)

// rawUA sends hand-made SIP over UDP and reads what comes back.
type rawUA struct {
	t    *testing.T
	conn *net.UDPConn
	to   netip.AddrPort
}

func dialRaw(t *testing.T, to netip.AddrPort) *rawUA {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawUA{t: t, conn: conn, to: to}
}

func (u *rawUA) local() string { return u.conn.LocalAddr().String() }

func (u *rawUA) send(msg string) {
	u.t.Helper()
	msg = strings.ReplaceAll(msg, "\n", "\r\n")
	if _, err := u.conn.WriteToUDPAddrPort([]byte(msg), u.to); err != nil {
		u.t.Fatal(err)
	}
}

// final returns the first final (non-1xx) response, or "" after timeout.
func (u *rawUA) final(timeout time.Duration) string {
	u.t.Helper()
	buf := make([]byte, 65535)
	deadline := time.Now().Add(timeout)
	for {
		_ = u.conn.SetReadDeadline(deadline)
		n, err := u.conn.Read(buf)
		if err != nil {
			return ""
		}
		res := string(buf[:n])
		if !strings.HasPrefix(res, "SIP/2.0 1") {
			return res
		}
	}
}

func invite(local, callID, contentType, body string) string {
	return fmt.Sprintf(`INVITE sip:agent@127.0.0.1 SIP/2.0
Via: SIP/2.0/UDP %[1]s;branch=z9hG4bK-%[2]s
From: <sip:caller@%[1]s>;tag=%[2]s
To: <sip:agent@127.0.0.1>
Call-ID: %[2]s
CSeq: 1 INVITE
Contact: <sip:caller@%[1]s>
Max-Forwards: 70
Content-Type: %[3]s
Content-Length: %[4]d

%[5]s`, local, callID, contentType, len(strings.ReplaceAll(body, "\n", "\r\n")), body)
}

const (
	g729Only = `v=0
o=- 1 1 IN IP4 127.0.0.1
s=-
c=IN IP4 127.0.0.1
t=0 0
m=audio 40000 RTP/AVP 18
a=rtpmap:18 G729/8000
`
	videoOnly = `v=0
o=- 1 1 IN IP4 127.0.0.1
s=-
c=IN IP4 127.0.0.1
t=0 0
m=video 40000 RTP/AVP 96
a=rtpmap:96 VP8/90000
`
	pcmuOffer = `v=0
o=- 1 1 IN IP4 127.0.0.1
s=-
c=IN IP4 127.0.0.1
t=0 0
m=audio %d RTP/AVP 0 101
a=rtpmap:0 PCMU/8000
a=rtpmap:101 telephone-event/8000
`
)

// Bad requests get a status and a Warning that says why, and the server
// goes on answering calls: malformed SIP 400, garbage SDP 400, SDP without
// audio or without a codec in common 488, a body that is not SDP 415, no
// offer 488; a datagram that is no SIP at all is dropped.
func TestBadInvitesAreRefusedWithAReason(t *testing.T) {
	srv, addr, _ := startServer(t)
	for _, tc := range []struct {
		name, msg string
		status    string
		warning   string
	}{
		{"SDP not parseable", invite("%s", "bad-sdp", "application/sdp", "hello, I am not SDP"), "400", "malformed SDP"},
		{"no audio", invite("%s", "video", "application/sdp", videoOnly), "488", "no audio"},
		{"no codec in common", invite("%s", "g729", "application/sdp", g729Only), "488", "no codec in common"},
		{"not SDP", invite("%s", "json", "application/json", `{"sdp": false}`), "415", "application/sdp"},
		{"no offer", invite("%s", "no-offer", "application/sdp", ""), "488", "SDP offer is required"},
		{"malformed SIP: CSeq without a number", strings.Replace(invite("%s", "bad-cseq", "application/sdp", g729Only), "CSeq: 1 INVITE", "CSeq: one INVITE", 1), "400", "malformed request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := dialRaw(t, addr)
			u.send(strings.ReplaceAll(tc.msg, "%s", u.local()))
			res := u.final(3 * time.Second)
			first, _, _ := strings.Cut(res, "\r\n")
			if !strings.HasPrefix(first, "SIP/2.0 "+tc.status+" ") {
				t.Fatalf("answered %q; want %s\n%s", first, tc.status, res)
			}
			if !strings.Contains(res, "Warning: 399") || !strings.Contains(res, tc.warning) {
				t.Errorf("the answer does not say why (%q):\n%s", tc.warning, res)
			}
		})
	}
	// Not SIP at all: nothing to answer, and nothing breaks.
	u := dialRaw(t, addr)
	u.send("\x00\x01garbage that is not SIP\n\n")
	if res := u.final(300 * time.Millisecond); res != "" {
		t.Errorf("garbage answered with %q", res)
	}
	if srv.Calls() != 0 {
		t.Errorf("%d calls after refused INVITEs", srv.Calls())
	}
}

// A call's RTP port takes garbage (not RTP, an unnegotiated payload type)
// without harm: the call goes on, its packets keep flowing, and the BYE
// ends it.
func TestGarbageRTPIsIgnored(t *testing.T) {
	srv, addr, rec := startServer(t)
	l := listen(t)
	u := dialRaw(t, addr)
	u.send(invite(u.local(), "garbage-rtp", "application/sdp", fmt.Sprintf(pcmuOffer, l.port())))
	res := u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("INVITE answered %q", res)
	}
	port := answerPort(t, res)
	toTag := header(res, "To")
	u.send(fmt.Sprintf(`ACK sip:agent@127.0.0.1 SIP/2.0
Via: SIP/2.0/UDP %[1]s;branch=z9hG4bK-ack
From: <sip:caller@%[1]s>;tag=garbage-rtp
To: %[2]s
Call-ID: garbage-rtp
CSeq: 1 ACK
Max-Forwards: 70
Content-Length: 0

`, u.local(), toTag))
	media := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
	for i := range 50 {
		var pkt []byte
		switch i % 3 {
		case 0:
			pkt = []byte("definitely not RTP")
		case 1:
			p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: uint16(i), Timestamp: uint32(i * 160)}, Payload: make([]byte, 160)}
			pkt, _ = p.Marshal()
		default:
			pkt = make([]byte, 3)
		}
		if _, err := u.conn.WriteToUDPAddrPort(pkt, media); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the agent keeps talking meanwhile
	if srv.Calls() != 1 {
		t.Fatalf("%d calls after garbage RTP; want the one", srv.Calls())
	}
	before := len(l.heard())
	time.Sleep(200 * time.Millisecond)
	if after := len(l.heard()); after-before < 5 {
		t.Errorf("the agent's RTP stalled after garbage: %d packets in 200 ms", after-before)
	}
	u.send(fmt.Sprintf(`BYE sip:agent@127.0.0.1 SIP/2.0
Via: SIP/2.0/UDP %[1]s;branch=z9hG4bK-bye
From: <sip:caller@%[1]s>;tag=garbage-rtp
To: %[2]s
Call-ID: garbage-rtp
CSeq: 2 BYE
Max-Forwards: 70
Content-Length: 0

`, u.local(), toTag))
	if res := u.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("BYE answered %q", res)
	}
	deadline := time.Now().Add(3 * time.Second)
	for srv.Calls() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if srv.Calls() != 0 {
		t.Errorf("the call outlived its BYE: %v", rec.kinds())
	}
}

func header(msg, name string) string {
	for _, l := range strings.Split(msg, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(k), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func answerPort(t *testing.T, res string) int {
	t.Helper()
	_, body, _ := strings.Cut(res, "\r\n\r\n")
	o, err := sip.ParseOffer([]byte(body))
	if err != nil {
		t.Fatalf("the answer's SDP: %v\n%s", err, body)
	}
	return o.Port
}
