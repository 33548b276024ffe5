package sip_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/internal/kamailiotest"
	"github.com/holdline/holdline/sip"
)

// kamailioCaller is a phone on sipgo that calls through Kamailio over UDP.
type kamailioCaller struct {
	dialogs *sipgo.DialogClientCache
	local   string
}

func newKamailioCaller(t *testing.T) *kamailioCaller {
	t.Helper()
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("caller"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sipgo.NewServer(ua, sipgo.WithServerLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := conn.LocalAddr().String()
	client, err := sipgo.NewClient(ua, sipgo.WithClientAddr(local), sipgo.WithClientLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(local)
	var p int
	fmt.Sscan(port, &p)
	contact := sipmsg.ContactHeader{Address: sipmsg.Uri{Scheme: "sip", User: "caller", Host: host, Port: p}}
	c := &kamailioCaller{dialogs: sipgo.NewDialogClientCache(client, contact), local: local}
	srv.OnBye(func(req *sipmsg.Request, tx sipmsg.ServerTransaction) { _ = c.dialogs.ReadBye(req, tx) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeUDP(conn)
	}()
	t.Cleanup(func() {
		conn.Close()
		ua.Close()
		<-done
	})
	return c
}

// call INVITEs user at Kamailio's UDP address and returns the final
// status; a call answered is hung up at once.
func (c *kamailioCaller) call(ctx context.Context, user, proxy string) (int, error) {
	host, port, _ := net.SplitHostPort(proxy)
	var p int
	fmt.Sscan(port, &p)
	offer := fmt.Sprintf("v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40002 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
	dlg, err := c.dialogs.Invite(ctx, sipmsg.Uri{Scheme: "sip", User: user, Host: host, Port: p}, []byte(offer), sipmsg.NewHeader("Content-Type", "application/sdp"))
	if err != nil {
		return 0, err
	}
	defer dlg.Close()
	if err := dlg.WaitAnswer(ctx, sipgo.AnswerOptions{}); err != nil {
		if dlg.InviteResponse != nil {
			return dlg.InviteResponse.StatusCode, nil
		}
		return 0, err
	}
	code := dlg.InviteResponse.StatusCode
	if err := dlg.Ack(ctx); err != nil {
		return code, fmt.Errorf("ACK: %w", err)
	}
	if err := dlg.Bye(ctx); err != nil {
		return code, fmt.Errorf("BYE: %w", err)
	}
	return code, nil
}

// TestKamailioTLSRegistrationAnswersCalls: Holdline, serving UDP only,
// registers over TLS at a real Kamailio (which grants 60 s of the 300 s
// asked); a caller's INVITE over UDP to the registered user reaches it
// through Kamailio over the registration's own TLS connection and is
// answered 200. Kamailio is stopped and started again (its bindings,
// kept in memory, are gone): Holdline notices the connection drop,
// registers again within one backoff period, and the next call reaches
// it. Closing the server removes the binding.
func TestKamailioTLSRegistrationAnswersCalls(t *testing.T) {
	const password = "kam-Pa55word"
	k := kamailiotest.Start(t, map[string]string{"holdline": password})
	_, tlsPort, _ := net.SplitHostPort(k.TLS)
	srv, _, logs := serveOn(t, "udp", nil, sip.WithTLSClientConfig(k.ClientTLS()))
	const firstBackoff, maxBackoff = 500 * time.Millisecond, 4 * time.Second
	reg, err := srv.Register(t.Context(), "sips:holdline@127.0.0.1:"+tlsPort, sip.WithRegisterPassword(password),
		sip.WithRegisterKeepalive(time.Second), sip.WithRegisterBackoff(firstBackoff, maxBackoff))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	start := time.Now()
	if err := reg.WaitRegistered(ctx); err != nil {
		t.Fatalf("not registered: %v\n%s", err, logs)
	}
	t.Logf("registered over TLS in %v, granted %v", time.Since(start), reg.State().Expires)
	if got := reg.State().Expires; got != kamailiotest.MaxExpires*time.Second {
		t.Errorf("granted %v, want Kamailio's max_expires %d s (the registrar's expiry wins)", got, kamailiotest.MaxExpires)
	}
	registered := func(c []string) bool { return len(c) > 0 }
	contacts, err := k.WaitContacts(ctx, "holdline", registered)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(contacts, " "), "transport=tls") && !strings.Contains(strings.Join(contacts, " "), "sips:") {
		t.Errorf("contacts %v: want the TLS connection's", contacts)
	}

	caller := newKamailioCaller(t)
	code, err := caller.call(ctx, "holdline", k.UDP)
	if err != nil || code != 200 {
		t.Fatalf("call through Kamailio: %d, %v\n%s\nkamailio:\n%s", code, err, logs, k.Log())
	}

	if err := k.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := k.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if _, err := k.WaitContacts(ctx, "holdline", registered); err != nil {
		t.Fatalf("not registered again after Kamailio's restart: %v\n%s", err, logs)
	}
	again := time.Since(restarted)
	t.Logf("registered again %v after Kamailio started again (down 2 s; keep-alive 1 s, backoff %v..%v)", again, firstBackoff, maxBackoff)
	if again > maxBackoff+time.Second {
		t.Errorf("registered again %v after the restart, want within one backoff period (%v)", again, maxBackoff)
	}
	if err := reg.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	if got := reg.State().Expires; got != kamailiotest.MaxExpires*time.Second {
		t.Errorf("granted %v after the restart, want %d s\n%s", got, kamailiotest.MaxExpires, logs)
	}
	if c := strings.Count(logs.String(), "SIP registration failing"); c != 1 {
		t.Errorf("the outage logged %d warnings, want one:\n%s", c, logs)
	}
	if !strings.Contains(logs.String(), "SIP registration recovered") {
		t.Errorf("no recovery logged:\n%s", logs)
	}
	code, err = caller.call(ctx, "holdline", k.UDP)
	if err != nil || code != 200 {
		t.Fatalf("call after the restart: %d, %v\n%s", code, err, logs)
	}

	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.WaitContacts(ctx, "holdline", func(c []string) bool { return len(c) == 0 }); err != nil {
		t.Errorf("the binding stays after Close: %v", err)
	}
	if strings.Contains(logs.String(), password) || strings.Contains(k.Log(), password) {
		t.Error("the password is in a log")
	}
}

// tcpRelay forwards TCP connections to a target until cut, as a NAT or a
// network path that can drop them.
type tcpRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startRelay(t *testing.T, target string) *tcpRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln, target: target}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			r.wg.Add(2)
			go func() { defer r.wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer r.wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		r.cut()
		r.wg.Wait()
	})
	return r
}

// cut closes every connection relayed so far.
func (r *tcpRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// TestKamailioTCPConnectionDropReregisters: Holdline registers over TCP
// through a path that drops the connection while Kamailio stays up.
// Holdline notices (keep-alive), registers again over a new connection,
// and the same REGISTER removes the binding of the old one, so that
// Kamailio holds exactly the new contact; the next call reaches Holdline
// over the new connection.
func TestKamailioTCPConnectionDropReregisters(t *testing.T) {
	const password = "kam-tcp-pw"
	k := kamailiotest.Start(t, map[string]string{"holdline": password})
	relay := startRelay(t, k.TCP)
	srv, _, logs := serveOn(t, "udp", nil)
	_, port, _ := net.SplitHostPort(relay.ln.Addr().String())
	const keepalive = 500 * time.Millisecond
	reg, err := srv.Register(t.Context(), "sip:holdline@127.0.0.1:"+port+";transport=tcp", sip.WithRegisterPassword(password),
		sip.WithRegisterKeepalive(keepalive), sip.WithRegisterBackoff(500*time.Millisecond, 4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := reg.WaitRegistered(ctx); err != nil {
		t.Fatalf("not registered: %v\n%s", err, logs)
	}
	first, err := k.WaitContacts(ctx, "holdline", func(c []string) bool { return len(c) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	caller := newKamailioCaller(t)
	if code, err := caller.call(ctx, "holdline", k.UDP); err != nil || code != 200 {
		t.Fatalf("call: %d, %v\n%s", code, err, logs)
	}

	relay.cut()
	cutAt := time.Now()
	now, err := k.WaitContacts(ctx, "holdline", func(c []string) bool { return len(c) == 1 && c[0] != first[0] })
	if err != nil {
		c, _ := k.Contacts(ctx, "holdline")
		t.Fatalf("after the drop Kamailio holds %v (before: %v), want the new connection's contact alone: %v\n%s", c, first, err, logs)
	}
	again := time.Since(cutAt)
	t.Logf("connection dropped: registered again over a new one in %v (keep-alive %v); %v replaced %v", again, keepalive, now, first)
	if again > keepalive+time.Second {
		t.Errorf("registered again %v after the drop, want within the keep-alive interval (%v) and a second", again, keepalive)
	}
	if code, err := caller.call(ctx, "holdline", k.UDP); err != nil || code != 200 {
		t.Fatalf("call after the drop: %d, %v\n%s", code, err, logs)
	}
	if strings.Contains(logs.String(), "SIP registration failing") {
		t.Errorf("a drop the first REGISTER repaired was logged as a failure:\n%s", logs)
	}
}

// TestKamailioTLSRefreshesBeforeExpiry: over TLS, with Kamailio granting
// 10 s of the 300 s asked, Holdline refreshes before every binding runs
// out (at half of so short a lifetime) for 31 s of real time, and
// Kamailio holds the binding at every look, 4 a second.
func TestKamailioTLSRefreshesBeforeExpiry(t *testing.T) {
	// HOLDLINE_KAMAILIO_REFRESH=30m runs it for that long at 60 s grants
	// (Kamailio's usual max_expires); by default 31 s at 10 s grants.
	run, grant := 31*time.Second, 10
	if v := os.Getenv("HOLDLINE_KAMAILIO_REFRESH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("HOLDLINE_KAMAILIO_REFRESH: %v", err)
		}
		run, grant = d, 60
	}
	if testing.Short() {
		t.Skipf("%v of real time", run)
	}
	const password = "kam-refresh-pw"
	k := kamailiotest.StartWith(t, kamailiotest.Options{Users: map[string]string{"holdline": password}, MaxExpires: grant})
	_, tlsPort, _ := net.SplitHostPort(k.TLS)
	srv, _, logs := serveOn(t, "udp", nil, sip.WithTLSClientConfig(k.ClientTLS()))
	reg, err := srv.Register(t.Context(), "sip:holdline@127.0.0.1:"+tlsPort+";transport=tls", sip.WithRegisterPassword(password))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), run+30*time.Second)
	defer cancel()
	if err := reg.WaitRegistered(ctx); err != nil {
		t.Fatalf("not registered: %v\n%s", err, logs)
	}
	type refresh struct {
		at      time.Time
		granted time.Duration
	}
	var seen []refresh
	count, missing, looks := 0, 0, 0
	for end := time.Now().Add(run); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if st := reg.State(); st.Registers > count {
			count = st.Registers
			seen = append(seen, refresh{time.Now(), st.Expires})
		}
		looks++
		if c, err := k.Contacts(ctx, "holdline"); err != nil || len(c) == 0 {
			missing++
		}
	}
	largest := -time.Hour
	for i := 1; i < len(seen); i++ {
		largest = max(largest, seen[i].at.Sub(seen[i-1].at.Add(seen[i-1].granted)))
	}
	// A refresh goes a fifth of the grant, at least 5 s, before expiry.
	granted := time.Duration(grant) * time.Second
	lead := max(granted/5, 5*time.Second)
	want := int(run/(granted-lead)) + 1
	t.Logf("%v over TLS at %v grants: %d REGISTERs accepted (want about %d), largest gap between a binding's expiry and its refresh %v (to 250 ms), binding missing at %d of %d looks",
		run, granted, count, want, largest.Round(time.Millisecond), missing, looks)
	if count < want-1 || count > want+2 {
		t.Errorf("%d REGISTERs in %v at %v grants, want about %d (one every %v)", count, run, granted, want, granted-lead)
	}
	if largest > -lead+time.Second {
		t.Errorf("a refresh came %v after its binding's expiry, want about %v before", largest, lead)
	}
	if missing > 0 {
		t.Errorf("Kamailio held no binding at %d looks", missing)
	}
}
