package sip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	sipmsg "github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"
)

// Defaults of a registration (Register).
const (
	// DefaultRegisterExpires is the binding's lifetime a registration
	// asks for; the registrar's answer decides.
	DefaultRegisterExpires = 300 * time.Second
	// DefaultRegisterBackoff is the first wait after a REGISTER failed;
	// each failure doubles it, up to DefaultRegisterMaxBackoff or half
	// the binding's lifetime, whichever is less.
	DefaultRegisterBackoff    = time.Second
	DefaultRegisterMaxBackoff = 60 * time.Second
	// DefaultRegisterKeepalive is how often a registration over TCP or
	// TLS sends a CRLF keep-alive (RFC 5626 3.5.1) on its connection, and
	// so notices that the connection dropped.
	DefaultRegisterKeepalive = 10 * time.Second
	// registerTimeout bounds one REGISTER transaction with its challenge.
	registerTimeout = 10 * time.Second
	// unregisterTimeout bounds the un-REGISTER at the end.
	unregisterTimeout = 5 * time.Second
	// refreshMargin is how long before the binding expires a refresh is
	// sent at least; a fifth of the lifetime when that is longer.
	refreshMargin = 5 * time.Second
)

var (
	// ErrRegisterAuth: the registrar refused the credentials (a challenge
	// answered was challenged again, or 403).
	ErrRegisterAuth = errors.New("sip: the registrar refused the credentials")
	// ErrRegisterRefused: the registrar answered REGISTER with another
	// final error status.
	ErrRegisterRefused = errors.New("sip: the registrar refused the registration")
	// ErrRegistrationEnded: the registration was ended (Close, its
	// context, or the server's Close).
	ErrRegistrationEnded = errors.New("sip: registration ended")
)

// RegisterOption configures a registration.
type RegisterOption func(*registerConfig) error

type registerConfig struct {
	password   string
	authUser   string
	expires    time.Duration
	backoff    time.Duration
	maxBackoff time.Duration
	keepalive  time.Duration
}

// WithRegisterPassword sets the password the registrar's digest challenge
// is answered with. It is never logged nor put in an error.
func WithRegisterPassword(p string) RegisterOption {
	return func(c *registerConfig) error { c.password = p; return nil }
}

// WithRegisterAuthUser sets the digest user name when it is not the
// AOR's user.
func WithRegisterAuthUser(u string) RegisterOption {
	return func(c *registerConfig) error { c.authUser = u; return nil }
}

// WithRegisterExpires sets the binding lifetime asked for (default
// DefaultRegisterExpires). The registrar may grant less: its answer wins.
func WithRegisterExpires(d time.Duration) RegisterOption {
	return func(c *registerConfig) error {
		if d < time.Second {
			return fmt.Errorf("sip: register expires %v: want a second or more", d)
		}
		c.expires = d
		return nil
	}
}

// WithRegisterBackoff sets the first wait after a failed REGISTER and
// the most it grows to (it is kept below half the granted lifetime too).
func WithRegisterBackoff(first, max time.Duration) RegisterOption {
	return func(c *registerConfig) error {
		if first <= 0 || max < first {
			return fmt.Errorf("sip: register backoff %v..%v", first, max)
		}
		c.backoff, c.maxBackoff = first, max
		return nil
	}
}

// WithRegisterKeepalive sets how often a registration over TCP or TLS
// sends a CRLF keep-alive on its connection (default
// DefaultRegisterKeepalive): a write that fails means the connection
// dropped, and the registration registers again at once.
func WithRegisterKeepalive(d time.Duration) RegisterOption {
	return func(c *registerConfig) error {
		if d <= 0 {
			return fmt.Errorf("sip: register keepalive %v", d)
		}
		c.keepalive = d
		return nil
	}
}

// RegistrationState is a registration's state at a moment.
type RegistrationState struct {
	// Registered: the last REGISTER was accepted.
	Registered bool
	// Expires is the binding's lifetime the registrar granted last.
	Expires time.Duration
	// Err is why the last REGISTER failed, nil when Registered.
	Err error
	// Registers counts the REGISTERs accepted so far.
	Registers int
}

