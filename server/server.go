package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/webrtc"
)

// Defaults. Every wait and every table has a bound.
const (
	DefaultResumeTTL      = 2 * time.Minute
	DefaultMaxSessions    = calls.DefaultMaxCalls
	DefaultConnectTimeout = 30 * time.Second
	DefaultEventHistory   = calls.DefaultEventHistory
	// maxOfferBytes bounds an SDP offer; real ones are a few kilobytes.
	maxOfferBytes = 64 << 10
	// goneMemory is how long an ended session's token still answers 410
	// rather than 404, and goneMax how many such tokens are kept.
	goneMemory = time.Hour
	goneMax    = 10000
)

// Header names of the session API.
const (
	HeaderResumeToken = "Holdline-Resume-Token"
	HeaderResumed     = "Holdline-Session-Resumed"
)

// AgentFunc is runtime.AgentFunc, the one type every transport takes.
type AgentFunc = runtime.AgentFunc

type config struct {
	token          string
	adminToken     string
	resumeTTL      time.Duration
	connectTimeout time.Duration
	transport      *webrtc.Transport
	log            *slog.Logger
	agentName      string
	echoCancel     bool
	// host runs the calls (WithHost); without it the server makes one
	// from hostOpts, and closes it.
	host     *calls.Host
	hostOpts []calls.Option
	// separateMetrics: /metrics is served by MetricsHandler elsewhere,
	// not by the main handler.
	separateMetrics bool
}

// WithHost runs the server's calls on h, a host other transports share
// (serve --sip): the HTTP API then reaches every call on h, and the
// caller closes h after the server. The host's own settings
// (WithMaxSessions, WithCallCost, WithStore, WithSessionOptions) are then
// h's, not the server's.
func WithHost(h *calls.Host) Option {
	return func(c *config) error { c.host = h; return nil }
}

// hostOption passes o to the host the server makes.
func hostOption(o calls.Option) Option {
	return func(c *config) error { c.hostOpts = append(c.hostOpts, o); return nil }
}

// Option configures a Server.
type Option func(*config) error

// WithToken requires "Authorization: Bearer token" on every session request
// and on /metrics. The event stream also takes it as ?access_token= (a
// browser's EventSource cannot send headers); no other route does.
func WithToken(token string) Option {
	return func(c *config) error { c.token = token; return nil }
}

// WithSeparateMetrics takes /metrics off the main handler: the caller
// serves MetricsHandler, which asks for no token, on a listener of its own
// (serve --metrics ADDR), for a Prometheus scraper on a private address.
func WithSeparateMetrics() Option {
	return func(c *config) error { c.separateMetrics = true; return nil }
}

// WithResumeTTL sets how long a session whose connection dropped waits for
// the caller to come back (default DefaultResumeTTL).
func WithResumeTTL(d time.Duration) Option {
	return positive("resume TTL", d, func(c *config) { c.resumeTTL = d })
}

// WithConnectTimeout sets how long a new session waits for its first
// connection before it is dropped (default DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) Option {
	return positive("connect timeout", d, func(c *config) { c.connectTimeout = d })
}

// WithMaxSessions caps concurrent sessions (calls.WithMaxCalls; default
// DefaultMaxSessions); beyond it new sessions get 503.
func WithMaxSessions(n int) Option { return hostOption(calls.WithMaxCalls(n)) }

// LocalCallCost is calls.LocalCallCost, for WithCallCost.
const LocalCallCost = calls.LocalCallCost

// WithCallCost tells the server what a call costs the CPU with the
// engines in use (calls.WithCallCost): unless WithMaxSessions sets the
// cap, new sessions past what the cores can serve get 503 with
// Retry-After.
func WithCallCost(coreShare float64) Option { return hostOption(calls.WithCallCost(coreShare)) }

// WithStore makes sessions outlive this worker (calls.WithStore): a
// caller whose worker died reconnects with its resume token to any worker
// sharing st, which takes the session over from its last checkpoint.
func WithStore(st store.Store, worker string, keys ...handoff.Key) Option {
	return hostOption(calls.WithStore(st, worker, keys...))
}

// WithTransport sets the WebRTC transport (default webrtc.NewTransport()).
func WithTransport(t *webrtc.Transport) Option {
	return func(c *config) error { c.transport = t; return nil }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { c.log = l; return nil }
}

