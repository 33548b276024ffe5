package sip

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo"
	sipmsg "github.com/emiago/sipgo/sip"
)

// handshakeTimeout bounds a TLS client's handshake: a connection that
// never finishes one must not hold a goroutine and a socket for ever.
const handshakeTimeout = 10 * time.Second

// WithPublicAddr sets what the server advertises instead of its
// listeners' addresses, for a server behind NAT: hostPort ("HOST" or
// "HOST:PORT") goes into Contact and Via, and HOST, which must then be an
// IP address, into the SDP's c= and o= lines. A PORT replaces every
// listener's port in Contact; without one each listener's own is kept
// (forward the same ports on the NAT).
func WithPublicAddr(hostPort string) Option {
	return func(c *config) error {
		host, port := hostPort, 0
		if h, p, err := net.SplitHostPort(hostPort); err == nil {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil || n == 0 {
				return fmt.Errorf("sip: public address %q: bad port", hostPort)
			}
			host, port = h, int(n)
		}
		ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
		if err != nil {
			// The SDP's c= line needs an address: a name would be looked
			// up by every caller's phone, if at all.
			return fmt.Errorf("sip: public address %q: want an IP address: %w", hostPort, err)
		}
		c.public, c.publicPort = ip.Unmap(), port
		return nil
	}
}

// WithTLSClientConfig sets the TLS settings of connections Holdline opens
// (calls placed to sips: or ;transport=tls URIs): the roots that verify
// the other side's certificate, and a client certificate if it asks for
// one. Without it the system's roots verify, and the name verified is the
// URI's host.
func WithTLSClientConfig(cfg *tls.Config) Option {
	return func(c *config) error {
		if cfg == nil {
			return errors.New("sip: WithTLSClientConfig: nil config")
		}
		c.tlsClient = cfg.Clone()
		return nil
	}
}

// uriTransport is the transport a request to uri goes over, as the
// server's maps name it: "tls" for sips: (RFC 3261 §26.2) or
// ;transport=tls, "tcp" for ;transport=tcp, else "udp".
func uriTransport(uri sipmsg.Uri) string {
	t := "udp"
	if uri.UriParams != nil {
		if v, ok := uri.UriParams.Get("transport"); ok && v != "" {
			t = strings.ToLower(v)
		}
	}
	if uri.IsEncrypted() && (t == "udp" || t == "tcp") {
		t = "tls"
	}
	return t
}

// transportKey is a request's transport as the server's maps name it:
// "udp", "tcp" or "tls".
func transportKey(req *sipmsg.Request) string { return strings.ToLower(req.Transport()) }

// listening sets the server up for one more listener: its Contact, the
// dialog caches of calls that come in over it, and, for the first, the
// media address and the caches of calls Holdline places.
func (s *Server) listening(network string, local net.Addr) error {
	ap, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return fmt.Errorf("sip: local address: %w", err)
	}
	host := ap.Addr().Unmap()
	if host.IsUnspecified() {
		host = netip.MustParseAddr("127.0.0.1")
	}
	uri := sipmsg.Uri{Scheme: "sip", User: "holdline", Host: host.String(), Port: int(ap.Port())}
	if s.cfg.public.IsValid() {
		uri.Host = s.cfg.public.String()
		if s.cfg.publicPort != 0 {
			uri.Port = s.cfg.publicPort
		}
	}
	switch network {
	case "tcp":
		uri.UriParams = sipmsg.NewParams()
		uri.UriParams.Add("transport", "tcp")
	case "tls":
		uri.Scheme = "sips"
	}
	return s.addTransport(network, sipmsg.ContactHeader{Address: uri}, host, local, nil)
}

// addTransport sets the server up to take calls over network with
// contact: by a listener bound to local, or, with local nil, over the
// connection of a registration (Register, by): the first registration
// over a network the server does not listen on has its connection's
// contact answer the calls, and a new one when its connection is
// replaced; a listener that comes later takes over.
func (s *Server) addTransport(network string, contact sipmsg.ContactHeader, host netip.Addr, local net.Addr, by *Registration) error {
	dialogs := sipgo.NewDialogServerCache(s.client, contact)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.dialogs[network]; ok {
		was := s.contacts[network].Address
		switch {
		case local != nil && s.bound[network] != nil:
			return fmt.Errorf("sip: already serving %s: one listener per transport", network)
		case local == nil && (s.bound[network] != nil || (s.adopted[network] != nil && s.adopted[network] != by)):
			return nil
		case local == nil && was.String() == contact.Address.String():
			s.adopted[network] = by
			return nil
		}
	}
	if !s.cfg.mediaAddr.IsValid() {
		s.cfg.mediaAddr = host
	}
	s.dialogs[network] = dialogs
	s.contacts[network] = contact
	if local == nil {
		// Calls Holdline places keep to its listeners.
		s.adopted[network] = by
		return nil
	}
	s.bound[network] = local
	delete(s.adopted, network)
	if s.placed == nil {
		s.contact = contact
		s.placed = sipgo.NewDialogClientCache(s.client, contact)
	}
	s.once.Do(func() { close(s.serving) })
	return nil
}

// ListenAndServeTCP listens on addr ("host:port") and serves SIP over TCP
// until ctx ends or Close.
func (s *Server) ListenAndServeTCP(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("sip: %w", err)
	}
	return s.ServeTCP(ctx, ln)
}