// Registration keeps the server's contact registered at one registrar,
// as Register started it.
type Registration struct {
	s         *Server
	cfg       registerConfig
	aor       sipmsg.Uri // To and From
	registrar sipmsg.Uri // the Request-URI
	network   string     // "udp", "tcp" or "tls"
	user      string     // the digest user
	log       *slog.Logger
	callID    sipmsg.CallIDHeader
	fromTag   string
	cseq      uint32

	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	state   RegistrationState
	changed chan struct{} // closed and replaced when state changes
	err     error         // why it ended
	// contact is the Contact last accepted; stale, contacts registered
	// before (a connection's old port) that the next REGISTER removes.
	contact *sipmsg.ContactHeader
	stale   []*sipmsg.ContactHeader
}

// Register registers the server's contact at the registrar the AOR names
// ("sip:USER@REGISTRAR[:PORT][;transport=udp|tcp|tls]", or "sips:" for
// TLS) and keeps it registered until ctx ends, Close, or the server's
// Close: it answers the registrar's digest challenge (WWW- or
// Proxy-Authenticate, MD5, qop=auth), refreshes before the lifetime the
// registrar granted runs out, and retries with exponential backoff while
// the registrar is down or refuses (logged once at warn when it starts
// failing, once at info when it recovers). Over TCP and TLS the calls the
// registrar sends back come over the registration's own connection and
// are answered on it; a connection that drops is registered again at
// once. At the end the binding is removed (Expires: 0), within a
// deadline.
//
// Register returns at once, with an error only for a bad AOR or options;
// WaitRegistered waits for the first success. Over UDP the server must be
// serving UDP: the REGISTER goes out of its socket, where calls come to.
func (s *Server) Register(ctx context.Context, aor string, opts ...RegisterOption) (*Registration, error) {
	cfg := registerConfig{expires: DefaultRegisterExpires, backoff: DefaultRegisterBackoff,
		maxBackoff: DefaultRegisterMaxBackoff, keepalive: DefaultRegisterKeepalive}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	var uri sipmsg.Uri
	const form = "want sip:USER@REGISTRAR[:PORT][;transport=udp|tcp|tls] or sips:USER@REGISTRAR[:PORT]"
	if err := sipmsg.ParseUri(aor, &uri); err != nil {
		return nil, fmt.Errorf("sip: Register %q: %s: %w", aor, form, err)
	}
	if uri.User == "" || uri.Host == "" || (uri.Scheme != "sip" && uri.Scheme != "sips") {
		return nil, fmt.Errorf("sip: Register %q: %s", aor, form)
	}
	network := "udp"
	if uri.UriParams != nil {
		if t, ok := uri.UriParams.Get("transport"); ok {
			network = strings.ToLower(t)
		}
	}
	if uri.Scheme == "sips" {
		network = "tls"
	}
	switch network {
	case "udp", "tcp", "tls":
	default:
		return nil, fmt.Errorf("sip: Register %q: transport %q: want udp, tcp or tls", aor, network)
	}
	registrar := sipmsg.Uri{Scheme: uri.Scheme, Host: uri.Host, Port: uri.Port}
	if network != "udp" && uri.Scheme != "sips" {
		registrar.UriParams = sipmsg.NewParams()
		registrar.UriParams.Add("transport", network)
	}
	user := cfg.authUser
	if user == "" {
		user = uri.User
	}
	r := &Registration{
		s: s, cfg: cfg, network: network, user: user, registrar: registrar,
		aor:     sipmsg.Uri{Scheme: uri.Scheme, User: uri.User, Host: uri.Host},
		callID:  sipmsg.CallIDHeader(sipmsg.GenerateTagN(32)),
		fromTag: sipmsg.GenerateTagN(16),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	r.log = s.cfg.log.With("aor", r.aor.String(), "registrar", registrar.HostPort(), "transport", network)
	ctx, r.cancel = context.WithCancel(ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		r.cancel()
		return nil, fmt.Errorf("sip: Register: %w", ErrRegistrationEnded)
	}
	s.regs[r] = struct{}{}
	s.mu.Unlock()
	go r.run(ctx)
	return r, nil
}

// Close ends the registration: it removes the binding (within a
// deadline) and returns once that is done.
func (r *Registration) Close() error {
	r.cancel()
	<-r.done
	return nil
}

// Done is closed once the registration has ended and its binding is
// removed (or the attempt to remove it gave up).
func (r *Registration) Done() <-chan struct{} { return r.done }

// State returns the registration's state now.
func (r *Registration) State() RegistrationState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// WaitRegistered waits until the registrar has accepted a REGISTER, or
// ctx ends (the last failure is then in the error), or the registration
// ends.
func (r *Registration) WaitRegistered(ctx context.Context) error {
	for {
		r.mu.Lock()
		st, ch, ended := r.state, r.changed, r.err
		r.mu.Unlock()
		switch {
		case st.Registered:
			return nil
		case ended != nil:
			return ended
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if st.Err != nil {
				return fmt.Errorf("%w (last: %w)", ctx.Err(), st.Err)
			}
			return ctx.Err()
		}
	}
}

func (r *Registration) setState(f func(*RegistrationState)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.state)
	close(r.changed)
	r.changed = make(chan struct{})
}

