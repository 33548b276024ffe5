package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/webrtc"
)

// Defaults. Every wait and every table has a bound.
const (
	DefaultResumeTTL      = 2 * time.Minute
	DefaultMaxSessions    = 200
	DefaultConnectTimeout = 30 * time.Second
	DefaultEventHistory   = 4096
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

// AgentFunc makes the agent for a new session, with a function that
// releases what it holds (provider connections, decoders) once the session
// has ended.
type AgentFunc func(ctx context.Context) (agent *runtime.Agent, release func(), err error)

type config struct {
	token          string
	resumeTTL      time.Duration
	maxSessions    int
	maxSet         bool    // WithMaxSessions was given
	callCost       float64 // share of a core a call takes; 0: not known
	connectTimeout time.Duration
	history        int
	transport      *webrtc.Transport
	log            *slog.Logger
	sessionOpts    []runtime.Option
	agentName      string
	echoCancel     bool
	store          store.Store // checkpoints, journal and resume tokens shared with other workers; nil: none
	worker         string
	keys           []handoff.Key
	// separateMetrics: /metrics is served by MetricsHandler elsewhere,
	// not by the main handler.
	separateMetrics bool
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

// WithMaxSessions caps concurrent sessions (default DefaultMaxSessions);
// beyond it new sessions get 503.
func WithMaxSessions(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("server: max sessions %d", n)
		}
		c.maxSessions, c.maxSet = n, true
		return nil
	}
}

// LocalCallCost is the share of one CPU core a call takes on the local
// engines (pocketsphinx with the agent's grammar, espeak-ng's voice, the
// session and its WebRTC connection), for WithCallCost. Measured with
// BenchmarkLocalEngines on the 2-core development machine, callers
// speaking a phrase every 5.5 s or so: 70 calls dropped 0 to 4 turns of
// some 250, 80 calls 33 to 48 of some 280 (the recogniser fell behind),
// so a call is counted as a thirty-fifth of a core, and the admission
// default (80% of that) dropped none.
const LocalCallCost = 1.0 / 35

// admissionShare is the share of the machine's cores the admission
// default fills, leaving room for bursts (everyone speaking at once) and
// for the rest of the machine.
const admissionShare = 0.8

// WithCallCost tells the server what a call costs the CPU with the
// engines in use, as a share of one core (LocalCallCost for the local
// engines). Unless WithMaxSessions sets the cap, it becomes the calls
// that fit in 80% of the cores (GOMAXPROCS): past that the engines would
// fall behind and callers lose turns, so new sessions get 503 with
// Retry-After instead. 0, the default, leaves DefaultMaxSessions.
func WithCallCost(coreShare float64) Option {
	return func(c *config) error {
		if coreShare < 0 || coreShare > 16 || math.IsNaN(coreShare) {
			return fmt.Errorf("server: call cost %v of a core", coreShare)
		}
		c.callCost = coreShare
		return nil
	}
}

