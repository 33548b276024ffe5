package sip

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	sipmsg "github.com/emiago/sipgo/sip"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/dtmf"
	"github.com/holdline/holdline/runtime"
)

// AgentFunc is runtime.AgentFunc, the one type every transport takes.
type AgentFunc = runtime.AgentFunc

// Defaults of a Server.
const (
	// DefaultRTPTimeout hangs up a call whose caller sent no RTP for this
	// long (while the call is not on hold).
	DefaultRTPTimeout = 30 * time.Second
	// DefaultMaxCalls is how many calls a Server takes at once; more get
	// 486 Busy Here.
	DefaultMaxCalls = calls.DefaultMaxCalls
	// byeTimeout bounds the BYE Holdline sends when it hangs up.
	byeTimeout = 5 * time.Second
	// pushTimeout bounds a handoff into the session from the media path.
	pushTimeout = 2 * time.Second
)

type config struct {
	log        *slog.Logger
	allow      []netip.Prefix
	rtpTimeout time.Duration
	mediaAddr  netip.Addr
	symmetric  bool
	realtime   bool
	auth       *digestAuth
	redial     time.Duration // WithRedialWindow
	public     netip.Addr    // WithPublicAddr: advertised instead of the listeners'
	publicPort int           // WithPublicAddr's port, 0 for each listener's own
	ports      *portRange    // WithRTPPorts, nil for ephemeral ports
	tlsClient  *tls.Config   // WithTLSClientConfig: for calls placed over TLS
	hold       *holdAudio    // WithHoldAudio
	srtp       SRTPMode      // WithSRTP
	frontDoor  string        // WithFrontDoor: where a draining host moves calls
	// host runs the calls (WithHost); without it the server makes one
	// from hostOpts, and closes it.
	host     *calls.Host
	hostOpts []calls.Option
}

// WithHost runs the server's calls on h, a host other transports share
// (serve's HTTP API then reaches phone calls too), and the caller closes h
// after the server. The host's own settings (WithMaxCalls, WithStore,
// WithSessionOptions) are then h's.
func WithHost(h *calls.Host) Option {
	return func(c *config) error { c.host = h; return nil }
}

// hostOption passes o to the host the server makes.
func hostOption(o calls.Option) Option {
	return func(c *config) error { c.hostOpts = append(c.hostOpts, o); return nil }
}

// Option configures a Server.
type Option func(*config) error

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) error { c.log = l; return nil } }

// WithAllow accepts INVITEs only from these networks (a trunk's
// addresses); others get 403. With none, any source is accepted.
func WithAllow(prefixes ...netip.Prefix) Option {
	return func(c *config) error { c.allow = append(c.allow, prefixes...); return nil }
}

// WithRTPTimeout sets how long a caller may send no RTP before the call is
// hung up (default DefaultRTPTimeout; 0 never).
func WithRTPTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("sip: RTP timeout %v", d)
		}
		c.rtpTimeout = d
		return nil
	}
}

// WithMaxCalls sets how many calls run at once (calls.WithMaxCalls;
// default DefaultMaxCalls); more get 486 Busy Here.
func WithMaxCalls(n int) Option { return hostOption(calls.WithMaxCalls(n)) }

// WithMediaAddr sets the address RTP is received on and announced in SDP
// (default: the address SIP listens on, or 127.0.0.1 when that is a
// wildcard).
func WithMediaAddr(a netip.Addr) Option {
	return func(c *config) error { c.mediaAddr = a; return nil }
}

// WithSymmetricRTP sends each call's RTP to wherever the caller's RTP
// comes from (RFC 4961) rather than to the address in its SDP: for callers
// behind a NAT that rewrites neither.
func WithSymmetricRTP() Option { return func(c *config) error { c.symmetric = true; return nil } }