// endRegistrations ends the server's registrations over networks (all
// of them without any), each removing its binding, and waits for them.
func (s *Server) endRegistrations(networks ...string) {
	s.mu.Lock()
	regs := make([]*Registration, 0, len(s.regs))
	for r := range s.regs {
		if len(networks) == 0 || slices.Contains(networks, r.network) {
			regs = append(regs, r)
		}
	}
	s.mu.Unlock()
	for _, r := range regs {
		r.cancel()
	}
	for _, r := range regs {
		<-r.done
	}
}

// run registers, refreshes and retries until ctx ends, then removes the
// binding.
func (r *Registration) run(ctx context.Context) {
	defer close(r.done)
	defer func() {
		r.s.mu.Lock()
		delete(r.s.regs, r)
		if r.s.adopted[r.network] == r {
			delete(r.s.adopted, r.network) // another registration's next REGISTER takes over
		}
		r.s.mu.Unlock()
	}()
	if r.network == "udp" {
		// A ServeUDP started just before may not have set up yet.
		t := time.NewTimer(serveWait)
		for !r.s.listenerUp("udp") {
			select {
			case <-ctx.Done():
			case <-t.C:
			case <-time.After(10 * time.Millisecond):
				continue
			}
			break
		}
		t.Stop()
	}
	backoff := r.cfg.backoff
	granted := r.cfg.expires
	failing, first := false, true
	for ctx.Err() == nil {
		got, conn, err := r.register(ctx, r.cfg.expires)
		if ctx.Err() != nil {
			break
		}
		var wait time.Duration
		if err != nil {
			wait = backoff
			if !failing {
				r.log.Warn("SIP registration failing: retrying with backoff", "err", err, "retry_in", wait)
			} else {
				r.log.Debug("SIP registration still failing", "err", err, "retry_in", wait)
			}
			failing = true
			r.setState(func(st *RegistrationState) { st.Registered, st.Err = false, err })
			// Below half the lifetime, so that a registrar back from an
			// outage has us again long before a binding would run out.
			backoff = min(backoff*2, r.cfg.maxBackoff, max(granted/2, r.cfg.backoff))
		} else {
			granted = got
			switch {
			case failing:
				r.log.Info("SIP registration recovered", "expires", got)
			case first:
				r.log.Info("SIP registered", "expires", got)
			default:
				r.log.Debug("SIP registration refreshed", "expires", got)
			}
			failing, first, backoff = false, false, r.cfg.backoff
			r.setState(func(st *RegistrationState) {
				st.Registered, st.Err, st.Expires = true, nil, got
				st.Registers++
			})
			wait = refreshAfter(got)
		}
		if !r.sleep(ctx, wait, conn) {
			break
		}
	}
	r.unregister()
	r.mu.Lock()
	r.err = ErrRegistrationEnded
	r.mu.Unlock()
	r.setState(func(st *RegistrationState) { st.Registered = false })
}

// refreshAfter is when to refresh a binding granted for d: a fifth of d,
// and at least refreshMargin, before it runs out (at half of a binding
// shorter than twice the margin).
func refreshAfter(d time.Duration) time.Duration {
	margin := max(d/5, refreshMargin)
	if margin >= d/2 {
		return d / 2
	}
	return d - margin
}