// AdmissionDefault is the sessions a server admits at once for calls that
// each take coreShare of one CPU core (see WithCallCost), on cores cores.
func AdmissionDefault(coreShare float64, cores int) int {
	if coreShare <= 0 {
		return DefaultMaxSessions
	}
	return min(DefaultMaxSessions, max(1, int(admissionShare*float64(cores)/coreShare)))
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
	return func(c *config) error { c.sessionOpts = append(c.sessionOpts, opts...); return nil }
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

// Server is the HTTP handler. Close it to end every session.
type Server struct {
	cfg      config
	newAgent AgentFunc
	mux      *http.ServeMux
	metrics  *metrics

	ctx    context.Context // ends every call
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	calls  map[string]*call
	tokens map[string]*call
	gone   map[string]time.Time // tokens of ended sessions
	closed bool
	// missedEnded and lateEnded count the missed and late output frames
	// of ended sessions.
	missedEnded, lateEnded, unheardEnded uint64
}

// New returns a Server whose sessions run agents made by newAgent.
func New(newAgent AgentFunc, opts ...Option) (*Server, error) {
	if newAgent == nil {
		return nil, errors.New("server: New needs an AgentFunc")
	}
	cfg := config{
		resumeTTL:      DefaultResumeTTL,
		maxSessions:    DefaultMaxSessions,
		connectTimeout: DefaultConnectTimeout,
		history:        DefaultEventHistory,
		log:            slog.Default(),
		agentName:      "agent",
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if !cfg.maxSet && cfg.callCost > 0 {
		cfg.maxSessions = AdmissionDefault(cfg.callCost, goruntime.GOMAXPROCS(0))
	}
	if cfg.transport == nil {
		t, err := webrtc.NewTransport(webrtc.WithLogger(cfg.log))
		if err != nil {
			return nil, err
		}
		cfg.transport = t
	}
	s := &Server{
		cfg:      cfg,
		newAgent: newAgent,
		mux:      http.NewServeMux(),
		metrics:  newMetrics(),
		calls:    map[string]*call{},
		tokens:   map[string]*call{},
		gone:     map[string]time.Time{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mux.HandleFunc("POST /v1/sessions", s.authorized(headerOnly, s.createSession))
	s.mux.HandleFunc("DELETE /v1/sessions/{id}", s.authorized(headerOnly, s.deleteSession))
	s.mux.HandleFunc("GET /v1/sessions/{id}/events", s.authorized(headerOrQuery, s.streamEvents))
	s.mux.HandleFunc("POST /v1/sessions/{id}/input", s.authorized(headerOnly, s.postInput))
	s.mux.HandleFunc("GET /v1/sessions/{id}/context", s.authorized(headerOnly, s.getContext))
	s.mux.HandleFunc("GET /v1/config", s.serveConfig)
	s.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "holdline_output_frames_missed_total",
		Help:        "Output frame periods that went without a frame because a session ran late (an overloaded machine), by transport.",
		ConstLabels: prometheus.Labels{"transport": "webrtc"},
	}, func() float64 { return float64(s.MissedFrames()) }))
	s.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "holdline_output_frames_late_total",
		Help:        "Output frames sent a frame period or more behind their slot, caught up rather than lost (a busy machine), by transport.",
		ConstLabels: prometheus.Labels{"transport": "webrtc"},
	}, func() float64 { return float64(s.LateFrames()) }))
	s.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "holdline_input_frames_unheard_total",
		Help:        "Caller audio frames the recogniser refused because it fell behind or failed: words lost, by transport.",
		ConstLabels: prometheus.Labels{"transport": "webrtc"},
	}, func() float64 { return float64(s.sumFrames(&s.unheardEnded, (*runtime.Session).UnheardFrames)) }))
	if cfg.separateMetrics {
		s.mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
			s.fail(w, http.StatusNotFound, "metrics are served on their own listener (serve --metrics ADDR), not here")
		})
	} else {
		s.mux.Handle("GET /metrics", s.authorized(headerOnly, s.MetricsHandler().ServeHTTP))
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	s.mux.Handle("GET /", webClient())
	return s, nil
}

// MetricsHandler serves the Prometheus metrics without asking for the
// token: for a listener of its own on a private address (see
// WithSeparateMetrics). The main handler's /metrics asks for the token
// when one is set.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// ServeHTTP serves the routes listed in the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every session and waits for them to wind down.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	calls := make([]*call, 0, len(s.calls))
	for _, c := range s.calls {
		calls = append(calls, c)
	}
	s.mu.Unlock()
	s.cancel()
	for _, c := range calls {
		c.end("server closed")
	}
	s.wg.Wait()
	return nil
}

// spawn runs fn on a goroutine Close waits for or, once the server has
// closed, right here. Peers call back on their own goroutines, even after
// Close, and a WaitGroup must not grow while it is being waited on; after
// Close everything fn waits for is ended or cancelled, so it returns at
// once.
func (s *Server) spawn(fn func()) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.wg.Go(fn)
	}
	s.mu.Unlock()
	if closed {
		fn()
	}
}

// MissedFrames returns how many output frame periods went without a frame,
// over every session this server has run: 0 unless the machine is
// overloaded.
func (s *Server) MissedFrames() uint64 {
	return s.sumFrames(&s.missedEnded, (*runtime.Session).MissedFrames)
}

// LateFrames returns how many output frames went out a period or more
// behind their slot (caught up, not lost), over every session.
func (s *Server) LateFrames() uint64 {
	return s.sumFrames(&s.lateEnded, (*runtime.Session).LateFrames)
}

// sumFrames adds a counter of the live sessions to its total for the ended
// ones (guarded by s.mu).
func (s *Server) sumFrames(ended *uint64, of func(*runtime.Session) uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := *ended
	for _, c := range s.calls {
		if c.token != "" { // prepared: c.sess was set before the token
			n += of(c.sess)
		}
	}
	return n
}

// MaxSessions returns how many sessions the server admits at once:
// WithMaxSessions, else the admission default for the call cost
// (WithCallCost), else DefaultMaxSessions.
func (s *Server) MaxSessions() int { return s.cfg.maxSessions }

// Sessions returns how many sessions are in progress.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// fail answers a refused request with a reason a developer can act on.
func (s *Server) fail(w http.ResponseWriter, status int, reason string) {
	s.metrics.rejected.WithLabelValues(fmt.Sprint(status)).Inc()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, reason)
}

func (s *Server) serveConfig(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"agent":          s.cfg.agentName,
		"auth_required":  s.cfg.token != "",
		"max_text_bytes": MaxTextBytes,
		"resume_ttl_ms":  s.cfg.resumeTTL.Milliseconds(),
	})
}

func newToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "s_" + base64.RawURLEncoding.EncodeToString(b)
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
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		s.fail(w, http.StatusServiceUnavailable, "the server is shutting down")
		return
	case len(s.calls) >= s.cfg.maxSessions:
		s.mu.Unlock()
		w.Header().Set("Retry-After", "5")
		why := fmt.Sprintf("the server is full (%d sessions)", s.cfg.maxSessions)
		if !s.cfg.maxSet && s.cfg.callCost > 0 {
			why = fmt.Sprintf("the server is full: %d sessions, as many as its engines can serve on %d cores without losing callers' words", s.cfg.maxSessions, goruntime.GOMAXPROCS(0))
		}
		s.fail(w, http.StatusServiceUnavailable, why+"; try again later")
		return
	}
	c := newCall(s, newID())
	s.calls[c.id] = c // holds the place against the limit while it starts
	s.mu.Unlock()
	s.answerNew(w, r, c, offer, false)
}

// answerNew answers offer with a new connection for c, a call not yet
// prepared: a new session, or one taken over from the store (resumed).
func (s *Server) answerNew(w http.ResponseWriter, r *http.Request, c *call, offer string, resumed bool) {
	h, ref := c.handler()
	peer, err := s.cfg.transport.Answer(r.Context(), offer, h)
	if err != nil {
		s.forget(c, "")
		s.answerError(w, err)
		return
	}
	if err := c.prepare(r.Context()); err != nil {
		peer.Close()
		s.forget(c, "")
		s.cfg.log.Error("session not started", "session", c.id, "err", err)
		s.fail(w, http.StatusInternalServerError, "the agent could not be started: "+err.Error())
		return
	}
	tok := newToken()
	s.mu.Lock()
	c.token = tok
	s.tokens[tok] = c
	s.mu.Unlock()
	c.publishToken(tok)
	c.attach(peer, ref)
	s.metrics.sessionsTotal.Inc()
	s.metrics.sessionsActive.Inc()
	if resumed {
		s.metrics.resumesTotal.Inc()
		s.cfg.log.Info("session taken over from the store", "session", c.id)
	} else {
		s.cfg.log.Info("session created", "session", c.id)
	}
	s.answered(w, c, tok, peer.Answer(), resumed)
}

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
		if s.takeOver(w, r, tok, offer) {
			return
		}
		s.fail(w, http.StatusNotFound, "no session has this resume token (it may have been used already: tokens rotate with every connection)")
		return
	}
	h, ref := c.handler()
	peer, err := s.cfg.transport.Answer(r.Context(), offer, h)
	if err != nil {
		s.answerError(w, err)
		return
	}
	next := newToken()
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
	c.retireToken(tok)
	c.publishToken(next)
	c.attach(peer, ref)
	s.metrics.resumesTotal.Inc()
	s.cfg.log.Info("session resumed", "session", c.id)
	s.answered(w, c, next, peer.Answer(), true)
}

func (s *Server) answerError(w http.ResponseWriter, err error) {
	if errors.Is(err, webrtc.ErrBadOffer) {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	s.cfg.log.Error("answering an offer", "err", err)
	s.fail(w, http.StatusInternalServerError, err.Error())
}

func (s *Server) answered(w http.ResponseWriter, c *call, tok, answer string, resumed bool) {
	h := w.Header()
	h.Set("Content-Type", "application/sdp")
	h.Set("Location", "/v1/sessions/"+c.id)
	h.Set(HeaderResumeToken, tok)
	h.Set(HeaderResumed, fmt.Sprint(resumed))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, answer)
}

// forget removes an ended call; its token then answers 410 for a while.
func (s *Server) forget(c *call, tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.calls[c.id]; ok && c.token != "" {
		s.missedEnded += c.sess.MissedFrames()
		s.lateEnded += c.sess.LateFrames()
		s.unheardEnded += c.sess.UnheardFrames()
	}
	delete(s.calls, c.id)
	if tok == "" {
		return
	}
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

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *call {
	id := r.PathValue("id")
	s.mu.Lock()
	c := s.calls[id]
	s.mu.Unlock()
	if c == nil {
		s.fail(w, http.StatusNotFound, fmt.Sprintf("no session %q", id))
	}
	return c
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	c := s.lookup(w, r)
	if c == nil {
		return
	}
	c.end("ended by the client")
	w.WriteHeader(http.StatusNoContent)
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
	c.mu.Lock()
	running := c.running
	c.mu.Unlock()
	if !running {
		s.fail(w, http.StatusConflict, "the session has not started: no connection yet")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	cc, err := c.sess.ChatContext(ctx)
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
	if err := c.inject(r.Context(), *in.Text); err != nil {
		s.fail(w, http.StatusConflict, err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
