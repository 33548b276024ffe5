package sip_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emiago/sipgo"
	sipmsg "github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"

	"github.com/holdline/holdline/sip"
)

// memNet is a UDP network in memory, so that a registrar and Holdline
// can talk inside a synctest bubble on virtual time.
type memNet struct {
	mu    sync.Mutex
	conns map[string]*memConn
}

func newMemNet() *memNet { return &memNet{conns: map[string]*memConn{}} }

type memPacket struct {
	data []byte
	from *net.UDPAddr
}

// memConn is a net.PacketConn of a memNet. While down it drops what
// comes to it, as a registrar that is not running.
type memConn struct {
	n    *memNet
	addr *net.UDPAddr
	in   chan memPacket
	done chan struct{}
	once sync.Once
	down atomic.Bool
	mu   sync.Mutex
	seen []memSeen // REGISTERs dropped while down
}

type memSeen struct {
	at   time.Time
	cseq string
}

func (n *memNet) listen(addr string) *memConn {
	c := &memConn{n: n, addr: net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)), in: make(chan memPacket, 256), done: make(chan struct{})}
	n.mu.Lock()
	n.conns[c.addr.String()] = c
	n.mu.Unlock()
	return c
}

var cseqRE = regexp.MustCompile(`(?m)^CSeq:\s*(\d+ REGISTER)`)

func (c *memConn) ReadFrom(p []byte) (int, net.Addr, error) {
	select {
	case pkt := <-c.in:
		return copy(p, pkt.data), pkt.from, nil
	case <-c.done:
		return 0, nil, net.ErrClosed
	}
}

func (c *memConn) WriteTo(p []byte, to net.Addr) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	c.n.mu.Lock()
	dst := c.n.conns[to.String()]
	c.n.mu.Unlock()
	if dst == nil {
		return len(p), nil
	}
	if dst.down.Load() {
		dst.mu.Lock()
		if m := cseqRE.FindSubmatch(p); m != nil && strings.HasPrefix(string(p), "REGISTER ") {
			if n := len(dst.seen); n == 0 || dst.seen[n-1].cseq != string(m[1]) {
				dst.seen = append(dst.seen, memSeen{at: time.Now(), cseq: string(m[1])})
			}
		}
		dst.mu.Unlock()
		return len(p), nil
	}
	select {
	case dst.in <- memPacket{data: append([]byte(nil), p...), from: c.addr}:
	case <-dst.done:
	default: // a full queue drops, as UDP does
	}
	return len(p), nil
}

func (c *memConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.n.mu.Lock()
		delete(c.n.conns, c.addr.String())
		c.n.mu.Unlock()
	})
	return nil
}

func (c *memConn) LocalAddr() net.Addr              { return c.addr }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// testRegistrar is a registrar on sipgo: digest with qop=auth (a fresh
// nonce on every challenge, as Kamailio does), granting at most max.
type testRegistrar struct {
	realm string
	users map[string]string // user → password
	max   time.Duration
	proxy atomic.Bool // challenge with 407 and Proxy-Authenticate

	mu         sync.Mutex
	nonces     map[string]bool
	challenges int
	accepted   []regAccepted
	bindings   map[string]time.Time // contact → expiry
}

type regAccepted struct {
	at      time.Time
	user    string
	contact string
	granted time.Duration // 0: an un-REGISTER
}