// sleep waits d, or until ctx ends (false), or until conn, the
// connection the registration went over, drops: keep-alives are written
// on it every keepalive.
func (r *Registration) sleep(ctx context.Context, d time.Duration, conn sipmsg.Connection) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	var tick <-chan time.Time
	w, ok := conn.(io.Writer)
	if ok && r.network != "udp" {
		k := time.NewTicker(r.cfg.keepalive)
		defer k.Stop()
		tick = k.C
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-tick:
			// RFC 5626 3.5.1: a double CRLF, which the registrar answers
			// with one (sipgo reads it as the keep-alive it is).
			if _, err := w.Write([]byte("\r\n\r\n")); err != nil {
				r.log.Info("SIP registration's connection dropped: registering again", "err", err)
				return true
			}
		}
	}
}

// contactFor is the Contact to register: the server's own for the
// transport when it listens on it, else, over TCP or TLS, the local
// address of the connection to the registrar (which calls then come back
// over).
func (r *Registration) contactFor(ctx context.Context, req *sipmsg.Request, removing bool) (*sipmsg.ContactHeader, error) {
	r.s.mu.Lock()
	h, listening := r.s.contacts[r.network]
	bound := r.s.bound[r.network]
	public := r.s.cfg.public.IsValid()
	r.s.mu.Unlock()
	if listening && bound != nil {
		up := r.network != "udp" || r.s.listenerUp("udp")
		if !up && !removing {
			return nil, fmt.Errorf("sip: REGISTER over UDP: %w", ErrNotServing)
		}
		c := h.Clone()
		c.Address.User = r.aor.User
		// An un-REGISTER after the listener closed goes out of a socket
		// of its own: the binding goes all the same.
		if r.network == "udp" && up {
			// Out of the listener's socket, where the calls come to.
			ap, err := netip.ParseAddrPort(bound.String())
			if err != nil {
				return nil, fmt.Errorf("sip: local address: %w", err)
			}
			req.Laddr = sipmsg.Addr{IP: net.IP(ap.Addr().AsSlice()), Port: int(ap.Port())}
			if !public && ap.Addr().IsUnspecified() {
				// A wildcard listener: name the address the registrar is
				// reached from.
				if ip, ok := routeTo(req.Destination()); ok {
					c.Address.Host = ip.String()
				}
			}
		}
		return c, nil
	}
	if r.network == "udp" {
		return nil, fmt.Errorf("sip: REGISTER over UDP: %w: serve UDP first", ErrNotServing)
	}
	conn, err := r.s.ua.TransportLayer().ClientRequestConnection(ctx, req)
	if err != nil {
		return nil, err
	}
	local := conn.LocalAddr().String()
	_, _ = conn.TryClose() // the pool keeps it
	ap, err := netip.ParseAddrPort(local)
	if err != nil {
		return nil, fmt.Errorf("sip: local address: %w", err)
	}
	uri := sipmsg.Uri{Scheme: "sip", User: r.aor.User, Host: ap.Addr().Unmap().String(), Port: int(ap.Port())}
	if r.network == "tls" && r.registrar.Scheme == "sips" {
		uri.Scheme = "sips"
	} else {
		uri.UriParams = sipmsg.NewParams()
		uri.UriParams.Add("transport", r.network)
	}
	c := &sipmsg.ContactHeader{Address: uri}
	// Calls that come back over the connection are answered with it.
	if err := r.s.addTransport(r.network, *c, ap.Addr().Unmap(), nil, r); err != nil {
		return nil, err
	}
	return c, nil
}

// listenerUp says whether the SIP stack reads the network's listener
// yet: a request sent out of it before would go out of a new socket.
func (s *Server) listenerUp(network string) bool {
	s.mu.Lock()
	b := s.bound[network]
	s.mu.Unlock()
	if b == nil {
		return false
	}
	c, err := s.ua.TransportLayer().GetConnection(network, b.String())
	if err != nil || c == nil {
		return false
	}
	_, _ = c.TryClose() // GetConnection took a reference
	return true
}

// routeTo is the local address the kernel would send to hostPort from.
func routeTo(hostPort string) (netip.Addr, bool) {
	c, err := net.Dial("udp", hostPort) // no packet is sent
	if err != nil {
		return netip.Addr{}, false
	}
	defer c.Close()
	ap, err := netip.ParseAddrPort(c.LocalAddr().String())
	return ap.Addr().Unmap(), err == nil
}

