package livekit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/livekit/protocol/auth"
	lkproto "github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"
)

// ErrUnauthorized is what Run returns, at once and without retrying, when
// livekit-server refuses the worker's key or secret.
var ErrUnauthorized = errors.New("livekit: the server refused the worker's API key or secret (check LIVEKIT_API_KEY and LIVEKIT_API_SECRET)")

// The server's deadlines (livekit-server pkg/agent): a worker that has not
// registered 10 s after connecting is dropped, and an AvailabilityRequest
// not answered within 10 s counts as a refusal.
const (
	registerTimeout = 10 * time.Second
	// assignTimeout is how long a job accepted in an AvailabilityResponse
	// counts against capacity while its JobAssignment has not come.
	assignTimeout = 10 * time.Second
	dialTimeout   = 10 * time.Second
	writeTimeout  = 5 * time.Second
	// statusInterval is how often the worker tells the server its load.
	statusInterval = 2500 * time.Millisecond
	// pingInterval is how often the worker pings; pongTimeout how long
	// without a pong before it takes the connection for dead and
	// reconnects (the server's own WebSocket pings keep a quiet
	// connection alive, but a half-open TCP connection answers nothing).
	pingInterval = 5 * time.Second
	pongTimeout  = 15 * time.Second
	// cancelGrace is how long Drain and Run wait for jobs to return after
	// their contexts are cancelled.
	cancelGrace = 10 * time.Second
	// readyPing is the timestamp of the ping that follows the
	// registration (the server echoes it in the pong); the worker's other
	// pings carry the time, never 1.
	readyPing = 1
)

// Job is a job livekit-server assigned to the worker: join Room at URL
// with Token (an agent participant's).
type Job struct {
	ID        string
	Room      string
	Token     string
	URL       string
	AgentName string
	Metadata  string
	// Participant is the identity of the participant the job is for,
	// for publisher and participant jobs; empty for room jobs.
	Participant string
	Raw         *lkproto.Job
}

// JobFunc runs a job. Its context ends when the server terminates the job
// (the room closed, the dispatch was deleted) or the worker shuts down;
// the worker reports the job failed if it returns an error other than
// that context's.
type JobFunc func(ctx context.Context, job Job) error

// Worker is a LiveKit agent worker: it registers with livekit-server,
// takes the jobs the server offers while it has capacity, and runs each
// with its JobFunc.
type Worker struct {
	url       string // the server's URL for rooms (ws:// or wss://)
	agentURL  string // its /agent endpoint
	apiKey    string
	apiSecret string
	run       JobFunc
	cfg       workerConfig
	log       *slog.Logger

	running  atomic.Bool
	draining atomic.Bool
	stopping atomic.Bool // Run's context has ended
	cpu      cpuMeter

	mu      sync.Mutex
	id      string
	conn    *websocket.Conn // the registered connection, nil between connections
	jobs    map[string]*runningJob
	pending map[string]time.Time // accepted, not yet assigned: when accepted
	jobsWG  sync.WaitGroup
	changed chan struct{} // closed and replaced when the jobs change
}

type runningJob struct {
	cancel     context.CancelFunc
	terminated atomic.Bool // the server ended it
}

// WorkerOption configures a Worker.
type WorkerOption func(*workerConfig)

type workerConfig struct {
	agentName   string
	namespace   string
	maxJobs     int
	load        func() float64
	threshold   float64
	logger      *slog.Logger
	permissions *lkproto.ParticipantPermission
	backoffMin  time.Duration
	backoffMax  time.Duration
	jobType     lkproto.JobType
	// pingInterval and pongTimeout are the constants of those names
	// unless a test shortens them.
	pingInterval, pongTimeout time.Duration
}

// WithAgentName registers the worker under name. A worker with a name gets
// only the jobs dispatched to that name explicitly; a worker without one
// gets every room's automatic dispatch.
func WithAgentName(name string) WorkerOption {
	return func(c *workerConfig) { c.agentName = name }
}

// WithNamespace registers the worker in a namespace (deprecated by
// LiveKit in favour of agent names; kept for servers that still use it).
func WithNamespace(ns string) WorkerOption {
	return func(c *workerConfig) { c.namespace = ns }
}

