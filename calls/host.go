package calls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	goruntime "runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/store"
)

// Defaults. Every wait and every table has a bound.
const (
	DefaultMaxCalls     = 200
	DefaultEventHistory = 4096
	// storeTimeout bounds one store request made for a call.
	storeTimeout = 2 * time.Second
	// callTimeout bounds one request to the session core from a
	// transport's callback (connection lost or back, a reply asked for).
	callTimeout = 2 * time.Second
	// eventBuffer is a call's event subscription buffer: room for bursts
	// while the log appends.
	eventBuffer = 512
)

// Sentinel errors of Start, for a transport to answer with its own
// status (503 and Retry-After, 486 Busy Here).
var (
	ErrFull   = errors.New("calls: the host is full")
	ErrClosed = errors.New("calls: the host is closed")
	// ErrRunning: the session is already running on this host.
	ErrRunning = errors.New("calls: the session is already running here")
)

// AgentFunc is runtime.AgentFunc.
type AgentFunc = runtime.AgentFunc

type config struct {
	maxCalls    int
	maxSet      bool
	callCost    float64
	history     int
	log         *slog.Logger
	sessionOpts []runtime.Option
	store       store.Store
	worker      string
	keys        []handoff.Key
	words       map[Origin]string
	observers   []ObserverFunc
}

// Option configures a Host.
type Option func(*config) error

// WithMaxCalls caps the calls in progress at once, over every transport
// (default DefaultMaxCalls, or what WithCallCost derives).
func WithMaxCalls(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("calls: max calls %d", n)
		}
		c.maxCalls, c.maxSet = n, true
		return nil
	}
}

// LocalCallCost is the share of one CPU core a call takes on the local
// engines (pocketsphinx with the agent's grammar, espeak-ng's voice, the
// session and its WebRTC connection), for WithCallCost. Measured with
// server's BenchmarkLocalEngines on the 2-core development machine,
// callers speaking a phrase every 5.5 s or so: 70 calls dropped 0 to 4
// turns of some 250, 80 calls 33 to 48 of some 280 (the recogniser fell
// behind), so a call is counted as a thirty-fifth of a core, and the
// admission default (80% of that) dropped none.
const LocalCallCost = 1.0 / 35

// admissionShare is the share of the machine's cores the admission
// default fills, leaving room for bursts (everyone speaking at once) and
// for the rest of the machine.
const admissionShare = 0.8

// WithCallCost tells the host what a call costs the CPU with the engines
// in use, as a share of one core (LocalCallCost for the local engines).
// Unless WithMaxCalls sets the cap, it becomes the calls that fit in 80%
// of the cores (GOMAXPROCS): past that the engines would fall behind and
// callers lose turns, so new calls are refused instead (ErrFull). 0, the
// default, leaves DefaultMaxCalls.
func WithCallCost(coreShare float64) Option {
	return func(c *config) error {
		if coreShare < 0 || coreShare > 16 || math.IsNaN(coreShare) {
			return fmt.Errorf("calls: call cost %v of a core", coreShare)
		}
		c.callCost = coreShare
		return nil
	}
}

// AdmissionDefault is the calls a host admits at once for calls that each
// take coreShare of one CPU core (see WithCallCost), on cores cores.
func AdmissionDefault(coreShare float64, cores int) int {
	if coreShare <= 0 {
		return DefaultMaxCalls
	}
	return min(DefaultMaxCalls, max(1, int(admissionShare*float64(cores)/coreShare)))
}

// WithEventHistory sets how many recent events a call keeps for late
// readers (default DefaultEventHistory).
func WithEventHistory(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return fmt.Errorf("calls: event history %d", n)
		}
		c.history = n
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { c.log = l; return nil }
}

// WithSessionOptions adds options to every call's session (endpointing, a
// journal, input settings).
func WithSessionOptions(opts ...runtime.Option) Option {
	return func(c *config) error { c.sessionOpts = append(c.sessionOpts, opts...); return nil }
}

// WithStore makes calls outlive this worker: each call's session is
// checkpointed to st under a lease held as worker, sealed with keys[0]
// (the others verify older snapshots), and its mutations journaled there.
// A call whose worker died is taken over by another sharing st, from the
// last checkpoint: what was unfinished is settled by the journal (a
// mutation whose outcome is unknown is never run again blindly), and the
// agent speaks again (see Origin).
func WithStore(st store.Store, worker string, keys ...handoff.Key) Option {
	return func(c *config) error {
		if err := handoff.CheckSetup(st, worker, keys); err != nil {
			return fmt.Errorf("calls: WithStore: %w", err)
		}
		c.store, c.worker, c.keys = st, worker, keys
		return nil
	}
}

// WithInstructions replaces what the agent is told for its first words on
// a call of origin o (see DefaultInstructions).
func WithInstructions(o Origin, instructions string) Option {
	return func(c *config) error { c.words[o] = instructions; return nil }
}