// ServeTCP serves SIP over ln's connections until ctx ends or Close; it
// closes ln. Responses and the requests Holdline sends in a call (BYE) go
// back over the connection the call came in on.
func (s *Server) ServeTCP(ctx context.Context, ln net.Listener) error {
	if err := s.listening("tcp", ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	return s.serveListener(ctx, ln, s.srv.ServeTCP)
}

// ServeTLS serves SIP over TLS (sips:) on ln's connections, with cfg's
// certificates, until ctx ends or Close; it closes ln. A client whose
// handshake fails is logged with the reason and dropped; the listener
// carries on.
func (s *Server) ServeTLS(ctx context.Context, ln net.Listener, cfg *tls.Config) error {
	if cfg == nil || (len(cfg.Certificates) == 0 && cfg.GetCertificate == nil) {
		ln.Close()
		return errors.New("sip: ServeTLS needs a tls.Config with a certificate")
	}
	if err := s.listening("tls", ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	hl := newHandshakeListener(ln, cfg, s.cfg.log)
	return s.serveListener(ctx, hl, s.srv.ServeTLS)
}

func (s *Server) serveListener(ctx context.Context, ln net.Listener, serve func(net.Listener) error) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	// Close stops the listener too: sipgo's own close does not reach one
	// handed to it.
	stopClose := context.AfterFunc(s.ctx, func() { ln.Close() })
	defer stopClose()
	err := serve(ln)
	if ctx.Err() != nil || s.isClosed() {
		return nil
	}
	return err
}

// handshakeListener hands sipgo only TLS connections whose handshake is
// done: each handshake runs on a goroutine of its own, bounded by
// handshakeTimeout, so that a client that sends garbage or a certificate
// we refuse is logged with the reason and dropped without holding up the
// clients behind it.
type handshakeListener struct {
	net.Listener
	cfg   *tls.Config
	log   *slog.Logger
	ready chan net.Conn
	done  chan struct{}
	err   error // why Accept failed; read once done is closed
}

func newHandshakeListener(ln net.Listener, cfg *tls.Config, log *slog.Logger) *handshakeListener {
	l := &handshakeListener{Listener: ln, cfg: cfg, log: log, ready: make(chan net.Conn), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *handshakeListener) acceptLoop() {
	defer close(l.done)
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.err = err
			return
		}
		go l.handshake(c)
	}
}

func (l *handshakeListener) handshake(c net.Conn) {
	tc := tls.Server(c, l.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	// A listener closed gives up its handshakes under way too.
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := tc.HandshakeContext(ctx); err != nil {
		l.log.Warn("SIP TLS handshake failed: connection dropped", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.done:
		tc.Close()
	}
}

// Accept returns the next connection whose handshake is done.
func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, l.err
	}
}

// connDialog is a call whose requests from Holdline (BYE, REFER) go back
// to where the INVITE came from rather than to the caller's Contact: over
// TCP or TLS the connection the INVITE came in on, as RFC 5923 has it,
// and over UDP the source of a caller behind NAT (rport's address, as
// Kamailio's fix_nated_contact would), whose Contact is a private address
// nobody else can reach.
type connDialog struct{ *sipgo.DialogServerSession }

// inDialog is the dialog a call of d uses: d itself over UDP from a
// caller not behind NAT, whose behaviour stays as it was; else connDialog.
func inDialog(d *sipgo.DialogServerSession, natted bool) dialog {
	if d.InviteRequest.Transport() == "UDP" && !natted {
		return d
	}
	return connDialog{d}
}

// viaConnection sends req to where the INVITE came from, unless a proxy
// asked to stay on the path (Record-Route): then the route decides.
func (d connDialog) viaConnection(req *sipmsg.Request) {
	if len(d.InviteRequest.GetHeaders("Record-Route")) == 0 {
		req.SetDestination(d.InviteRequest.Source())
	}
}

func (d connDialog) Bye(ctx context.Context) error {
	bye := sipmsg.NewRequest(sipmsg.BYE, d.InviteRequest.Contact().Address)
	bye.SetTransport(d.InviteRequest.Transport())
	d.viaConnection(bye)
	return d.WriteBye(ctx, bye)
}

func (d connDialog) TransactionRequest(ctx context.Context, req *sipmsg.Request) (sipmsg.ClientTransaction, error) {
	d.viaConnection(req)
	return d.DialogServerSession.TransactionRequest(ctx, req)
}

// behindNAT says whether the caller of req seems to be behind NAT, the way
// Kamailio's nat_uac_test does: its SDP or Contact names a private address
// (RFC 1918, RFC 6598 shared space, link-local) other than the one its
// request came from.
func behindNAT(req *sipmsg.Request, offer MediaOffer) bool {
	src, err := netip.ParseAddrPort(req.Source())
	if err != nil {
		return false
	}
	differs := func(a netip.Addr) bool { return a.IsValid() && privateAddr(a) && a.Unmap() != src.Addr().Unmap() }
	if differs(offer.Addr) {
		return true
	}
	if ct := req.Contact(); ct != nil {
		if a, err := netip.ParseAddr(strings.Trim(ct.Address.Host, "[]")); err == nil && differs(a) {
			return true
		}
	}
	return false
}

// sharedAddressSpace is RFC 6598's carrier-grade NAT range.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

func privateAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsPrivate() || a.IsLinkLocalUnicast() || sharedAddressSpace.Contains(a)
}