// newRequest builds a REGISTER asking for expires (0 removes), with the
// registration's Call-ID, From tag and the next CSeq.
func (r *Registration) newRequest(ctx context.Context, expires time.Duration) (*sipmsg.Request, *sipmsg.ContactHeader, error) {
	req := sipmsg.NewRequest(sipmsg.REGISTER, r.registrar)
	req.SetTransport(strings.ToUpper(r.network))
	from := &sipmsg.FromHeader{Address: r.aor, Params: sipmsg.NewParams()}
	from.Params.Add("tag", r.fromTag)
	req.AppendHeader(from)
	req.AppendHeader(&sipmsg.ToHeader{Address: r.aor, Params: sipmsg.NewParams()})
	callID := r.callID
	req.AppendHeader(&callID)
	r.cseq++
	req.AppendHeader(&sipmsg.CSeqHeader{SeqNo: r.cseq, MethodName: sipmsg.REGISTER})
	if err := sipgo.ClientRequestBuild(r.s.client, req); err != nil {
		return nil, nil, err
	}
	contact, err := r.contactFor(ctx, req, expires == 0)
	if err != nil {
		return nil, nil, err
	}
	mine := contact
	secs := strconv.Itoa(int(expires / time.Second))
	r.mu.Lock()
	stale := append([]*sipmsg.ContactHeader(nil), r.stale...)
	if r.contact != nil && !sameContact(r.contact, contact) && !containsContact(stale, r.contact) {
		stale = append(stale, r.contact)
	}
	r.mu.Unlock()
	if expires == 0 {
		contact = contact.Clone()
		contact.Params = sipmsg.NewParams()
		contact.Params.Add("expires", "0")
	}
	req.AppendHeader(contact)
	for _, c := range stale {
		if sameContact(c, contact) {
			continue
		}
		old := c.Clone()
		old.Params = sipmsg.NewParams()
		old.Params.Add("expires", "0")
		req.AppendHeader(old)
	}
	req.AppendHeader(sipmsg.NewHeader("Expires", secs))
	req.AppendHeader(sipmsg.NewHeader("Allow", allowedMethods))
	req.SetBody(nil)
	return req, mine, nil
}

func sameContact(a, b *sipmsg.ContactHeader) bool {
	return strings.EqualFold(a.Address.Host, b.Address.Host) && a.Address.Port == b.Address.Port &&
		a.Address.User == b.Address.User && a.Address.Scheme == b.Address.Scheme
}

func containsContact(list []*sipmsg.ContactHeader, c *sipmsg.ContactHeader) bool {
	for _, x := range list {
		if sameContact(x, c) {
			return true
		}
	}
	return false
}