// Host runs calls. Close it to release every call.
type Host struct {
	cfg      config
	newAgent AgentFunc
	metrics  *metrics

	ctx    context.Context // ends every call
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	calls    map[string]*Call
	picking  map[string]struct{} // sessions being picked up (PickUp)
	starting map[string]bool     // calls whose sessions are being made, holding their places
	closed   bool
	ended    map[string]*frameTotals // frame counters of ended calls, by kind

	drain     atomic.Int32 // a DrainState
	drainOnce sync.Once
	drainC    chan struct{} // closed when the drain begins
	moving    atomic.Bool   // the drain moves calls to other workers
}

// New returns a Host whose calls run agents made by newAgent. It makes one
// agent first, and releases it, so that an agent that cannot be made
// fails here rather than at the first call.
func New(newAgent AgentFunc, opts ...Option) (*Host, error) {
	if newAgent == nil {
		return nil, errors.New("calls: New needs an AgentFunc")
	}
	cfg := config{
		maxCalls: DefaultMaxCalls,
		history:  DefaultEventHistory,
		log:      slog.Default(),
		words:    map[Origin]string{},
	}
	for o, w := range DefaultInstructions {
		cfg.words[o] = w
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if !cfg.maxSet && cfg.callCost > 0 {
		cfg.maxCalls = AdmissionDefault(cfg.callCost, goruntime.GOMAXPROCS(0))
	}
	if err := checkAgent(newAgent); err != nil {
		return nil, err
	}
	h := &Host{
		cfg:      cfg,
		newAgent: newAgent,
		calls:    map[string]*Call{},
		picking:  map[string]struct{}{},
		starting: map[string]bool{},
		ended:    map[string]*frameTotals{},
		drainC:   make(chan struct{}),
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.metrics = newMetrics(h)
	return h, nil
}

// agentCheckTimeout bounds making the agent New checks.
const agentCheckTimeout = 30 * time.Second

// checkAgent makes one agent and releases it: an agent that cannot be made
// (a recogniser missing a word of its phrases, a provider without its
// key) fails New, at start-up, with the reason, rather than the first
// call.
func checkAgent(newAgent AgentFunc) error {
	ctx, cancel := context.WithTimeout(context.Background(), agentCheckTimeout)
	defer cancel()
	agent, release, err := newAgent(ctx)
	if err != nil {
		return fmt.Errorf("calls: the agent cannot be made: %w", err)
	}
	if release != nil {
		defer release()
	}
	if agent == nil || agent.Model == nil {
		return errors.New("calls: the agent cannot be made: it has no Model")
	}
	return nil
}

// MaxCalls returns how many calls the host admits at once: WithMaxCalls,
// else the admission default for the call cost (WithCallCost), else
// DefaultMaxCalls.
func (h *Host) MaxCalls() int { return h.cfg.maxCalls }

// Derived reports whether MaxCalls was derived from the call cost rather
// than set.
func (h *Host) Derived() bool { return !h.cfg.maxSet && h.cfg.callCost > 0 }

// Len returns how many calls are in progress, over every transport.
func (h *Host) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls) + len(h.starting)
}

// Lookup returns the call of session id, or nil.
func (h *Host) Lookup(id string) *Call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[id]
}

// Info describes a live call.
type Info struct {
	ID        string    `json:"id"`
	Transport string    `json:"transport"`
	Started   time.Time `json:"started"`
	Running   bool      `json:"running"`
	Connected bool      `json:"connected"`
	Origin    string    `json:"origin"`
	// Network is what the network did to the caller's audio, for a
	// transport that counts it (a NetworkReporter Line: WebRTC).
	Network *Network `json:"network,omitempty"`
}

// List returns the live calls, oldest first.
func (h *Host) List() []Info {
	h.mu.Lock()
	calls := make([]*Call, 0, len(h.calls))
	for _, c := range h.calls {
		calls = append(calls, c)
	}
	h.mu.Unlock()
	out := make([]Info, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// Logger is the host's logger.
func (h *Host) Logger() *slog.Logger { return h.cfg.log }

// HasStore reports whether calls are checkpointed (WithStore).
func (h *Host) HasStore() bool { return h.cfg.store != nil }

// MetricsHandler serves the Prometheus metrics of every call on the host,
// without asking for a token: the caller guards or isolates it.
func (h *Host) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(h.metrics.reg, promhttp.HandlerOpts{})
}

// AddTransport makes the metrics of calls of kind show, at zero, before
// the first such call: a transport serving on the host calls it.
func (h *Host) AddTransport(kind string) {
	m := h.metrics
	m.sessionsActive.WithLabelValues(kind)
	m.sessionsTotal.WithLabelValues(kind)
	m.resumesTotal.WithLabelValues(kind)
	m.connectionsLost.WithLabelValues(kind)
	m.moves.WithLabelValues(kind)
	h.mu.Lock()
	if h.ended[kind] == nil {
		h.ended[kind] = &frameTotals{}
	}
	h.mu.Unlock()
}

// Rejected counts a request refused by a transport, by its status (an
// HTTP status, a SIP response code), in holdline_requests_rejected_total.
func (h *Host) Rejected(status int) {
	h.metrics.rejected.WithLabelValues(fmt.Sprint(status)).Inc()
}

// Close releases every call: the worker is going away, not the calls,
// so their checkpoints stay for another worker to take them over. It
// waits for them to wind down.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	calls := make([]*Call, 0, len(h.calls))
	for _, c := range h.calls {
		calls = append(calls, c)
	}
	h.mu.Unlock()
	h.cancel()
	for _, c := range calls {
		c.finish("the worker closed", endRelease)
	}
	h.wg.Wait()
	return nil
}