func startRegistrar(t *testing.T, conn net.PacketConn, realm string, users map[string]string, max time.Duration) *testRegistrar {
	t.Helper()
	g := &testRegistrar{realm: realm, users: users, max: max, nonces: map[string]bool{}, bindings: map[string]time.Time{}}
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("registrar"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sipgo.NewServer(ua, sipgo.WithServerLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	srv.OnRegister(g.onRegister)
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
	return g
}

func (g *testRegistrar) challenge(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	g.mu.Lock()
	g.nonces[nonce] = true
	g.challenges++
	g.mu.Unlock()
	code, reason, name := 401, "Unauthorized", "WWW-Authenticate"
	if g.proxy.Load() {
		code, reason, name = 407, "Proxy Authentication Required", "Proxy-Authenticate"
	}
	res := sipmsg.NewResponseFromRequest(req, code, reason, nil)
	res.AppendHeader(sipmsg.NewHeader(name, (&digest.Challenge{Realm: g.realm, Nonce: nonce, Algorithm: "MD5", QOP: []string{"auth"}}).String()))
	_ = tx.Respond(res)
}

func (g *testRegistrar) onRegister(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	h := req.GetHeader("Authorization")
	if g.proxy.Load() {
		h = req.GetHeader("Proxy-Authorization")
	}
	if h == nil {
		g.challenge(req, tx)
		return
	}
	creds, err := digest.ParseCredentials(h.Value())
	g.mu.Lock()
	known := err == nil && g.nonces[creds.Nonce]
	g.mu.Unlock()
	if !known {
		g.challenge(req, tx)
		return
	}
	password, ok := g.users[creds.Username]
	want, derr := digest.Digest(&digest.Challenge{Realm: g.realm, Nonce: creds.Nonce, Algorithm: "MD5", QOP: []string{"auth"}},
		digest.Options{Method: "REGISTER", URI: creds.URI, Username: creds.Username, Password: password, Cnonce: creds.Cnonce, Count: creds.Nc})
	if !ok || derr != nil || want.Response != creds.Response || creds.URI != req.Recipient.String() || creds.Username != req.To().Address.User {
		g.challenge(req, tx)
		return
	}
	asked := time.Duration(-1)
	if e := req.GetHeader("Expires"); e != nil {
		n, _ := strconv.Atoi(e.Value())
		asked = time.Duration(n) * time.Second
	}
	res := sipmsg.NewResponseFromRequest(req, 200, "OK", nil)
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ch := range req.GetHeaders("Contact") {
		c := ch.(*sipmsg.ContactHeader)
		key := c.Address.String()
		exp := asked
		if v, ok := c.Params.Get("expires"); ok {
			n, _ := strconv.Atoi(v)
			exp = time.Duration(n) * time.Second
		}
		if exp == 0 {
			delete(g.bindings, key)
			g.accepted = append(g.accepted, regAccepted{at: now, user: creds.Username, contact: key})
			continue
		}
		granted := min(exp, g.max)
		g.bindings[key] = now.Add(granted)
		g.accepted = append(g.accepted, regAccepted{at: now, user: creds.Username, contact: key, granted: granted})
		out := &sipmsg.ContactHeader{Address: c.Address, Params: sipmsg.NewParams()}
		out.Params.Add("expires", strconv.Itoa(int(granted/time.Second)))
		res.AppendHeader(out)
	}
	_ = tx.Respond(res)
}

func (g *testRegistrar) snapshot() (accepted []regAccepted, challenges int, bindings int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]regAccepted(nil), g.accepted...), g.challenges, len(g.bindings)
}

// startPhone serves Holdline's greeter over UDP on conn of a memNet,
// logging to the returned buffer.
func startPhone(t *testing.T, conn net.PacketConn) (*sip.Server, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	srv, err := sip.New(greeter, sip.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- srv.ServeUDP(ctx, conn) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeUDP: %v", err)
		}
	})
	return srv, logs
}

const regPassword = "s3cret-Pa55"

// refreshes checks one user's accepted REGISTERs: every refresh came
// before the binding it renews ran out; it returns how many there were
// (the first included) and the largest gap between a binding's expiry
// and its refresh (negative: before expiry, by that much).
func refreshes(t *testing.T, accepted []regAccepted, user string) (n int, largest time.Duration) {
	t.Helper()
	var prev *regAccepted
	largest = -time.Hour
	for i := range accepted {
		a := &accepted[i]
		if a.user != user || a.granted == 0 {
			continue
		}
		n++
		if prev != nil {
			gap := a.at.Sub(prev.at.Add(prev.granted))
			largest = max(largest, gap)
		}
		prev = a
	}
	return n, largest
}