// WithSessionOptions adds options to every session (endpointing, a
// journal, input settings).
func WithSessionOptions(opts ...runtime.Option) Option {
	return hostOption(calls.WithSessionOptions(opts...))
}

// WithAgentName sets the name the web client shows.
func WithAgentName(name string) Option {
	return func(c *config) error { c.agentName = name; return nil }
}

// WithEchoCancellation turns on Holdline's own echo canceller for browser
// callers. It is off by default: browsers cancel echo themselves before
// Opus, and a second canceller costs CPU for nothing.
func WithEchoCancellation(on bool) Option {
	return func(c *config) error { c.echoCancel = on; return nil }
}

func positive(what string, d time.Duration, set func(*config)) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("server: %s %v must be positive", what, d)
		}
		set(c)
		return nil
	}
}

// Server is the HTTP handler. Close it to end its sessions.
type Server struct {
	cfg     config
	host    *calls.Host
	ownHost bool // made by New: Close closes it
	mux     *http.ServeMux

	mu     sync.Mutex
	tokens map[string]*call
	gone   map[string]time.Time // tokens of ended sessions
}

// New returns a Server whose sessions run agents made by newAgent.
func New(newAgent AgentFunc, opts ...Option) (*Server, error) {
	if newAgent == nil {
		return nil, errors.New("server: New needs an AgentFunc")
	}
	cfg := config{
		resumeTTL:      DefaultResumeTTL,
		connectTimeout: DefaultConnectTimeout,
		log:            slog.Default(),
		agentName:      "agent",
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	host, own := cfg.host, false
	switch {
	case host != nil && len(cfg.hostOpts) > 0:
		return nil, errors.New("server: with WithHost, give the limits, store and session options to calls.New")
	case host == nil:
		var err error
		host, err = calls.New(newAgent, append([]calls.Option{calls.WithLogger(cfg.log)}, cfg.hostOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		own = true
	}
	if cfg.transport == nil {
		t, err := webrtc.NewTransport(webrtc.WithLogger(cfg.log))
		if err != nil {
			return nil, err
		}
		cfg.transport = t
	}
	s := &Server{
		cfg:     cfg,
		host:    host,
		ownHost: own,
		mux:     http.NewServeMux(),
		tokens:  map[string]*call{},
		gone:    map[string]time.Time{},
	}
	host.AddTransport(kind)
	s.mux.HandleFunc("POST /v1/sessions", withCORS(endpointMethods, s.authorized(headerOnly, s.createSession)))
	s.mux.HandleFunc("OPTIONS /v1/sessions", s.optionsEndpoint)
	s.mux.HandleFunc("GET /v1/sessions", s.authorized(headerOnly, s.listSessions))
	s.mux.HandleFunc("DELETE /v1/sessions/{id}", withCORS(resourceMethods, s.authorized(headerOnly, s.deleteSession)))
	s.mux.HandleFunc("PATCH /v1/sessions/{id}", withCORS(resourceMethods, s.authorized(headerOnly, s.patchResource)))
	s.mux.HandleFunc("OPTIONS /v1/sessions/{id}", s.optionsResource)
	s.mux.HandleFunc("GET /v1/sessions/{id}/events", s.authorized(headerOrQuery, s.streamEvents))
	s.mux.HandleFunc("POST /v1/sessions/{id}/input", s.authorized(headerOnly, s.postInput))
	s.mux.HandleFunc("GET /v1/sessions/{id}/context", s.authorized(headerOnly, s.getContext))
	s.mux.HandleFunc("GET /v1/config", s.serveConfig)
	if cfg.separateMetrics {
		s.mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
			s.fail(w, http.StatusNotFound, "metrics are served on their own listener (serve --metrics ADDR), not here")
		})
	} else {
		s.mux.Handle("GET /metrics", s.authorized(headerOnly, s.MetricsHandler().ServeHTTP))
	}
	s.mux.HandleFunc("GET /readyz", s.ready)
	s.mux.HandleFunc("POST /v1/admin/drain", s.adminDrain)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	s.mux.Handle("GET /sessions/{id}", sessionView())
	s.mux.Handle("GET /", webClient())
	return s, nil
}

// MetricsHandler serves the Prometheus metrics without asking for the
// token: for a listener of its own on a private address (see
// WithSeparateMetrics). The main handler's /metrics asks for the token
// when one is set.
func (s *Server) MetricsHandler() http.Handler { return s.host.MetricsHandler() }

// Host is the host the server's calls run on.
func (s *Server) Host() *calls.Host { return s.host }

// ServeHTTP serves the routes listed in the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close releases the server's sessions (with a store, their checkpoints
// stay for another worker to take them over) and, when New made the host,
// closes it. A shared host (WithHost) is the caller's to close.
func (s *Server) Close() error {
	if s.ownHost {
		return s.host.Close()
	}
	for _, info := range s.host.List() {
		if info.Transport == kind {
			if c := s.host.Lookup(info.ID); c != nil {
				c.Release("server closed")
			}
		}
	}
	return nil
}

// kind is the transport's name in the host's metrics and snapshots.
const kind = "webrtc"

// MissedFrames returns how many output frame periods went without a frame,
// over every session this server has run: 0 unless the machine is
// overloaded.
func (s *Server) MissedFrames() uint64 { return s.host.MissedFrames(kind) }

// LateFrames returns how many output frames went out a period or more
// behind their slot (caught up, not lost), over every session.
func (s *Server) LateFrames() uint64 { return s.host.LateFrames(kind) }

// MaxSessions returns how many sessions the host admits at once, over
// every transport: WithMaxSessions, else the admission default for the
// call cost (WithCallCost), else DefaultMaxSessions.
func (s *Server) MaxSessions() int { return s.host.MaxCalls() }

// Sessions returns how many sessions are in progress on the host.
func (s *Server) Sessions() int { return s.host.Len() }

// fail answers a refused request with a reason a developer can act on.
func (s *Server) fail(w http.ResponseWriter, status int, reason string) {
	s.host.Rejected(status)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, reason)
}