// Closed reports whether Close was called.
func (h *Host) Closed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// spawn runs fn on a goroutine Close waits for or, once the host has
// closed, right here: transports call back on their own goroutines, even
// after Close, and a WaitGroup must not grow while it is waited on.
func (h *Host) spawn(fn func()) {
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.wg.Go(fn)
	}
	h.mu.Unlock()
	if closed {
		fn()
	}
}

// Go runs fn on a goroutine the host's Close waits for (or at once after
// Close): for a transport's work that belongs to a call, so that nothing
// of it outlives the host.
func (h *Host) Go(fn func()) { h.spawn(fn) }

// reserve holds a place for call id against the limit.
func (h *Host) reserve(c *Call) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return ErrClosed
	case h.Draining():
		return ErrDraining
	case h.calls[c.id] != nil || h.starting[c.id]:
		return fmt.Errorf("%w: session %s", ErrRunning, c.id)
	case len(h.calls)+len(h.starting) >= h.cfg.maxCalls:
		if h.Derived() {
			return fmt.Errorf("%w: %d calls, as many as its engines can serve on %d cores without losing callers' words", ErrFull, h.cfg.maxCalls, goruntime.GOMAXPROCS(0))
		}
		return fmt.Errorf("%w (%d calls)", ErrFull, h.cfg.maxCalls)
	}
	h.starting[c.id] = true
	return nil
}

// admit registers a call whose session is made (ok), or frees the place
// reserve held for it. A call admitted after Close is refused.
func (h *Host) admit(c *Call, ok bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.starting, c.id)
	if !ok {
		return nil
	}
	if h.closed {
		return ErrClosed
	}
	h.calls[c.id] = c
	return nil
}

// forget removes an ended call, adding its frame counters to its kind's.
func (h *Host) forget(c *Call) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls[c.id] != c {
		return
	}
	delete(h.calls, c.id)
	t := h.ended[c.kind]
	if t == nil {
		t = &frameTotals{}
		h.ended[c.kind] = t
	}
	t.add(c)
	t.net.JitterDelay = 0 // a gauge of live calls
}

// frameTotals are the frame counters of a kind's calls, and what the
// network did to their input.
type frameTotals struct {
	missed, late, unheard uint64
	net                   Network
	hasNet                bool
}

func (t *frameTotals) add(c *Call) {
	s := c.sess
	t.missed += s.MissedFrames()
	t.late += s.LateFrames()
	t.unheard += s.UnheardFrames()
	if n, ok := c.network(); ok {
		t.net.Add(n)
		t.hasNet = true
	}
}

// frames returns the frame counters of every call of kind, live or ended.
func (h *Host) frames(kind string) frameTotals {
	h.mu.Lock()
	defer h.mu.Unlock()
	var t frameTotals
	if e := h.ended[kind]; e != nil {
		t = *e
	}
	for _, c := range h.calls {
		if c.kind == kind {
			t.add(c)
		}
	}
	return t
}

// kinds returns the transport kinds the host has had calls of.
func (h *Host) kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for k := range h.ended {
		seen[k] = true
	}
	for _, c := range h.calls {
		seen[c.kind] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// MissedFrames returns how many output frame periods went without a frame
// over every call of kind ("" for all) this host has run: 0 unless the
// machine is overloaded.
func (h *Host) MissedFrames(kind string) uint64 { return h.sumFrames(kind).missed }

// LateFrames returns how many output frames went out a period or more
// behind their slot (caught up, not lost), over every call of kind ("" for
// all).
func (h *Host) LateFrames(kind string) uint64 { return h.sumFrames(kind).late }

func (h *Host) sumFrames(kind string) frameTotals {
	if kind != "" {
		return h.frames(kind)
	}
	var t frameTotals
	for _, k := range h.kinds() {
		f := h.frames(k)
		t.missed, t.late, t.unheard = t.missed+f.missed, t.late+f.late, t.unheard+f.unheard
	}
	return t
}
