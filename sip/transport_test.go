package sip_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/testcert"

	"github.com/emiago/sipgo"
	sipmsg "github.com/emiago/sipgo/sip"
	"github.com/pion/rtp"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
)

// logBuffer is a logger's output the test reads while the server writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// greeter is an agent that greets the caller and does nothing else.
func greeter(context.Context) (*runtime.Agent, func(), error) {
	voice, err := scripted.NewTTS(scripted.WithTTSRate(8000))
	if err != nil {
		return nil, nil, err
	}
	model := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
		return scripted.Response{Text: "Hello, you have reached Holdline."}
	})
	return &runtime.Agent{
		Name: "phone", Instructions: "Be brief.", Model: model, TTS: voice, STT: scripted.NewSTT(),
		OnEnter: func(ctx context.Context, s *runtime.Session) error { return s.GenerateReply(ctx, "") },
	}, nil, nil
}

// serveOn serves the greeter over network ("udp", "tcp" or "tls", the
// last with cfg) on a loopback port until the test ends, and returns the
// server's address and its log.
func serveOn(t *testing.T, network string, cfg *tls.Config, opts ...sip.Option) (*sip.Server, netip.AddrPort, *logBuffer) {
	t.Helper()
	return serveAgentOn(t, greeter, network, cfg, opts...)
}