func (s *Server) serveConfig(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	// Minted TURN credentials differ on every request.
	w.Header().Set("Cache-Control", "no-store")
	servers := s.iceServersFor(r, "page")
	if servers == nil {
		servers = []webrtc.ICEServer{}
	}
	json.NewEncoder(w).Encode(map[string]any{
		"agent":          s.cfg.agentName,
		"auth_required":  s.cfg.token != "",
		"max_text_bytes": MaxTextBytes,
		"resume_ttl_ms":  s.cfg.resumeTTL.Milliseconds(),
		"ice_servers":    servers,
	})
}

// createSession answers an offer: a new session, or with a resume token
// the session the token names, on a new connection.
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/sdp") {
		s.fail(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type is %q; send the SDP offer as application/sdp", ct))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxOfferBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the offer is over %d bytes", maxOfferBytes))
			return
		}
		s.fail(w, http.StatusBadRequest, "reading the offer: "+err.Error())
		return
	}
	offer := string(body)
	if tok := r.Header.Get(HeaderResumeToken); tok != "" {
		s.resume(w, r, tok, offer)
		return
	}
	s.start(w, r, offer)
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, offer string) {
	switch {
	case s.host.Closed():
		s.fail(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	case s.host.Draining():
		s.draining(w)
		return
	case s.host.Len() >= s.host.MaxCalls():
		// Refused before the offer is answered; Start refuses a race.
		s.full(w, calls.ErrFull)
		return
	}
	s.answerNew(w, r, offer, nil, "")
}

// full answers a request the host has no room for.
func (s *Server) full(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "5")
	why := fmt.Sprintf("the server is full (%d sessions)", s.host.MaxCalls())
	if s.host.Derived() {
		why = fmt.Sprintf("the server is full: %d sessions, as many as its engines can serve on %d cores without losing callers' words", s.host.MaxCalls(), goruntime.GOMAXPROCS(0))
	}
	s.fail(w, http.StatusServiceUnavailable, why+"; try again later")
}

// recovery is how WebRTC calls are kept: a dropped connection is waited
// for up to the resume TTL, and the lease is short, so that a session
// whose worker died is free soon even for a worker that has no token to
// take it over with.
func (s *Server) recovery() calls.Recovery {
	return calls.Recovery{
		LeaseTTL:       min(handoff.DefaultLeaseTTL, max(s.cfg.resumeTTL/4, time.Second)),
		ResumeTTL:      s.cfg.resumeTTL,
		ConnectTimeout: s.cfg.connectTimeout,
	}
}