// WithMaxJobs caps the jobs the worker runs at once; 0, the default, is
// no cap (the load alone decides).
func WithMaxJobs(n int) WorkerOption {
	return func(c *workerConfig) { c.maxJobs = n }
}

// WithLoad replaces the worker's measure of its load (0 idle, 1 full),
// which the server uses to choose among workers and the worker compares
// with its threshold. The default is the larger of the share of
// WithMaxJobs in use and the process's CPU use over the last interval.
func WithLoad(load func() float64) WorkerOption {
	return func(c *workerConfig) { c.load = load }
}

// DefaultLoadThreshold is the load above which a worker says it is full:
// livekit-server (v1.8.4) offers no job to a worker whose reported load
// is above 0.65 anyway, so a worker that said it was available above it
// would lose the jobs the server then fails to place.
const DefaultLoadThreshold = 0.65

// WithLoadThreshold is the load above which the worker reports itself
// full and refuses jobs (DefaultLoadThreshold unless said).
func WithLoadThreshold(f float64) WorkerOption {
	return func(c *workerConfig) { c.threshold = f }
}

// WithWorkerLogger logs to l instead of slog.Default().
func WithWorkerLogger(l *slog.Logger) WorkerOption {
	return func(c *workerConfig) { c.logger = l }
}

// WithPermissions sets what the jobs' agent participants may do. The
// default: publish, subscribe, publish data and update their own
// attributes (lk.agent.state), not hidden.
func WithPermissions(p *lkproto.ParticipantPermission) WorkerOption {
	return func(c *workerConfig) { c.permissions = p }
}

// WithReconnectBackoff bounds the pause before reconnecting after the
// connection drops: it starts at min and doubles to max (500 ms and 30 s
// unless said).
func WithReconnectBackoff(min, max time.Duration) WorkerOption {
	return func(c *workerConfig) { c.backoffMin, c.backoffMax = min, max }
}

// NewWorker returns a worker for the server at url (ws, wss, http or
// https) with the key pair given; run runs each job.
func NewWorker(serverURL, apiKey, apiSecret string, run JobFunc, opts ...WorkerOption) (*Worker, error) {
	if apiKey == "" || apiSecret == "" {
		return nil, fmt.Errorf("livekit: NewWorker: no API key or secret (set LIVEKIT_API_KEY and LIVEKIT_API_SECRET)")
	}
	if run == nil {
		return nil, errors.New("livekit: NewWorker: no JobFunc")
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("livekit: NewWorker: the server URL: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return nil, fmt.Errorf("livekit: NewWorker: the server URL %q is not ws, wss, http or https", serverURL)
	}
	u.RawQuery, u.Fragment = "", ""
	roomURL := strings.TrimSuffix(u.String(), "/")
	u.Path = strings.TrimSuffix(u.Path, "/") + "/agent"
	cfg := workerConfig{
		threshold:    DefaultLoadThreshold,
		pingInterval: pingInterval,
		pongTimeout:  pongTimeout,
		backoffMin:   500 * time.Millisecond,
		backoffMax:   30 * time.Second,
		jobType:      lkproto.JobType_JT_ROOM,
		permissions: &lkproto.ParticipantPermission{
			CanSubscribe: true, CanPublish: true, CanPublishData: true, CanUpdateMetadata: true,
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.backoffMin <= 0 || cfg.backoffMax < cfg.backoffMin {
		return nil, fmt.Errorf("livekit: NewWorker: reconnect backoff %v to %v", cfg.backoffMin, cfg.backoffMax)
	}
	log := cfg.logger
	if log == nil {
		log = slog.Default()
	}
	w := &Worker{
		url: roomURL, agentURL: u.String(), apiKey: apiKey, apiSecret: apiSecret, run: run, cfg: cfg,
		log:  log.With("component", "livekit-worker", "agent_name", cfg.agentName),
		jobs: map[string]*runningJob{}, pending: map[string]time.Time{}, changed: make(chan struct{}),
	}
	return w, nil
}

// ID is the id the server gave the worker at its last registration, set
// once the server is ready to dispatch to it ("" before).
func (w *Worker) ID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}

// Jobs is how many jobs are running.
func (w *Worker) Jobs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.jobs)
}