// WithRealtimePacing runs the thread that sends every call's RTP at
// real-time priority (SCHED_FIFO), as media servers run their timing
// threads, so that packets leave on time however busy the machine is. It
// needs root or CAP_SYS_NICE; without them the server logs a warning and
// paces at normal priority. Linux only.
func WithRealtimePacing() Option { return func(c *config) error { c.realtime = true; return nil } }

// WithObserver has fn make an observer of every call's events (tracing):
// calls.WithObserver.
func WithObserver(fn calls.ObserverFunc) Option { return hostOption(calls.WithObserver(fn)) }

// WithSessionOptions adds options to every call's runtime.Session.
func WithSessionOptions(opts ...runtime.Option) Option {
	return hostOption(calls.WithSessionOptions(opts...))
}

// Server answers SIP calls with an agent: each INVITE with an acceptable
// offer gets a session of its own, with Holdline's RTP leg as its line.
type Server struct {
	cfg     config
	host    *calls.Host
	ownHost bool // made by New: Close closes it

	ua     *sipgo.UserAgent
	srv    *sipgo.Server
	client *sipgo.Client

	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// dialogs are the calls that came in, by transport ("udp", "tcp",
	// "tls"): each transport's responses carry a Contact of its own.
	dialogs  map[string]*sipgo.DialogServerCache
	contacts map[string]sipmsg.ContactHeader // by transport, as dialogs
	bound    map[string]net.Addr             // the listeners' local addresses, by transport
	regs     map[*Registration]struct{}      // registrations running (Register)
	adopted  map[string]*Registration        // by transport: whose connection answers calls without a listener
	placed   *sipgo.DialogClientCache        // calls Holdline places; set by the first Serve
	serving  chan struct{}                   // closed once a Serve has set the above
	once     sync.Once
	contact  sipmsg.ContactHeader // the first listener's: for calls Holdline places
	calls    map[string]*call     // by Call-ID
	persons  map[string]*person   // warm transfers' second legs, by Call-ID
	closed   bool
	pacer    *pacer // every call's RTP goes out on its schedule
	wg       sync.WaitGroup
}