// answerNew answers offer with a new connection for a new call: a new
// session, or one taken over from the store (resumed).
// taken is the token resumed was taken with, given back if the call
// cannot start here.
func (s *Server) answerNew(w http.ResponseWriter, r *http.Request, offer string, resumed *handoff.Snapshot, taken string) {
	c := &call{s: s}
	h, ref := c.handler()
	peer, err := s.cfg.transport.Answer(r.Context(), offer, h)
	if err != nil {
		s.answerError(w, err)
		return
	}
	spec := calls.Spec{
		Kind: kind,
		// 24 kHz: no voice we have speaks above it (OpenAI's is 24 kHz,
		// espeak-ng's 22.05), and Opus codes it as it is; 48 kHz would
		// carry nothing more at twice the player's memory and more
		// encoder time.
		OutputRate: media.Rate24k,
		// The browser cancels its own echo unless told to use ours.
		Input:    engine.InputConfig{Rate: media.Rate16k, NoEchoCancellation: !s.cfg.echoCancel, EchoFree: !s.cfg.echoCancel},
		Recovery: s.recovery(),
		Resumed:  resumed,
	}
	if resumed != nil {
		spec.Origin = calls.Reconnected
	}
	hc, err := s.host.Start(r.Context(), spec, c)
	if err != nil {
		peer.Close()
		switch {
		case errors.Is(err, calls.ErrFull):
			s.full(w, err)
		case errors.Is(err, calls.ErrClosed):
			s.fail(w, http.StatusServiceUnavailable, "the server is shutting down")
		case errors.Is(err, calls.ErrDraining):
			s.host.GiveBack(r.Context(), taken, resumed)
			s.draining(w)
		case errors.Is(err, calls.ErrRunning):
			s.fail(w, http.StatusConflict, "the session is already running here")
		default:
			s.cfg.log.Error("session not started", "err", err)
			s.fail(w, http.StatusInternalServerError, "the agent could not be started: "+err.Error())
		}
		return
	}
	c.hc = hc
	tok := calls.NewToken()
	s.mu.Lock()
	c.token = tok
	s.tokens[tok] = c
	s.mu.Unlock()
	hc.KeepAlias(r.Context(), tok, s.tokenTTL())
	c.attach(peer, ref)
	if resumed != nil {
		s.cfg.log.Info("session taken over from the store", "session", hc.ID())
	} else {
		s.cfg.log.Info("session created", "session", hc.ID())
	}
	s.answered(w, hc.ID(), tok, peer.Answer(), resumed != nil)
}

// tokenTTL is how long a resume token leads to its session in the store
// unrenewed: the resume TTL, and the lease's, past the worker's death.
func (s *Server) tokenTTL() time.Duration { return s.cfg.resumeTTL + s.recovery().LeaseTTL }

func (s *Server) resume(w http.ResponseWriter, r *http.Request, tok, offer string) {
	s.mu.Lock()
	c, ok := s.tokens[tok]
	_, ended := s.gone[tok]
	s.mu.Unlock()
	switch {
	case ended:
		s.fail(w, http.StatusGone, "the session this token resumed has ended")
		return
	case !ok:
		s.takeOver(w, r, tok, offer)
		return
	case s.host.Moving():
		// The drain moves its calls: this one goes to another worker too
		// (a front door retries the offer there), not back onto this one.
		s.draining(w)
		return
	}
	h, ref := c.handler()
	peer, err := s.cfg.transport.Answer(r.Context(), offer, h)
	if err != nil {
		s.answerError(w, err)
		return
	}
	next := calls.NewToken()
	s.mu.Lock()
	if s.tokens[tok] != c { // ended, or resumed by a racing request
		s.mu.Unlock()
		peer.Close()
		s.fail(w, http.StatusGone, "the session ended or was resumed elsewhere while this offer was answered")
		return
	}
	delete(s.tokens, tok)
	s.tokens[next] = c
	c.token = next
	s.mu.Unlock()
	c.hc.DropAlias(tok)
	c.hc.KeepAlias(r.Context(), next, s.tokenTTL())
	c.attach(peer, ref)
	c.hc.Resumed()
	s.cfg.log.Info("session resumed", "session", c.hc.ID())
	s.answered(w, c.hc.ID(), next, peer.Answer(), true)
}