// Run registers the worker and serves the server's requests until ctx
// ends, reconnecting with backoff when the connection drops (jobs keep
// running meanwhile). When ctx ends it cancels the running jobs and
// returns once they have returned (or cancelGrace has passed), with
// ctx's error. A key or secret the server refuses ends it at once with
// ErrUnauthorized (and cancels the jobs, as above). A JobFunc that
// ignores its context's end is left running after cancelGrace.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("livekit: Worker.Run called twice")
	}
	// Jobs live in jobsCtx, the connection in connCtx: both keep ctx's
	// values and outlive it, so that at the end the jobs are cancelled
	// first and their last statuses still reach the server.
	jobsCtx, cancelJobs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelJobs()
	connCtx, stopConn := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConn()
	loopDone := make(chan error, 1)
	go func() { loopDone <- w.connectLoop(connCtx, jobsCtx) }()
	select {
	case err := <-loopDone:
		// Refused for good (ErrUnauthorized).
		cancelJobs()
		w.waitJobs(cancelGrace)
		return err
	case <-ctx.Done():
	}
	w.stopping.Store(true)
	w.mu.Lock()
	w.changedLocked()
	w.mu.Unlock()
	cancelJobs()
	w.waitJobs(cancelGrace)
	stopConn()
	<-loopDone
	return ctx.Err()
}

func (w *Worker) connectLoop(ctx, jobsCtx context.Context) error {
	backoff := w.cfg.backoffMin
	for attempt := 1; ; attempt++ {
		registered, err := w.session(ctx, jobsCtx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrUnauthorized) {
			return err
		}
		if registered {
			backoff, attempt = w.cfg.backoffMin, 1
		}
		// Jitter keeps a fleet of workers from reconnecting in step
		// after a server restart.
		d := backoff/2 + rand.N(backoff/2+1)
		w.log.Warn("livekit worker: connection ended; reconnecting", "err", err, "attempt", attempt, "in", d, "jobs", w.Jobs())
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, w.cfg.backoffMax)
	}
}

// session is one connection: dial, register, serve. registered says
// whether the server took the registration.
func (w *Worker) session(ctx, jobsCtx context.Context) (registered bool, err error) {
	token, err := auth.NewAccessToken(w.apiKey, w.apiSecret).
		SetVideoGrant(&auth.VideoGrant{Agent: true}).
		SetValidFor(time.Hour).ToJWT()
	if err != nil {
		return false, fmt.Errorf("livekit: the worker's token: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	c, resp, err := websocket.Dial(dctx, w.agentURL, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": []string{"Bearer " + token}},
	})
	cancel()
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			// The body says why; it may quote the token, so it is not
			// passed on.
			return false, ErrUnauthorized
		}
		return false, fmt.Errorf("livekit: connecting to %s: %w", w.agentURL, err)
	}
	defer c.CloseNow()
	// Job descriptions carry the room's and participants' metadata.
	c.SetReadLimit(4 << 20)

	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if err := write(sctx, c, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_Register{Register: &lkproto.RegisterWorkerRequest{
		Type:               w.cfg.jobType,
		AgentName:          w.cfg.agentName,
		Version:            "holdline",
		Namespace:          nilIfEmpty(w.cfg.namespace),
		AllowedPermissions: w.cfg.permissions,
	}}}); err != nil {
		return false, err
	}
	rctx, cancel := context.WithTimeout(sctx, registerTimeout)
	msg, err := read(rctx, c)
	cancel()
	if err != nil {
		return false, fmt.Errorf("livekit: waiting for the registration: %w", err)
	}
	reg := msg.GetRegister()
	if reg == nil {
		return false, fmt.Errorf("livekit: the server answered the registration with %T", msg.Message)
	}
	w.mu.Lock()
	w.conn = c
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		if w.conn == c {
			w.conn = nil
		}
		w.mu.Unlock()
	}()
	// The server answers the registration before it has made the worker
	// dispatchable (livekit-server v1.8.4 registers its job topic only
	// then): a dispatch in between finds no worker and is lost. It reads
	// the next message only once that is done, so the answer to a ping
	// sent now says the worker is ready; ID is set then.
	if err := write(sctx, c, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_Ping{Ping: &lkproto.WorkerPing{Timestamp: readyPing}}}); err != nil {
		return false, err
	}
	ready := func() {
		w.mu.Lock()
		w.id = reg.WorkerId
		w.mu.Unlock()
		w.log.Info("livekit worker: registered", "worker_id", reg.WorkerId, "server_version", reg.GetServerInfo().GetVersion())
	}

	// The session's goroutines: the reader, the status and the pinger;
	// the first to fail ends the session for all.
	var lastPong atomic.Int64
	lastPong.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		stop(w.statusLoop(sctx, c))
	}()
	go func() {
		defer wg.Done()
		stop(w.pingLoop(sctx, c, &lastPong))
	}()
	err = w.readLoop(sctx, jobsCtx, c, &lastPong, ready)
	stop(err)
	wg.Wait()
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	return true, context.Cause(sctx)
}