// TestRegisterRefreshesWithinGrantedExpiry: two registrations with one
// registrar that grants 60 s of the 300 s asked, 30 minutes of virtual
// time: the challenge is answered, every binding is refreshed before it
// runs out, at the registrar's lifetime and not the one asked, and Close
// removes both bindings, answering the challenge of the un-REGISTER. The
// password appears in no log line.
func TestRegisterRefreshesWithinGrantedExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet()
		g := startRegistrar(t, n.listen("10.0.0.1:5060"), "example.test", map[string]string{"alice": regPassword, "bob": regPassword}, 60*time.Second)
		srv, logs := startPhone(t, n.listen("10.0.0.2:5060"))
		ctx := t.Context()
		var regs []*sip.Registration
		for _, user := range []string{"alice", "bob"} {
			r, err := srv.Register(ctx, "sip:"+user+"@10.0.0.1:5060", sip.WithRegisterPassword(regPassword), sip.WithRegisterExpires(300*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			regs = append(regs, r)
		}
		start := time.Now()
		for _, r := range regs {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := r.WaitRegistered(wctx); err != nil {
				t.Fatalf("not registered: %v", err)
			}
			cancel()
		}
		time.Sleep(30*time.Minute - time.Since(start))
		accepted, challenges, bindings := g.snapshot()
		if bindings != 2 {
			t.Errorf("registrar holds %d bindings, want 2", bindings)
		}
		for _, user := range []string{"alice", "bob"} {
			count, largest := refreshes(t, accepted, user)
			// Granted 60 s, refreshed at 48 s: 1 + 1800/48 = 38 REGISTERs.
			// Fewer than 31 leaves a gap; more than 40 is not the
			// registrar's lifetime being used.
			t.Logf("%s: %d REGISTERs accepted in 30 min of virtual time (granted 60 s), largest gap between a binding's expiry and its refresh %v", user, count, largest)
			if count < 31 || count > 40 {
				t.Errorf("%s: %d REGISTERs accepted in 30 min, want about 38 (refresh at 48 s of 60 s)", user, count)
			}
			if largest > -5*time.Second {
				t.Errorf("%s: a refresh came %v after its binding's expiry, want at least 5 s before", user, largest)
			}
		}
		if st := regs[0].State(); !st.Registered || st.Expires != 60*time.Second || st.Err != nil {
			t.Errorf("state %+v, want registered for 60 s", st)
		}
		if challenges < 2 {
			t.Errorf("%d challenges, want the first REGISTERs challenged", challenges)
		}
		srv.Close()
		for _, r := range regs {
			select {
			case <-r.Done():
			default:
				t.Error("a registration still runs after the server's Close")
			}
		}
		accepted, _, bindings = g.snapshot()
		if bindings != 0 {
			t.Errorf("after Close the registrar still holds %d bindings, want the un-REGISTERs to remove them", bindings)
		}
		unregs := 0
		for _, a := range accepted {
			if a.granted == 0 {
				unregs++
			}
		}
		if unregs != 2 {
			t.Errorf("%d authenticated un-REGISTERs, want 2", unregs)
		}
		if strings.Contains(logs.String(), regPassword) {
			t.Error("the password is in the log")
		}
		if !strings.Contains(logs.String(), "SIP unregistered") {
			t.Errorf("no un-REGISTER logged:\n%s", logs)
		}
	})
}

// durations print as durations.
type durations []time.Duration

func (d durations) String() string {
	parts := make([]string, len(d))
	for i, x := range d {
		parts[i] = x.String()
	}
	return strings.Join(parts, ", ")
}