// New returns a Server that runs newAgent's agent on every call.
func New(newAgent AgentFunc, opts ...Option) (*Server, error) {
	if newAgent == nil {
		return nil, errors.New("sip: New needs an AgentFunc")
	}
	cfg := config{log: slog.Default(), rtpTimeout: DefaultRTPTimeout, redial: DefaultRedialWindow, hold: &holdAudio{}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	host, own := cfg.host, false
	switch {
	case host != nil && len(cfg.hostOpts) > 0:
		return nil, errors.New("sip: with WithHost, give the limits, store and session options to calls.New")
	case host == nil:
		var err error
		if host, err = calls.New(newAgent, append([]calls.Option{calls.WithLogger(cfg.log)}, cfg.hostOpts...)...); err != nil {
			return nil, fmt.Errorf("sip: %w", err)
		}
		own = true
	}
	host.AddTransport(kind)
	uaOpts := []sipgo.UserAgentOption{sipgo.WithUserAgent("Holdline")}
	if cfg.tlsClient != nil {
		uaOpts = append(uaOpts, sipgo.WithUserAgenTLSConfig(cfg.tlsClient))
	}
	ua, err := sipgo.NewUA(uaOpts...)
	if err != nil {
		return nil, fmt.Errorf("sip: %w", err)
	}
	srv, err := sipgo.NewServer(ua, sipgo.WithServerLogger(cfg.log))
	if err != nil {
		ua.Close()
		return nil, fmt.Errorf("sip: %w", err)
	}
	copts := []sipgo.ClientOption{sipgo.WithClientLogger(cfg.log)}
	if cfg.public.IsValid() {
		// The Via of requests Holdline sends (BYE, REFER) names where
		// their responses can reach it.
		copts = append(copts, sipgo.WithClientHostname(cfg.public.String()))
		if cfg.publicPort != 0 {
			copts = append(copts, sipgo.WithClientPort(cfg.publicPort))
		}
	}
	client, err := sipgo.NewClient(ua, copts...)
	if err != nil {
		ua.Close()
		return nil, fmt.Errorf("sip: %w", err)
	}
	p, err := newPacer(media.DefaultFrameDuration, cfg.realtime, cfg.log)
	if err != nil {
		ua.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, host: host, ownHost: own, ua: ua, srv: srv, client: client, calls: map[string]*call{}, persons: map[string]*person{},
		dialogs: map[string]*sipgo.DialogServerCache{}, contacts: map[string]sipmsg.ContactHeader{}, serving: make(chan struct{}), pacer: p}
	s.bound, s.regs, s.adopted = map[string]net.Addr{}, map[*Registration]struct{}{}, map[string]*Registration{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	srv.OnInvite(byTheRFC(s.onInvite))
	srv.OnAck(byTheRFC(s.onAck))
	srv.OnBye(byTheRFC(s.onBye))
	srv.OnCancel(byTheRFC(s.onCancel))
	srv.OnInfo(byTheRFC(s.onInfo))
	srv.OnRefer(byTheRFC(s.onRefer))
	srv.OnOptions(byTheRFC(s.onOptions))
	srv.OnNotify(byTheRFC(s.onNotify))
	srv.OnNoRoute(byTheRFC(s.onUnknown))
	return s, nil
}

// ListenAndServeUDP listens on addr ("host:port") and serves until ctx
// ends or Close.
func (s *Server) ListenAndServeUDP(ctx context.Context, addr string) error {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("sip: %w", err)
	}
	return s.ServeUDP(ctx, conn)
}

// ServeUDP serves SIP over conn until ctx ends or Close; it closes conn,
// once the registrations over UDP (Register) have removed their bindings.
func (s *Server) ServeUDP(ctx context.Context, conn net.PacketConn) error {
	if err := s.listening("udp", conn.LocalAddr()); err != nil {
		conn.Close()
		return err
	}
	// Registrations over UDP remove their bindings out of the socket
	// before it closes.
	stop := context.AfterFunc(ctx, func() { s.endRegistrations("udp"); conn.Close() })
	defer stop()
	err := s.srv.ServeUDP(newGuardConn(conn, s.cfg.log))
	if ctx.Err() != nil || s.isClosed() {
		return nil
	}
	return err
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Calls returns how many calls are in progress.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// SendJitter returns the q-quantile (0.99 for p99) of how far the
// spacing of the RTP packets this server sent strayed from 20 ms, in steps
// of 0.1 ms, and how many spacings were counted.
func (s *Server) SendJitter(q float64) (time.Duration, uint64) {
	return quantile(s.pacer.histogram(), q)
}

// quantile returns the value below which q of a histogram's counts fell,
// the histogram counting in 0.1 ms steps, and the total count.
func quantile(hist []uint64, q float64) (time.Duration, uint64) {
	var total uint64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return 0, 0
	}
	want := uint64(q * float64(total))
	var seen uint64
	for i, n := range hist {
		seen += n
		if seen > want || seen == total {
			return time.Duration(i+1) * 100 * time.Microsecond, total
		}
	}
	return time.Duration(len(hist)) * 100 * time.Microsecond, total
}

// Close hangs up every call (BYE), waits for them to end, ends the
// registrations (un-REGISTER), and stops serving.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.endRegistrations()
	s.cancel()
	s.wg.Wait()
	s.pacer.free()
	if s.ownHost {
		_ = s.host.Close()
	}
	return s.ua.Close()
}

// Host is the host the server's calls run on.
func (s *Server) Host() *calls.Host { return s.host }

// contactURI is the server's own SIP URI.
func (s *Server) contactURI() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.contact.Address.String()
}

// contactOf is the Contact of Holdline's side of c: the one of the
// transport c came in over.
func (s *Server) contactOf(c *call) *sipmsg.ContactHeader {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.contact != nil {
		h := *c.contact
		return &h
	}
	if h, ok := s.contacts[c.transport]; ok {
		return &h
	}
	h := s.contact
	return &h
}