// readLoop serves the server's messages; ready is called at the answer to
// the ping sent at registration.
func (w *Worker) readLoop(ctx, jobsCtx context.Context, c *websocket.Conn, lastPong *atomic.Int64, ready func()) error {
	for {
		msg, err := read(ctx, c)
		if err != nil {
			return fmt.Errorf("livekit: reading from the server: %w", err)
		}
		switch m := msg.Message.(type) {
		case *lkproto.ServerMessage_Availability:
			if err := w.answerAvailability(ctx, c, m.Availability); err != nil {
				return err
			}
		case *lkproto.ServerMessage_Assignment:
			w.startJob(jobsCtx, m.Assignment)
		case *lkproto.ServerMessage_Termination:
			w.terminate(m.Termination.GetJobId())
		case *lkproto.ServerMessage_Pong:
			lastPong.Store(time.Now().UnixNano())
			if ready != nil && m.Pong.GetLastTimestamp() == readyPing {
				ready()
				ready = nil
			}
		default:
			w.log.Debug("livekit worker: ignoring a server message", "type", fmt.Sprintf("%T", msg.Message))
		}
	}
}

// answerAvailability accepts a job unless the worker is draining or full;
// an accepted job counts against capacity until it is assigned.
func (w *Worker) answerAvailability(ctx context.Context, c *websocket.Conn, req *lkproto.AvailabilityRequest) error {
	job := req.GetJob()
	id := job.GetId()
	res := &lkproto.AvailabilityResponse{JobId: id}
	why := w.refusal()
	if why == "" {
		res.Available = true
		res.ParticipantIdentity = "agent-" + id
		res.ParticipantName = cmp.Or(w.cfg.agentName, "agent")
		w.mu.Lock()
		w.pending[id] = time.Now()
		w.mu.Unlock()
	}
	w.log.Debug("livekit worker: availability", "job_id", id, "room", job.GetRoom().GetName(), "accepted", res.Available, "refused_because", why)
	return write(ctx, c, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_Availability{Availability: res}})
}

// refusal says why the worker cannot take one more job now, "" if it can.
func (w *Worker) refusal() string {
	if w.draining.Load() {
		return "draining"
	}
	if w.stopping.Load() {
		return "shutting down"
	}
	w.mu.Lock()
	now := time.Now()
	for id, at := range w.pending {
		if now.Sub(at) > assignTimeout {
			delete(w.pending, id)
		}
	}
	n := len(w.jobs) + len(w.pending)
	w.mu.Unlock()
	if w.cfg.maxJobs > 0 && n >= w.cfg.maxJobs {
		return fmt.Sprintf("%d jobs of %d", n, w.cfg.maxJobs)
	}
	if l := w.load(); l > w.cfg.threshold {
		return fmt.Sprintf("load %.2f above %.2f", l, w.cfg.threshold)
	}
	return ""
}

func (w *Worker) load() float64 {
	if w.cfg.load != nil {
		return w.cfg.load()
	}
	l := w.cpu.last()
	if w.cfg.maxJobs > 0 {
		l = max(l, float64(w.Jobs())/float64(w.cfg.maxJobs))
	}
	return l
}