// TestRegisterBacksOffWhileRegistrarIsDown: the registrar stops
// answering for 5 minutes mid-registration: the retries back off
// (doubling, capped below half the granted 60 s), the failure is logged
// once at warn and the recovery once at info, and the registrar has us
// again within one backoff period of coming back.
func TestRegisterBacksOffWhileRegistrarIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet()
		regConn := n.listen("10.0.0.1:5060")
		g := startRegistrar(t, regConn, "example.test", map[string]string{"alice": regPassword}, 60*time.Second)
		srv, logs := startPhone(t, n.listen("10.0.0.2:5060"))
		r, err := srv.Register(t.Context(), "sip:alice@10.0.0.1:5060", sip.WithRegisterPassword(regPassword))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute)
		downAt := time.Now()
		regConn.down.Store(true)
		time.Sleep(5 * time.Minute)
		if st := r.State(); st.Registered || st.Err == nil {
			t.Errorf("state during the outage %+v, want not registered with the failure", st)
		}
		regConn.down.Store(false)
		upAt := time.Now()
		time.Sleep(5 * time.Minute)

		accepted, _, _ := g.snapshot()
		var back time.Time
		for _, a := range accepted {
			if a.at.After(upAt) {
				back = a.at
				break
			}
		}
		regConn.mu.Lock()
		seen := append([]memSeen(nil), regConn.seen...)
		regConn.mu.Unlock()
		var gaps durations
		for i := 1; i < len(seen); i++ {
			gaps = append(gaps, seen[i].at.Sub(seen[i-1].at))
		}
		t.Logf("outage of 5 min: %d REGISTER attempts went unanswered, %v apart; registered again %v after the registrar came back",
			len(seen), gaps, back.Sub(upAt))
		if back.IsZero() {
			t.Fatal("not registered again after the registrar came back")
		}
		// One backoff period: the cap (30 s) plus the attempt under way
		// when the registrar came back (its 10 s timeout).
		if d := back.Sub(upAt); d > 40*time.Second {
			t.Errorf("registered again %v after the registrar came back, want within one backoff period (40 s)", d)
		}
		if len(seen) < 5 || len(seen) > 20 {
			t.Errorf("%d attempts in a 5 min outage, want a backoff (5 to 20)", len(seen))
		}
		for i, gap := range gaps {
			if gap > 41*time.Second {
				t.Errorf("attempt %d came %v after the one before: the backoff is not capped below the granted 60 s", i+1, gap)
			}
			if i > 0 && gap+time.Second < gaps[i-1] {
				t.Errorf("attempts %v apart: the backoff shrank while failing", gaps)
			}
		}
		// The first unanswered attempt is the refresh due after the
		// outage began: within 48 s.
		if len(seen) > 0 && seen[0].at.Sub(downAt) > 48*time.Second {
			t.Errorf("first attempt %v into the outage", seen[0].at.Sub(downAt))
		}
		out := logs.String()
		if c := strings.Count(out, "SIP registration failing"); c != 1 {
			t.Errorf("failure logged %d times, want once:\n%s", c, out)
		}
		if c := strings.Count(out, "SIP registration recovered"); c != 1 {
			t.Errorf("recovery logged %d times, want once:\n%s", c, out)
		}
		if !regexp.MustCompile(`level=WARN msg="SIP registration failing`).MatchString(out) {
			t.Errorf("the failure is not a warning:\n%s", out)
		}
	})
}

// TestRegister401LoopStops: a registrar that refuses the password
// challenges every answer again with a fresh nonce. Each attempt stops
// after its answer is refused (two REGISTERs, not a loop), the error says
// so with the status and without the password, and the attempts back
// off.
func TestRegister401LoopStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet()
		g := startRegistrar(t, n.listen("10.0.0.1:5060"), "example.test", map[string]string{"alice": "another password"}, 60*time.Second)
		srv, logs := startPhone(t, n.listen("10.0.0.2:5060"))
		r, err := srv.Register(t.Context(), "sip:alice@10.0.0.1:5060", sip.WithRegisterPassword(regPassword))
		if err != nil {
			t.Fatal(err)
		}
		// The first attempt is over long before its first backoff (1 s).
		wctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		err = r.WaitRegistered(wctx)
		cancel()
		if !errors.Is(err, sip.ErrRegisterAuth) {
			t.Fatalf("WaitRegistered: %v, want ErrRegisterAuth", err)
		}
		if !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), regPassword) {
			t.Errorf("error %q: want the status, without the password", err)
		}
		_, challenges1, _ := g.snapshot()
		if challenges1 != 2 {
			t.Errorf("first attempt: %d REGISTERs challenged, want 2 (the first and its refused answer)", challenges1)
		}
		time.Sleep(2 * time.Minute)
		_, challenges, bindings := g.snapshot()
		t.Logf("2 minutes of refused credentials: %d REGISTERs, error %q", challenges, r.State().Err)
		// Backoff 1, 2, 4, 8, 16, 30, 30, 30 s: about 8 attempts, 2 each.
		if challenges%2 != 0 || challenges < 8 || challenges > 24 {
			t.Errorf("%d REGISTERs in 2 minutes, want two per attempt on a backoff (8 to 24)", challenges)
		}
		if bindings != 0 {
			t.Errorf("%d bindings", bindings)
		}
		out := logs.String()
		if c := strings.Count(out, "SIP registration failing"); c != 1 || !strings.Contains(out, "401") {
			t.Errorf("want one warning with the status, got:\n%s", out)
		}
		if strings.Contains(out, regPassword) {
			t.Error("the password is in the log")
		}
		r.Close() // nothing is registered: nothing to remove
		if _, c, _ := g.snapshot(); c != challenges {
			t.Errorf("Close sent %d REGISTERs for a binding never made", c-challenges)
		}
	})
}