func (s *Server) allowed(req *sipmsg.Request) bool {
	if len(s.cfg.allow) == 0 {
		return true
	}
	src, err := netip.ParseAddrPort(req.Source())
	if err != nil {
		return false
	}
	for _, p := range s.cfg.allow {
		if p.Contains(src.Addr().Unmap()) {
			return true
		}
	}
	return false
}

// respond answers req statelessly with a status and, for errors, a
// Warning header that says why (RFC 3261 20.43).
func respond(tx sipmsg.ServerTransaction, req *sipmsg.Request, code int, reason, why string) {
	res := sipmsg.NewResponseFromRequest(req, code, reason, nil)
	if why != "" {
		res.AppendHeader(sipmsg.NewHeader("Warning", fmt.Sprintf("399 holdline %q", why)))
	}
	_ = tx.Respond(res)
}

// refuseOffer answers an offer ParseOffer refused: 488 when it has no
// audio, 400 when it is malformed.
func refuseOffer(tx sipmsg.ServerTransaction, req *sipmsg.Request, err error) {
	if errors.Is(err, ErrNoAudio) {
		respond(tx, req, 488, "Not Acceptable Here", err.Error())
		return
	}
	respond(tx, req, 400, "Bad Request", err.Error())
}

// mediaType is the request body's media type, lower case without
// parameters ("" without a Content-Type).
func mediaType(req *sipmsg.Request) string {
	h := req.ContentType()
	if h == nil {
		return ""
	}
	t, _, _ := strings.Cut(h.Value(), ";")
	return strings.ToLower(strings.TrimSpace(t))
}