func (w *Worker) startJob(jobsCtx context.Context, a *lkproto.JobAssignment) {
	raw := a.GetJob()
	id := raw.GetId()
	job := Job{
		ID: id, Room: raw.GetRoom().GetName(), Token: a.GetToken(), URL: a.GetUrl(),
		AgentName: raw.GetAgentName(), Metadata: raw.GetMetadata(), Participant: raw.GetParticipant().GetIdentity(), Raw: raw,
	}
	if job.URL == "" {
		// The open-source server leaves it empty: join where the
		// worker registered.
		job.URL = w.url
	}
	jctx, cancel := context.WithCancel(jobsCtx)
	rj := &runningJob{cancel: cancel}
	w.mu.Lock()
	delete(w.pending, id)
	if _, dup := w.jobs[id]; dup {
		w.mu.Unlock()
		cancel()
		w.log.Warn("livekit worker: a job assigned twice; ignoring the second", "job_id", id)
		return
	}
	w.jobs[id] = rj
	w.jobsWG.Add(1)
	w.changedLocked()
	w.mu.Unlock()
	log := w.log.With("job_id", id, "room", job.Room)
	log.Info("livekit worker: job assigned")
	go func() {
		defer w.jobsWG.Done()
		defer cancel()
		// livekit-server v1.8.4 records the job only after it has written
		// the assignment, so statuses that overtake that are ignored: a job
		// that ends within a few milliseconds stays "running" on the
		// server until this connection closes. Nothing here can tell.
		w.updateJob(jobsCtx, id, lkproto.JobStatus_JS_RUNNING, "")
		err := w.runJob(jctx, job)
		status, msg := lkproto.JobStatus_JS_SUCCESS, ""
		// A job the server or the worker ended returns its context's
		// error: that is an end, not a failure.
		if err != nil && !(jctx.Err() != nil && errors.Is(err, context.Canceled)) {
			status, msg = lkproto.JobStatus_JS_FAILED, err.Error()
			log.Warn("livekit worker: job failed", "err", err)
		} else {
			log.Info("livekit worker: job ended", "terminated_by_server", rj.terminated.Load())
		}
		w.mu.Lock()
		delete(w.jobs, id)
		w.changedLocked()
		w.mu.Unlock()
		// Said on the current connection; a server that has lost the
		// job (the connection dropped since) ignores it.
		w.updateJob(context.WithoutCancel(jobsCtx), id, status, msg)
	}()
}

// runJob runs the JobFunc; a panic fails the job, not the worker.
func (w *Worker) runJob(ctx context.Context, job Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("livekit worker: job panicked", "job_id", job.ID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("livekit: job %s panicked: %v", job.ID, p)
		}
	}()
	return w.run(ctx, job)
}

func (w *Worker) terminate(id string) {
	w.mu.Lock()
	rj := w.jobs[id]
	w.mu.Unlock()
	if rj == nil {
		w.log.Debug("livekit worker: termination of a job not running", "job_id", id)
		return
	}
	w.log.Info("livekit worker: the server terminated a job", "job_id", id)
	rj.terminated.Store(true)
	rj.cancel()
}

func (w *Worker) updateJob(ctx context.Context, id string, status lkproto.JobStatus, msg string) {
	err := w.send(ctx, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_UpdateJob{UpdateJob: &lkproto.UpdateJobStatus{
		JobId: id, Status: status, Error: msg,
	}}})
	if err != nil {
		w.log.Debug("livekit worker: job status not sent", "job_id", id, "status", status, "err", err)
	}
}

// sendStatus tells the server the worker's load and whether it takes jobs.
func (w *Worker) sendStatus(ctx context.Context, c *websocket.Conn) error {
	status := lkproto.WorkerStatus_WS_AVAILABLE
	if w.refusal() != "" {
		status = lkproto.WorkerStatus_WS_FULL
	}
	return write(ctx, c, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_UpdateWorker{UpdateWorker: &lkproto.UpdateWorkerStatus{
		Status: &status, Load: float32(w.load()), JobCount: uint32(w.Jobs()),
	}}})
}