// TestRegisterUnregistersWhenContextEnds: the context given to Register
// ending removes the binding (Expires: 0, challenge answered) and ends
// the registration, while the server serves on.
func TestRegisterUnregistersWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet()
		g := startRegistrar(t, n.listen("10.0.0.1:5060"), "example.test", map[string]string{"alice": regPassword}, 60*time.Second)
		srv, _ := startPhone(t, n.listen("10.0.0.2:5060"))
		ctx, cancel := context.WithCancel(t.Context())
		r, err := srv.Register(ctx, "sip:alice@10.0.0.1:5060", sip.WithRegisterPassword(regPassword))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WaitRegistered(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(90 * time.Second)
		cancel()
		select {
		case <-r.Done():
		case <-time.After(6 * time.Second):
			t.Fatal("the registration did not end within the un-REGISTER deadline")
		}
		accepted, _, bindings := g.snapshot()
		if bindings != 0 || accepted[len(accepted)-1].granted != 0 {
			t.Errorf("binding not removed: %d left, last %+v", bindings, accepted[len(accepted)-1])
		}
		if err := r.WaitRegistered(t.Context()); !errors.Is(err, sip.ErrRegistrationEnded) {
			t.Errorf("WaitRegistered after the end: %v", err)
		}
	})
}

// TestRegisterAnswersProxyChallenge: a registrar behind an
// authenticating proxy challenges with 407 and Proxy-Authenticate; the
// answer goes in Proxy-Authorization and the binding is made.
func TestRegisterAnswersProxyChallenge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet()
		g := startRegistrar(t, n.listen("10.0.0.1:5060"), "example.test", map[string]string{"alice": regPassword}, 60*time.Second)
		g.proxy.Store(true)
		srv, _ := startPhone(t, n.listen("10.0.0.2:5060"))
		r, err := srv.Register(t.Context(), "sip:alice@10.0.0.1", sip.WithRegisterPassword(regPassword))
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := r.WaitRegistered(wctx); err != nil {
			t.Fatal(err)
		}
		if _, challenges, bindings := g.snapshot(); challenges != 1 || bindings != 1 {
			t.Errorf("%d challenges, %d bindings: want one 407 answered and the binding made", challenges, bindings)
		}
	})
}

// TestRegisterRefusesBadAOR: an AOR Register cannot use is an error at
// once, naming the form wanted.
func TestRegisterRefusesBadAOR(t *testing.T) {
	srv, err := sip.New(greeter)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, aor := range []string{"pbx.example", "sip:pbx.example", "tel:+15551234", "sip:100@pbx.example;transport=sctp"} {
		if _, err := srv.Register(t.Context(), aor, sip.WithRegisterPassword("x")); err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("Register(%q): %v, want an error saying what is wanted", aor, err)
		}
	}
	if _, err := srv.Register(t.Context(), "sip:100@pbx.example", sip.WithRegisterExpires(0)); err == nil {
		t.Error("an expiry of 0 was accepted")
	}
}