func serveAgentOn(t *testing.T, newAgent sip.AgentFunc, network string, cfg *tls.Config, opts ...sip.Option) (*sip.Server, netip.AddrPort, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := sip.New(newAgent, append([]sip.Option{sip.WithLogger(logger)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var addr string
	switch network {
	case "udp":
		conn, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = conn.LocalAddr().String()
		go func() { done <- srv.ServeUDP(ctx, conn) }()
	default:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		if network == "tls" {
			go func() { done <- srv.ServeTLS(ctx, ln, cfg) }()
		} else {
			go func() { done <- srv.ServeTCP(ctx, ln) }()
		}
	}
	t.Cleanup(func() {
		srv.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve %s: %v", network, err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs)
		}
	})
	return srv, netip.MustParseAddrPort(addr), logs
}

// tcpScenario is a sipp UAC over TCP: an INVITE, a 200 whose Contact must
// say transport=tcp, the ACK, a moment of the greeting, and a BYE.
const tcpScenario = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="holdline uac tcp">
  <send>
    <![CDATA[
      INVITE sip:agent@[remote_ip]:[remote_port];transport=tcp SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 1 INVITE
      Contact: <sip:caller@[local_ip]:[local_port];transport=tcp>
      Max-Forwards: 70
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 8 101
      a=rtpmap:8 PCMA/8000
      a=rtpmap:101 telephone-event/8000
      a=sendrecv
    ]]>
  </send>
  <recv response="100" optional="true"/>
  <recv response="200" rtd="true">
    <action>
      <ereg regexp="transport=tcp" search_in="hdr" header="Contact:" check_it="true" assign_to="1"/>
    </action>
  </recv>
  <Reference variables="1"/>
  <send>
    <![CDATA[
      ACK sip:agent@[remote_ip]:[remote_port];transport=tcp SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 1 ACK
      Contact: <sip:caller@[local_ip]:[local_port];transport=tcp>
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <pause milliseconds="1500"/>
  <send>
    <![CDATA[
      BYE sip:agent@[remote_ip]:[remote_port];transport=tcp SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 2 BYE
      Contact: <sip:caller@[local_ip]:[local_port];transport=tcp>
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <recv response="200" crlf="true"/>
</scenario>
`

// sipp calls over TCP: the agent answers on the connection the INVITE
// came in on, with a Contact that says TCP, and the caller's BYE ends the
// call.
func TestSippTCPCallIsAnswered(t *testing.T) {
	needSipp(t)
	srv, addr, _ := serveOn(t, "tcp", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runSipp(t, ctx, tcpScenario, addr, "-t", "t1", "-m", "1", "-max_socket", "4")
	waitNoCalls(t, srv)
}

// tcpHangUpScenario is a sipp UAC over TCP whose Contact names a port
// nothing listens on: the agent's BYE reaches it only over the
// connection the call came in on.
const tcpHangUpScenario = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="holdline uac tcp, hung up on">
  <send>
    <![CDATA[
      INVITE sip:agent@[remote_ip]:[remote_port];transport=tcp SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 1 INVITE
      Contact: <sip:caller@127.0.0.1:9;transport=tcp>
      Max-Forwards: 70
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 8
      a=rtpmap:8 PCMA/8000
      a=sendrecv
    ]]>
  </send>
  <recv response="100" optional="true"/>
  <recv response="200" rtd="true"/>
  <send>
    <![CDATA[
      ACK sip:agent@[remote_ip]:[remote_port];transport=tcp SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 1 ACK
      Contact: <sip:caller@127.0.0.1:9;transport=tcp>
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <recv request="BYE"/>
  <send>
    <![CDATA[
      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:]
      [last_Call-ID:]
      [last_CSeq:]
      Content-Length: 0
    ]]>
  </send>
</scenario>
`

// The agent hangs up a call that came in over TCP: its BYE goes back
// over the call's connection, not to a new one to the caller's Contact.
func TestSippTCPAgentHangsUpOverTheConnection(t *testing.T) {
	needSipp(t)
	hangUpSoon := func(ctx context.Context) (*runtime.Agent, func(), error) {
		a, release, err := greeter(ctx)
		if err != nil {
			return nil, nil, err
		}
		a.OnEnter = func(ctx context.Context, s *runtime.Session) error {
			go func() {
				time.Sleep(time.Second)
				_ = s.End(context.Background(), "done")
			}()
			return nil
		}
		return a, release, nil
	}
	srv, addr, _ := serveAgentOn(t, hangUpSoon, "tcp", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runSipp(t, ctx, tcpHangUpScenario, addr, "-t", "t1", "-m", "1", "-max_socket", "4")
	waitNoCalls(t, srv)
}

// selfSigned is a certificate for 127.0.0.1 and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	c, err := testcert.New("holdline test")
	if err != nil {
		t.Fatal(err)
	}
	return c.TLS, c.Pool
}

// tlsCall places one call over TLS with sipgo: INVITE, 200 (whose
// Contact must be sips:), ACK, a moment of the greeting, BYE.
func tlsCall(t *testing.T, ctx context.Context, addr netip.AddrPort, roots *x509.CertPool) {
	t.Helper()
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("caller"), sipgo.WithUserAgenTLSConfig(&tls.Config{RootCAs: roots}))
	if err != nil {
		t.Fatal(err)
	}
	defer ua.Close()
	cli, err := sipgo.NewClient(ua)
	if err != nil {
		t.Fatal(err)
	}
	rtpConn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rtpConn.Close()
	contact := sipmsg.ContactHeader{Address: sipmsg.Uri{Scheme: "sips", User: "caller", Host: "127.0.0.1", Port: 5061}}
	dc := sipgo.NewDialogClientCache(cli, contact)
	// sipgo takes a sips: URI without a transport parameter to mean UDP.
	target := sipmsg.Uri{Scheme: "sips", User: "agent", Host: addr.Addr().String(), Port: int(addr.Port()), UriParams: sipmsg.NewParams()}
	target.UriParams.Add("transport", "tls")
	offer := sip.NewOffer(netip.MustParseAddr("127.0.0.1"), rtpConn.LocalAddr().(*net.UDPAddr).Port, 1, 1)
	dlg, err := dc.Invite(ctx, target, offer, sipmsg.NewHeader("Content-Type", "application/sdp"))
	if err != nil {
		t.Fatalf("INVITE over TLS: %v", err)
	}
	defer dlg.Close()
	if err := dlg.WaitAnswer(ctx, sipgo.AnswerOptions{}); err != nil {
		t.Fatalf("waiting for the answer: %v", err)
	}
	if c := dlg.InviteResponse.Contact(); c == nil || c.Address.Scheme != "sips" {
		t.Errorf("the 200's Contact is %v, want a sips: URI", c)
	}
	if err := dlg.Ack(ctx); err != nil {
		t.Fatalf("ACK: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := dlg.Bye(ctx); err != nil {
		t.Fatalf("BYE: %v", err)
	}
}

// A call over TLS completes, and clients that fail their handshake (one
// sending garbage, one that does not trust the certificate) are logged
// with the reason and do not take the server down: the next call works.
func TestTLSCallAndBadHandshakes(t *testing.T) {
	cert, roots := selfSigned(t)
	srv, addr, logs := serveOn(t, "tls", &tls.Config{Certificates: []tls.Certificate{cert}})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	garbage, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(garbage, "INVITE sip:agent@127.0.0.1 SIP/2.0\r\n\r\n")
	_, _ = garbage.Read(make([]byte, 64)) // the server's alert, or its close
	garbage.Close()
	// A client that does not trust the server's certificate.
	if c, err := tls.Dial("tcp", addr.String(), &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		c.Close()
		t.Fatal("a client without the root trusted the self-signed certificate")
	}

	tlsCall(t, ctx, addr, roots)
	waitNoCalls(t, srv)
	deadline := time.Now().Add(2 * time.Second)
	for strings.Count(logs.String(), "TLS handshake failed") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "TLS handshake failed"); n != 2 {
		t.Errorf("%d failed handshakes logged, want 2:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "bad certificate") && !strings.Contains(logs.String(), "unknown certificate") {
		t.Errorf("the refused certificate's handshake is logged without the reason:\n%s", logs)
	}
}

// udpCaller is a caller over UDP that writes its own SIP, to see exactly
// what the server answers.
type udpCaller struct {
	t     *testing.T
	conn  *net.UDPConn
	to    netip.AddrPort
	id    string
	toTag string
	// answered: a 2xx came, so an ACK is a transaction of its own rather
	// than part of the INVITE's (RFC 3261 17.1.1.3).
	answered bool
	// contact, when set, is the Contact's host:port instead of the
	// caller's socket: a phone behind NAT names its private address.
	contact string
}

func newUDPCaller(t *testing.T, to netip.AddrPort) *udpCaller {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &udpCaller{t: t, conn: conn, to: to, id: fmt.Sprintf("raw-%d@test", time.Now().UnixNano())}
}

func (r *udpCaller) port() int { return r.conn.LocalAddr().(*net.UDPAddr).Port }

// send writes method with cseq; body, if any, is SDP. The Via asks for
// rport and names a port nothing listens on, so that a response reaches
// the caller only if it goes to the source port.
func (r *udpCaller) send(method string, cseq int, body string) {
	r.t.Helper()
	toTag := ""
	if r.toTag != "" {
		toTag = ";tag=" + r.toTag
	}
	ct := ""
	if body != "" {
		ct = "Content-Type: application/sdp\r\n"
		if method == "INFO" {
			ct = "Content-Type: application/dtmf-relay\r\n"
		}
	}
	contact := fmt.Sprintf("127.0.0.1:%d", r.port())
	if r.contact != "" {
		contact = r.contact
	}
	branch := fmt.Sprintf("%s-%d-%s", r.id, cseq, method)
	if method == "ACK" && !r.answered {
		branch = fmt.Sprintf("%s-%d-INVITE", r.id, cseq)
	}
	msg := fmt.Sprintf("%s sip:agent@%s SIP/2.0\r\n"+
		"Via: SIP/2.0/UDP 10.9.9.9:5999;rport;branch=z9hG4bK-%s\r\n"+
		"From: <sip:caller@10.9.9.9>;tag=raw\r\nTo: <sip:agent@%s>%s\r\nCall-ID: %s\r\nCSeq: %d %s\r\n"+
		"Contact: <sip:caller@%s>\r\nMax-Forwards: 70\r\n%sContent-Length: %d\r\n\r\n%s",
		method, r.to, branch, r.to, toTag, r.id, cseq, method, contact, ct, len(body), body)
	if _, err := r.conn.WriteToUDP([]byte(msg), net.UDPAddrFromAddrPort(r.to)); err != nil {
		r.t.Fatal(err)
	}
}

// final reads responses until a final one, and returns it.
func (r *udpCaller) final() string {
	r.t.Helper()
	buf := make([]byte, 8192)
	for {
		_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			r.t.Fatalf("no final response: %v", err)
		}
		msg := string(buf[:n])
		if strings.HasPrefix(msg, "SIP/2.0 1") {
			continue
		}
		r.answered = r.answered || strings.HasPrefix(msg, "SIP/2.0 2")
		if m := regexp.MustCompile(`(?mi)^To:.*;tag=([^;\r\n]+)`).FindStringSubmatch(msg); m != nil {
			r.toTag = m[1]
		}
		return msg
	}
}

func offerSDP(addr string, port int) string {
	return "v=0\r\no=caller 1 1 IN IP4 " + addr + "\r\ns=-\r\nc=IN IP4 " + addr + "\r\nt=0 0\r\n" +
		fmt.Sprintf("m=audio %d RTP/AVP 8\r\na=rtpmap:8 PCMA/8000\r\na=sendrecv\r\n", port)
}

// When every port of --rtp-ports is taken, an INVITE gets 503 with a
// Retry-After and a Warning that says why.
func TestRTPPortsExhaustedIs503(t *testing.T) {
	held, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	p := uint16(held.LocalAddr().(*net.UDPAddr).Port)
	_, addr, _ := serveOn(t, "udp", nil, sip.WithRTPPorts(p, p))
	r := newUDPCaller(t, addr)
	r.send("INVITE", 1, offerSDP("127.0.0.1", 4000))
	res := r.final()
	r.send("ACK", 1, "")
	if !strings.HasPrefix(res, "SIP/2.0 503") {
		t.Fatalf("answered\n%s\nwant 503", res)
	}
	if header(res, "Retry-After") == "" || !strings.Contains(header(res, "Warning"), "RTP port") {
		t.Errorf("a 503 without Retry-After or a Warning naming the RTP ports:\n%s", res)
	}
}

// The public address is what the answer advertises (Contact, SDP); the
// response to a request whose Via asks for rport goes to the source port,
// with received and rport filled; and with symmetric RTP the agent's RTP
// goes to where the caller's comes from, not to the private address its
// SDP named.
func TestPublicAddrRportAndSymmetricRTP(t *testing.T) {
	srv, addr, _ := serveOn(t, "udp", nil, sip.WithPublicAddr("203.0.113.7:5070"), sip.WithSymmetricRTP())
	r := newUDPCaller(t, addr)
	r.send("INVITE", 1, offerSDP("10.255.255.1", 4000))
	res := r.final()
	if !strings.HasPrefix(res, "SIP/2.0 200") {
		t.Fatalf("answered\n%s\nwant 200", res)
	}
	r.send("ACK", 1, "")
	via := header(res, "Via")
	if !strings.Contains(via, "received=127.0.0.1") || !strings.Contains(via, fmt.Sprintf("rport=%d", r.port())) {
		t.Errorf("Via %q: want received=127.0.0.1 and rport=%d", via, r.port())
	}
	if c := header(res, "Contact"); !strings.Contains(c, "sip:holdline@203.0.113.7:5070") {
		t.Errorf("Contact %q: want the public address", c)
	}
	if !strings.Contains(res, "c=IN IP4 203.0.113.7") || !strings.Contains(res, "IN IP4 203.0.113.7\r\ns=") {
		t.Errorf("the SDP does not advertise the public address:\n%s", res)
	}
	rtpComesBack(t, res)
	r.send("BYE", 2, "")
	if res := r.final(); !strings.HasPrefix(res, "SIP/2.0 200") {
		t.Errorf("BYE answered\n%s", res)
	}
	waitNoCalls(t, srv)
}

// rtpComesBack sends RTP to the port the answer res names, from a socket
// of its own (not the address the offer gave), until the call's RTP comes
// back to that socket.
func rtpComesBack(t *testing.T, res string) {
	t.Helper()
	m := regexp.MustCompile(`m=audio (\d+) `).FindStringSubmatch(res)
	if m == nil {
		t.Fatalf("no m= line:\n%s", res)
	}
	var rtpPort int
	fmt.Sscan(m[1], &rtpPort)
	media, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer media.Close()
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: rtpPort}
	got := make(chan struct{})
	go func() {
		buf := make([]byte, 1500)
		for {
			n, err := media.Read(buf)
			if err != nil {
				return
			}
			var p rtp.Packet
			if p.Unmarshal(buf[:n]) == nil && p.PayloadType == 8 {
				close(got)
				return
			}
		}
	}()
	pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 8, SSRC: 7}, Payload: bytes.Repeat([]byte{0xd5}, 160)}
	deadline := time.After(5 * time.Second)
	for i := 0; ; i++ {
		pkt.SequenceNumber, pkt.Timestamp = uint16(i), uint32(160*i)
		b, _ := pkt.Marshal()
		_, _ = media.WriteToUDP(b, to)
		select {
		case <-got:
			return
		case <-deadline:
			t.Fatal("no RTP came back to where the caller's RTP came from")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// endsOnAKey is the greeter, hanging up when the caller presses a key.
func endsOnAKey(ctx context.Context) (*runtime.Agent, func(), error) {
	a, release, err := greeter(ctx)
	if err != nil {
		return nil, nil, err
	}
	a.DTMF = runtime.DTMFEventOnly
	a.OnEnter = func(ctx context.Context, s *runtime.Session) error {
		sub := s.Subscribe(64)
		go func() {
			defer sub.Close()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-sub.C():
					if !ok {
						return
					}
					if e.Kind == events.DTMF {
						_ = s.End(context.Background(), "the caller pressed "+e.Text)
						return
					}
				}
			}
		}()
		return s.GenerateReply(ctx, "")
	}
	return a, release, nil
}

// A caller behind NAT, whose SDP, Contact and Via name private addresses
// while its packets come from elsewhere, is answered where its packets
// come from without WithSymmetricRTP: the call's RTP, and the BYE the
// agent sends when it hangs up, whose Via names the server's public
// address and port.
func TestCallerBehindNATIsAnsweredWhereItsPacketsComeFrom(t *testing.T) {
	srv, addr, _ := serveAgentOn(t, endsOnAKey, "udp", nil, sip.WithPublicAddr("203.0.113.7:5070"))
	r := newUDPCaller(t, addr)
	r.contact = "192.168.77.2:5060"
	r.send("INVITE", 1, offerSDP("192.168.77.2", 4000))
	res := r.final()
	if !strings.HasPrefix(res, "SIP/2.0 200") {
		t.Fatalf("answered\n%s\nwant 200", res)
	}
	r.send("ACK", 1, "")
	rtpComesBack(t, res)
	r.send("INFO", 2, "Signal=#\r\nDuration=160\r\n")
	if res := r.final(); !strings.HasPrefix(res, "SIP/2.0 200") {
		t.Fatalf("INFO answered\n%s", res)
	}
	buf := make([]byte, 8192)
	for {
		_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("no BYE reached the caller's socket: %v", err)
		}
		msg := string(buf[:n])
		if !strings.HasPrefix(msg, "BYE ") {
			continue
		}
		if via := header(msg, "Via"); !strings.Contains(via, "203.0.113.7:5070") {
			t.Errorf("the BYE's Via %q does not name the public address and port", via)
		}
		ok := "SIP/2.0 200 OK\r\n"
		for _, h := range []string{"Via", "From", "To", "Call-ID", "CSeq"} {
			ok += h + ": " + header(msg, h) + "\r\n"
		}
		if _, err := r.conn.WriteToUDP([]byte(ok+"Content-Length: 0\r\n\r\n"), from); err != nil {
			t.Fatal(err)
		}
		break
	}
	waitNoCalls(t, srv)
}