func (s *Server) onInvite(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	if to := req.To(); to != nil {
		if _, ok := to.Params.Get("tag"); ok {
			s.onReinvite(req, tx)
			return
		}
	}
	if !s.allowed(req) {
		respond(tx, req, 403, "Forbidden", "source not allowed")
		return
	}
	if a := s.cfg.auth; a != nil {
		h := ""
		if ah := req.GetHeader("Authorization"); ah != nil {
			h = ah.Value()
		}
		switch v := a.check(string(req.Method), h); v {
		case authChallenge, authStale:
			res := sipmsg.NewResponseFromRequest(req, 401, "Unauthorized", nil)
			res.AppendHeader(sipmsg.NewHeader("WWW-Authenticate", a.challenge(v == authStale)))
			_ = tx.Respond(res)
			return
		case authForbidden:
			respond(tx, req, 403, "Forbidden", "wrong credentials")
			return
		}
	}
	s.mu.Lock()
	busy, closed, dialogs := s.host.Len() >= s.host.MaxCalls(), s.closed, s.dialogs[transportKey(req)]
	s.mu.Unlock()
	switch {
	case closed:
		respond(tx, req, 503, "Service Unavailable", "shutting down")
		return
	case s.host.Draining():
		refuseDraining(tx, req)
		return
	case busy:
		respond(tx, req, 486, "Busy Here", "every line is taken")
		return
	case dialogs == nil:
		respond(tx, req, 503, "Service Unavailable", "not serving "+req.Transport())
		return
	}
	if len(req.Body()) == 0 {
		respond(tx, req, 488, "Not Acceptable Here", "an SDP offer is required in the INVITE")
		return
	}
	if ct := mediaType(req); ct != "" && ct != "application/sdp" {
		respond(tx, req, 415, "Unsupported Media Type", "the body must be application/sdp")
		return
	}
	offer, err := ParseOffer(req.Body())
	if err != nil {
		refuseOffer(tx, req, err)
		return
	}
	chosen, err := Negotiate(offer, supportedCodecs)
	if err != nil {
		respond(tx, req, 488, "Not Acceptable Here", err.Error())
		return
	}
	sec, err := s.sdesAnswer(offer, nil)
	if err != nil {
		respond(tx, req, 488, "Not Acceptable Here", err.Error())
		return
	}
	dlg, err := dialogs.ReadInvite(req, tx)
	if err != nil {
		respond(tx, req, 400, "Bad Request", err.Error())
		return
	}
	defer dlg.Close()
	_ = dlg.Respond(sipmsg.StatusTrying, "Trying", nil)

	conn, err := s.listenRTP()
	if errors.Is(err, ErrRTPPortsExhausted) {
		s.cfg.log.Warn("call refused", "call_id", callID(req), "err", err)
		_ = dlg.Respond(503, "Service Unavailable", nil,
			sipmsg.NewHeader("Retry-After", rtpRetryAfter),
			sipmsg.NewHeader("Warning", fmt.Sprintf("399 holdline %q", strings.TrimPrefix(err.Error(), "sip: "))))
		return
	}
	if err != nil {
		s.cfg.log.Error("call refused", "call_id", callID(req), "err", err)
		_ = dlg.Respond(500, "Server Internal Error", nil)
		return
	}
	line, _ := lineKey(req)
	resumed, origin := s.takeOver(req), calls.PutThrough
	if resumed == nil {
		var unclaim func()
		resumed, unclaim = s.pickUp(line)
		defer unclaim()
		origin = calls.Redialled
	}
	if resumed == nil {
		origin = calls.Fresh
	}
	natted := behindNAT(req, offer)
	c, err := s.newCall(callID(req), inDialog(dlg, natted), conn, offer, chosen, mrand.Uint64()>>1, 1, resumed, origin)
	switch {
	case errors.Is(err, calls.ErrFull):
		_ = dlg.Respond(486, "Busy Here", nil)
		return
	case errors.Is(err, calls.ErrClosed):
		_ = dlg.Respond(503, "Service Unavailable", nil)
		return
	case errors.Is(err, calls.ErrDraining):
		// The drain began since the check above: the handoff token taken
		// goes back, for the worker the proxy tries next.
		if tok := handoffToken(req); tok != "" && origin == calls.PutThrough {
			s.host.GiveBack(s.ctx, tok, resumed)
		}
		_ = dlg.Respond(503, "Service Unavailable", nil, sipmsg.NewHeader("Retry-After", drainRetryAfter))
		return
	case err != nil:
		s.cfg.log.Error("call refused", "call_id", callID(req), "err", err)
		_ = dlg.Respond(500, "Server Internal Error", nil)
		return
	}
	c.leg.sec.Store(sec)
	if !s.add(c) {
		c.close("the server closed")
		_ = dlg.Respond(503, "Service Unavailable", nil)
		return
	}
	defer s.wg.Done()
	defer s.remove(c)
	if s.cfg.redial > 0 {
		c.line = line
	}
	if ct := req.Contact(); ct != nil {
		c.target = ct.Address
	}
	c.takesRefer = takesRefer(req)
	c.transport = transportKey(req)
	if natted {
		// A caller behind NAT gets its media where its packets come from,
		// not where its SDP's private address says.
		c.leg.symmetric = true
	}
	c.canReplace = takesReplaces(req)
	c.serve(s.ctx, func() error { return dlg.RespondSDP(c.answerSDP(false)) })
}

// add takes c among the server's calls and counts it for Close to wait
// on, both under the lock that Close sets closed under: a call added is
// one Close waits for. The caller calls s.wg.Done when c is over.
func (s *Server) add(c *call) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.calls[c.id] = c
	s.wg.Add(1)
	return true
}

func (s *Server) remove(c *call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls[c.id] == c {
		delete(s.calls, c.id)
	}
}

func (s *Server) lookup(req *sipmsg.Request) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[callID(req)]
}

func callID(req *sipmsg.Request) string {
	if h := req.CallID(); h != nil {
		return h.Value()
	}
	return ""
}