// transact sends req and returns the final response and the connection
// it went over.
func (r *Registration) transact(ctx context.Context, req *sipmsg.Request) (*sipmsg.Response, sipmsg.Connection, error) {
	tx, err := r.s.client.TransactionRequest(ctx, req, func(*sipgo.Client, *sipmsg.Request) error { return nil })
	if err != nil {
		return nil, nil, err
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				continue
			}
			var conn sipmsg.Connection
			if c, ok := tx.(interface{ Connection() sipmsg.Connection }); ok {
				conn = c.Connection()
			}
			return res, conn, nil
		case <-tx.Done():
			if err := tx.Err(); err != nil {
				return nil, nil, err
			}
			return nil, nil, errors.New("transaction ended without an answer")
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// register sends one REGISTER asking for expires, answers its challenge,
// and returns the lifetime granted and the connection it went over.
func (r *Registration) register(ctx context.Context, expires time.Duration) (time.Duration, sipmsg.Connection, error) {
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	what := "REGISTER"
	if expires == 0 {
		what = "un-REGISTER"
	}
	var auth sipmsg.Header // the last answer to a challenge
	answered, asked := 0, expires
	for {
		req, mine, err := r.newRequest(ctx, asked)
		if err != nil {
			return 0, nil, fmt.Errorf("sip: %s %s: %w", what, r.aor.String(), err)
		}
		if auth != nil {
			req.AppendHeader(auth)
		}
		res, conn, err := r.transact(ctx, req)
		if err != nil {
			return 0, nil, fmt.Errorf("sip: %s %s at %s: %w", what, r.aor.String(), r.registrar.HostPort(), err)
		}
		status := fmt.Sprintf("%d %s", res.StatusCode, res.Reason)
		switch code := res.StatusCode; {
		case code >= 200 && code < 300:
			if expires == 0 {
				return 0, conn, nil
			}
			got, err := r.granted(mine, res, asked)
			if err != nil {
				return 0, conn, err
			}
			r.mu.Lock()
			r.contact, r.stale = mine, nil
			r.mu.Unlock()
			return got, conn, nil
		case code == 401 || code == 407:
			name := "WWW-Authenticate"
			if code == 407 {
				name = "Proxy-Authenticate"
			}
			h := res.GetHeader(name)
			if h == nil {
				return 0, conn, fmt.Errorf("%w: %s answered %s without %s", ErrRegisterRefused, r.registrar.HostPort(), status, name)
			}
			chal, err := digest.ParseChallenge(h.Value())
			if err != nil {
				return 0, conn, fmt.Errorf("%w: %s's challenge: %v", ErrRegisterRefused, r.registrar.HostPort(), err)
			}
			// A challenge to an answer is a refusal, unless it only says
			// the nonce went stale; either way twice is the limit.
			if (auth != nil && !chal.Stale) || answered == 2 {
				return 0, conn, fmt.Errorf("%w: %s answered %s to %s's credentials for %s", ErrRegisterAuth, r.registrar.HostPort(), status, r.user, what)
			}
			if r.cfg.password == "" {
				return 0, conn, fmt.Errorf("%w: %s answered %s and no password is set for %s", ErrRegisterAuth, r.registrar.HostPort(), status, r.user)
			}
			chal.Algorithm = strings.ToUpper(chal.Algorithm)
			cred, err := digest.Digest(chal, digest.Options{Method: "REGISTER", URI: req.Recipient.String(), Username: r.user, Password: r.cfg.password})
			if err != nil {
				return 0, conn, fmt.Errorf("%w: %s's challenge: %v", ErrRegisterRefused, r.registrar.HostPort(), err)
			}
			answered++
			hname := "Authorization"
			if code == 407 {
				hname = "Proxy-Authorization"
			}
			auth = sipmsg.NewHeader(hname, cred.String())
		case code == 403:
			return 0, conn, fmt.Errorf("%w: %s answered %s to %s", ErrRegisterAuth, r.registrar.HostPort(), status, r.user)
		case code == 423 && asked > 0:
			// Interval Too Brief: ask for the registrar's minimum, once.
			h := res.GetHeader("Min-Expires")
			n, err := 0, errors.New("no Min-Expires")
			if h != nil {
				n, err = strconv.Atoi(strings.TrimSpace(h.Value()))
			}
			least := time.Duration(n) * time.Second
			if err != nil || least <= asked {
				return 0, conn, fmt.Errorf("%w: %s answered %s", ErrRegisterRefused, r.registrar.HostPort(), status)
			}
			asked = least
		default:
			return 0, conn, fmt.Errorf("%w: %s answered %s to %s", ErrRegisterRefused, r.registrar.HostPort(), status, what)
		}
	}
}

// granted reads the lifetime the registrar granted from its 2xx: our
// Contact's expires parameter, else the Expires header, else what was
// asked.
func (r *Registration) granted(mine *sipmsg.ContactHeader, res *sipmsg.Response, asked time.Duration) (time.Duration, error) {
	got := time.Duration(-1)
	for _, h := range res.GetHeaders("Contact") {
		c, ok := h.(*sipmsg.ContactHeader)
		if !ok || !sameContact(c, mine) {
			continue
		}
		if v, ok := c.Params.Get("expires"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				got = time.Duration(n) * time.Second
			}
		}
	}
	if got < 0 {
		if h := res.GetHeader("Expires"); h != nil {
			if n, err := strconv.Atoi(strings.TrimSpace(h.Value())); err == nil {
				got = time.Duration(n) * time.Second
			}
		}
	}
	if got < 0 {
		got = asked
	}
	if got <= 0 {
		return 0, fmt.Errorf("%w: %s accepted the REGISTER but granted no time", ErrRegisterRefused, r.registrar.HostPort())
	}
	return got, nil
}

// unregister removes the binding, answering the challenge, within
// unregisterTimeout.
func (r *Registration) unregister() {
	r.mu.Lock()
	registered := r.contact != nil
	r.mu.Unlock()
	if !registered {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), unregisterTimeout)
	defer cancel()
	if _, _, err := r.register(ctx, 0); err != nil {
		r.log.Warn("SIP un-REGISTER failed: the binding stays until it expires", "err", err)
		return
	}
	r.log.Info("SIP unregistered")
}