// statusLoop sends the status every statusInterval and whenever the jobs
// change or the worker starts draining.
func (w *Worker) statusLoop(ctx context.Context, c *websocket.Conn) error {
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	w.cpu.sample()
	for {
		if err := w.sendStatus(ctx, c); err != nil {
			return err
		}
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			w.cpu.sample()
		case <-changed:
		}
	}
}

func (w *Worker) pingLoop(ctx context.Context, c *websocket.Conn, lastPong *atomic.Int64) error {
	t := time.NewTicker(w.cfg.pingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if since := time.Since(time.Unix(0, lastPong.Load())); since > w.cfg.pongTimeout {
			return fmt.Errorf("livekit: no pong from the server for %v", since.Round(time.Millisecond))
		}
		if err := write(ctx, c, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_Ping{Ping: &lkproto.WorkerPing{Timestamp: time.Now().UnixMilli()}}}); err != nil {
			return err
		}
	}
}

// changedLocked wakes the status loop; w.mu is held.
func (w *Worker) changedLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// Drain stops taking jobs (the worker tells the server it is full and
// refuses offers) and waits for the running jobs to end. When ctx ends
// first it cancels them, waits briefly for them to return, and returns
// ctx's error; their JobFuncs decide what to keep.
func (w *Worker) Drain(ctx context.Context) error {
	w.draining.Store(true)
	w.mu.Lock()
	w.changedLocked()
	w.mu.Unlock()
	w.log.Info("livekit worker: draining", "jobs", w.Jobs())
	for {
		w.mu.Lock()
		n, changed := len(w.jobs), w.changed
		w.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			w.log.Warn("livekit worker: drain ran out of time; cancelling the jobs", "jobs", n)
			w.mu.Lock()
			for _, rj := range w.jobs {
				rj.cancel()
			}
			w.mu.Unlock()
			w.waitJobs(cancelGrace)
			return fmt.Errorf("livekit: draining with %d jobs running: %w", n, ctx.Err())
		}
	}
}

// waitJobs waits for the jobs' goroutines, at most d.
func (w *Worker) waitJobs(d time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.jobsWG.Wait()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		// The goroutine above ends with the last job; nothing else is
		// left behind.
		w.log.Error("livekit worker: jobs still running after their contexts were cancelled", "jobs", w.Jobs(), "waited", d)
	}
}

// send writes msg on the current connection, if there is one.
func (w *Worker) send(ctx context.Context, msg *lkproto.WorkerMessage) error {
	w.mu.Lock()
	c := w.conn
	w.mu.Unlock()
	if c == nil {
		return errors.New("livekit: not connected")
	}
	return write(ctx, c, msg)
}

// write sends msg with a deadline. coder/websocket allows concurrent
// writers; a write that times out closes the connection, which then ends
// the session.
func write(ctx context.Context, c *websocket.Conn, msg *lkproto.WorkerMessage) error {
	b, err := proto.Marshal(msg)
	if err != nil {
		return fmt.Errorf("livekit: encoding %T: %w", msg.Message, err)
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := c.Write(wctx, websocket.MessageBinary, b); err != nil {
		return fmt.Errorf("livekit: sending %T: %w", msg.Message, err)
	}
	return nil
}

func read(ctx context.Context, c *websocket.Conn) (*lkproto.ServerMessage, error) {
	typ, b, err := c.Read(ctx)
	if err != nil {
		return nil, err
	}
	msg := &lkproto.ServerMessage{}
	if typ == websocket.MessageText {
		return nil, errors.New("a text message; the worker speaks protobuf")
	}
	if err := proto.Unmarshal(b, msg); err != nil {
		return nil, fmt.Errorf("decoding a server message: %w", err)
	}
	return msg, nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// cpuMeter is the process's CPU use, a share of all the machine's cores,
// over the interval between its last two samples.
type cpuMeter struct {
	mu   sync.Mutex
	at   time.Time
	used time.Duration
	frac float64
}

func (m *cpuMeter) sample() {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return
	}
	used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if dt := now.Sub(m.at); !m.at.IsZero() && dt >= 100*time.Millisecond {
		m.frac = float64(used-m.used) / float64(dt) / float64(goruntime.NumCPU())
	}
	m.at, m.used = now, used
}

func (m *cpuMeter) last() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.frac
}