func (s *Server) onAck(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	s.mu.Lock()
	dialogs := s.dialogs[transportKey(req)]
	s.mu.Unlock()
	if dialogs != nil {
		_ = dialogs.ReadAck(req, tx)
	}
}

func (s *Server) onBye(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	s.mu.Lock()
	dialogs, placed := s.dialogs[transportKey(req)], s.placed
	s.mu.Unlock()
	// A call Holdline placed over a transport it does not listen on
	// (TLS from `holdline call`) ends over that call's own connection.
	if dialogs != nil && dialogs.ReadBye(req, tx) == nil {
		return
	}
	if placed != nil && placed.ReadBye(req, tx) == nil {
		return
	}
	respond(tx, req, 481, "Call/Transaction Does Not Exist", "no such call")
}

// onReinvite takes a new offer in a call: hold, unhold, a moved address.
func (s *Server) onReinvite(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	c := s.lookup(req)
	if c == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist", "no such call")
		return
	}
	if len(req.Body()) == 0 {
		// An offerless re-INVITE (a refresh): our current answer stands.
		_ = tx.Respond(sipmsg.NewSDPResponseFromRequest(req, c.answerSDP(false)))
		return
	}
	offer, err := ParseOffer(req.Body())
	if err != nil {
		refuseOffer(tx, req, err)
		return
	}
	if err := c.reoffer(offer); err != nil {
		respond(tx, req, 488, "Not Acceptable Here", err.Error())
		return
	}
	_ = tx.Respond(sipmsg.NewSDPResponseFromRequest(req, c.answerSDP(true)))
}

// onInfo takes DTMF sent as SIP INFO (application/dtmf-relay or
// application/dtmf).
func (s *Server) onInfo(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	c := s.lookup(req)
	if c == nil && s.onPersonInfo(req, tx) {
		return
	}
	if c == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist", "no such call")
		return
	}
	digit, ok := infoDigit(req)
	if !ok {
		respond(tx, req, 415, "Unsupported Media Type", "INFO carries application/dtmf-relay or application/dtmf only")
		return
	}
	_ = tx.Respond(sipmsg.NewResponseFromRequest(req, 200, "OK", nil))
	c.dtmf(digit)
}

// infoDigit reads the digit of a DTMF INFO body: "Signal=5\r\nDuration=160"
// (application/dtmf-relay) or "5" (application/dtmf).
func infoDigit(req *sipmsg.Request) (rune, bool) {
	body := strings.TrimSpace(string(req.Body()))
	switch mediaType(req) {
	case "application/dtmf-relay":
		for _, line := range strings.Split(body, "\n") {
			k, v, ok := strings.Cut(line, "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "signal") {
				body = strings.TrimSpace(v)
				break
			}
		}
	case "application/dtmf":
	default:
		return 0, false
	}
	if len(body) != 1 {
		return 0, false
	}
	d := rune(strings.ToUpper(body)[0])
	_, ok := dtmf.DigitCode(d)
	return d, ok
}

// onRefer refuses transfers asked of Holdline: a caller's phone cannot
// move the agent's call elsewhere.
func (s *Server) onRefer(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	if s.lookup(req) == nil {
		respond(tx, req, 481, "Call/Transaction Does Not Exist", "no such call")
		return
	}
	respond(tx, req, 403, "Forbidden", "Holdline does not accept transfer requests")
}

func (s *Server) onOptions(req *sipmsg.Request, tx sipmsg.ServerTransaction) {
	if s.host.Draining() {
		// A proxy's keepalive: a draining worker is marked inactive and
		// gets no new calls.
		refuseDraining(tx, req)
		return
	}
	res := sipmsg.NewResponseFromRequest(req, 200, "OK", nil)
	res.AppendHeader(sipmsg.NewHeader("Allow", allowedMethods))
	res.AppendHeader(sipmsg.NewHeader("Accept", "application/sdp, application/dtmf-relay, application/dtmf"))
	_ = tx.Respond(res)
}