// takeOver answers a resume token this worker does not know: if the store
// has it, the session moves here from its last checkpoint.
func (s *Server) takeOver(w http.ResponseWriter, r *http.Request, tok, offer string) {
	if s.host.Draining() {
		// Before the token is taken: another worker needs it.
		s.draining(w)
		return
	}
	snap, err := s.host.Resume(r.Context(), tok)
	switch {
	case errors.Is(err, calls.ErrUnknownToken):
		s.fail(w, http.StatusNotFound, "no session has this resume token (it may have been used already: tokens rotate with every connection)")
		return
	case errors.Is(err, calls.ErrCheckpoint):
		s.cfg.log.Error("session not taken over", "err", err)
		s.fail(w, http.StatusGone, err.Error())
		return
	case err != nil:
		s.fail(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.answerNew(w, r, offer, snap, tok)
}

func (s *Server) answerError(w http.ResponseWriter, err error) {
	if errors.Is(err, webrtc.ErrBadOffer) {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	s.cfg.log.Error("answering an offer", "err", err)
	s.fail(w, http.StatusInternalServerError, err.Error())
}

func (s *Server) answered(w http.ResponseWriter, id, tok, answer string, resumed bool) {
	h := w.Header()
	h.Set("Content-Type", "application/sdp")
	h.Set("Location", "/v1/sessions/"+id)
	h.Set(HeaderResumeToken, tok)
	h.Set(HeaderResumed, fmt.Sprint(resumed))
	h.Set("Cache-Control", "no-store")
	// The request carried the token (it was let in): every server goes.
	linkICEServers(h, s.cfg.transport.ICEServers(id))
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, answer)
}

// forget retires an ended call's token: it answers 410 for a while.
func (s *Server) forget(tok string) {
	if tok == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tok)
	now := time.Now()
	if len(s.gone) >= goneMax {
		for t, at := range s.gone {
			if now.Sub(at) > goneMemory || len(s.gone) >= goneMax {
				delete(s.gone, t)
			}
		}
	}
	s.gone[tok] = now
}

// lookup finds the call of the request's session id, whatever its
// transport, or answers 404.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *calls.Call {
	id := r.PathValue("id")
	c := s.host.Lookup(id)
	if c == nil {
		s.fail(w, http.StatusNotFound, fmt.Sprintf("no session %q", id))
	}
	return c
}

// listSessions answers the live calls on this worker, of every transport.
func (s *Server) listSessions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"sessions": s.host.List()})
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	c := s.lookup(w, r)
	if c == nil {
		return
	}
	c.End("ended by the client")
	// 200, as RFC 9725's flow answers a WHIP resource's DELETE.
	w.WriteHeader(http.StatusOK)
}

// postInput takes typed input for the session, as the data channel does.
// getContext answers the session's chat context as it stands: what was
// said and played, and every committed tool result (llm.ChatContext as
// JSON).
func (s *Server) getContext(w http.ResponseWriter, r *http.Request) {
	c := s.lookup(w, r)
	if c == nil {
		return
	}
	if !c.Running() {
		s.fail(w, http.StatusConflict, "the session has not started: no connection yet")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	cc, err := c.Session().ChatContext(ctx)
	if err != nil {
		s.fail(w, http.StatusConflict, "the session did not answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(cc)
}

func (s *Server) postInput(w http.ResponseWriter, r *http.Request) {
	c := s.lookup(w, r)
	if c == nil {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInputMessage))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%v: the body is over %d bytes", ErrTextTooLong, maxInputMessage))
			return
		}
		s.fail(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var in struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		s.fail(w, http.StatusBadRequest, jsonProblem(body, err)+`; send {"text": "..."}`)
		return
	}
	if in.Text == nil {
		s.fail(w, http.StatusBadRequest, `the body has no "text" field; send {"text": "..."}`)
		return
	}
	if err := checkText(*in.Text); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrTextTooLong) {
			status = http.StatusRequestEntityTooLarge
		}
		s.fail(w, status, err.Error())
		return
	}
	if err := c.Inject(r.Context(), *in.Text); err != nil {
		s.fail(w, http.StatusConflict, err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
