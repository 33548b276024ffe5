package livekit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-logr/logr"
	"github.com/livekit/protocol/auth"
	lkproto "github.com/livekit/protocol/livekit"
	protologger "github.com/livekit/protocol/logger"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/holdline/holdline/internal/livekittest"
)

func TestMain(m *testing.M) {
	// server-sdk-go and pion log every level to stderr otherwise.
	lksdk.SetLogger(protologger.LogRLogger(logr.Discard()))
	os.Exit(m.Run())
}

// jobLog records the jobs a worker's JobFunc saw.
type jobLog struct {
	mu      sync.Mutex
	started []Job
	ended   map[string]error
	wake    chan struct{}
}

func newJobLog() *jobLog { return &jobLog{ended: map[string]error{}, wake: make(chan struct{})} }

func (l *jobLog) note(f func()) {
	l.mu.Lock()
	f()
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

func (l *jobLog) jobs() []Job {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.started)
}

func (l *jobLog) inRoom(room string) []Job {
	var out []Job
	for _, j := range l.jobs() {
		if j.Room == room {
			out = append(out, j)
		}
	}
	return out
}

func (l *jobLog) endOf(id string) (error, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	err, ok := l.ended[id]
	return err, ok
}

// wait waits until cond holds or ctx ends.
func (l *jobLog) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		l.mu.Lock()
		wake := l.wake
		l.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-wake:
		}
	}
}

// jobFunc records the job, runs body (nil: wait for the job's end) and
// records how it ended.
func (l *jobLog) jobFunc(body JobFunc) JobFunc {
	return func(ctx context.Context, job Job) error {
		l.note(func() { l.started = append(l.started, job) })
		var err error
		if body != nil {
			err = body(ctx, job)
		} else {
			<-ctx.Done()
			err = ctx.Err()
		}
		l.note(func() { l.ended[job.ID] = err })
		return err
	}
}

// runWorker runs w until the test ends or stop is called; stop returns
// what Run returned, and the test fails if that is not the end of its
// context.
func runWorker(t *testing.T, w *Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(cancelGrace + 5*time.Second):
				err = errors.New("Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v; want context.Canceled", err)
		}
	})
	return stop
}

// waitFor polls cond every 20 ms until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

func registered(ctx context.Context, ws ...*Worker) error {
	return waitFor(ctx, "the workers' registration", func() bool {
		for _, w := range ws {
			if w.ID() == "" {
				return false
			}
		}
		return true
	})
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startWorker runs a worker registered as booking with a load of 0 (and
// opts), at url with srv's key pair, until the test ends, and returns once
// it is registered.
func startWorker(ctx context.Context, t *testing.T, url string, srv *livekittest.Server, run JobFunc, opts ...WorkerOption) *Worker {
	t.Helper()
	w, err := NewWorker(url, srv.APIKey, srv.APISecret, run,
		append([]WorkerOption{WithAgentName("booking"), WithLoad(zeroLoad), WithWorkerLogger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	if err := registered(ctx, w); err != nil {
		t.Fatal(err)
	}
	return w
}

// zeroLoad keeps tests from depending on how busy the machine is.
func zeroLoad() float64 { return 0 }

// A worker registered under a name gets the job dispatched to that name
// explicitly, with the dispatch's metadata, the worker's own URL to join
// at, and a token that joins the room as an agent participant; deleting
// the room ends the job's context.
func TestWorkerExplicitDispatch(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	jobs := newJobLog()
	kinds := make(chan lkproto.ParticipantInfo_Kind, 1)
	start := time.Now()
	w := startWorker(ctx, t, srv.URL, srv, jobs.jobFunc(func(ctx context.Context, job Job) error {
		// The job ends when its context does or the room goes.
		left := make(chan struct{})
		cb := lksdk.NewRoomCallback()
		cb.OnDisconnected = func() { close(left) }
		room, err := lksdk.ConnectToRoomWithToken(job.URL, job.Token, cb, lksdk.WithAutoSubscribe(false))
		if err != nil {
			return err
		}
		defer room.Disconnect()
		kinds <- lkproto.ParticipantInfo_Kind(room.LocalParticipant.Kind())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-left:
			return nil
		}
	}))
	t.Logf("registered in %v as %s", time.Since(start).Round(time.Millisecond), w.ID())

	start = time.Now()
	if err := srv.Dispatch(ctx, "explicit", "booking", `{"caller":"+15550100"}`); err != nil {
		t.Fatal(err)
	}
	if err := jobs.wait(ctx, "the job", func() bool { return len(jobs.jobs()) == 1 }); err != nil {
		t.Fatal(err)
	}
	t.Logf("dispatch to JobFunc: %v", time.Since(start).Round(time.Millisecond))
	job := jobs.jobs()[0]
	if job.Room != "explicit" || job.AgentName != "booking" || job.Metadata != `{"caller":"+15550100"}` || job.URL != srv.URL || job.Token == "" || job.ID == "" || job.Raw == nil {
		t.Errorf("job %+v; want room explicit, agent booking, the metadata, URL %s and a token", job, srv.URL)
	}
	select {
	case k := <-kinds:
		if k != lkproto.ParticipantInfo_AGENT {
			t.Errorf("the job's participant joined as %v; want AGENT", k)
		}
	case <-ctx.Done():
		t.Fatal("the job never joined the room")
	}
	// The server sees it too.
	err := waitFor(ctx, "the agent in the room", func() bool {
		ps, err := srv.Participants(ctx, "explicit")
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.Identity == "agent-"+job.ID && p.Kind == lkproto.ParticipantInfo_AGENT {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	if w.Jobs() != 1 {
		t.Errorf("Jobs() = %d; want 1", w.Jobs())
	}

	start = time.Now()
	if err := srv.DeleteRoom(ctx, "explicit"); err != nil {
		t.Fatal(err)
	}
	if err := jobs.wait(ctx, "the job's end", func() bool { _, ok := jobs.endOf(job.ID); return ok }); err != nil {
		t.Fatal(err)
	}
	t.Logf("room deleted to the job's context ended: %v", time.Since(start).Round(time.Millisecond))
	if err := waitFor(ctx, "no jobs", func() bool { return w.Jobs() == 0 }); err != nil {
		t.Fatal(err)
	}
}

// A worker without a name gets a job for every room that is created, here
// by a caller joining it; a named worker gets none of them.
func TestWorkerAutomaticDispatch(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	auto, named := newJobLog(), newJobLog()
	startWorker(ctx, t, srv.URL, srv, auto.jobFunc(nil), WithAgentName(""))
	startWorker(ctx, t, srv.URL, srv, named.jobFunc(nil))
	c, err := livekittest.DialCaller(ctx, srv, "walk-in", "caller")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := auto.wait(ctx, "the automatic job", func() bool { return len(auto.inRoom("walk-in")) == 1 }); err != nil {
		t.Fatal(err)
	}
	if j := auto.jobs()[0]; j.AgentName != "" || j.Raw.GetType() != lkproto.JobType_JT_ROOM {
		t.Errorf("automatic job %+v; want no agent name, a room job", j)
	}
	if n := len(named.jobs()); n != 0 {
		t.Errorf("the named worker got %d jobs from automatic dispatch; want 0", n)
	}
}

// countingProxy is a TCP proxy in front of livekit-server that counts the
// connections it accepts and can cut or freeze them.
type countingProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int32
	frozen   atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, target string) *countingProxy {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			s, err := net.Dial("tcp4", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(c, s)
			go p.pipe(s, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

// pipe copies until either side closes; while frozen it holds what it
// read (a peer that has stopped answering, its connection still open).
func (p *countingProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.frozen.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *countingProxy) url() string { return "ws://" + p.ln.Addr().String() }

// cut closes every connection through the proxy.
func (p *countingProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A wrong secret, or a key the server does not have, ends Run at once
// with ErrUnauthorized after a single connection.
func TestWorkerWrongSecret(t *testing.T) {
	srv := livekittest.StartT(t, livekittest.WithExtraKey("otherkey", "other-secret-0123456789abcdef0123456789"))
	for _, tc := range []struct{ name, key, secret string }{
		{"wrong secret", srv.APIKey, "not-the-secret-0123456789abcdef0123456789"},
		{"unknown key", "nosuchkey", srv.APISecret},
		{"another key's secret", "otherkey", srv.APISecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProxy(t, srv.HTTPURL[len("http://"):])
			w, err := NewWorker(p.url(), tc.key, tc.secret, func(context.Context, Job) error { return nil },
				WithWorkerLogger(testLogger(t)), WithReconnectBackoff(10*time.Millisecond, 20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err = w.Run(ctx)
			took := time.Since(start)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Run returned %v after %v; want ErrUnauthorized", err, took)
			}
			if took > 3*time.Second || p.accepted.Load() != 1 {
				t.Errorf("Run took %v and %d connections; want one connection, within 3 s", took, p.accepted.Load())
			}
			t.Logf("%v after %v and %d connection", err, took.Round(time.Millisecond), p.accepted.Load())
		})
	}
}

// Two workers under one name, each taking three jobs at most: five rooms
// dispatched one after another are spread over both (the full one says
// so and refuses, and the server asks the other).
func TestWorkersShareJobs(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	logs := []*jobLog{newJobLog(), newJobLog()}
	var ws []*Worker
	for _, l := range logs {
		var w *Worker
		// A load below 0.65 with three jobs: the server offers nothing to
		// workers above that (TestLoadAboveServerTargetGetsNoJobs).
		w, err := NewWorker(srv.URL, srv.APIKey, srv.APISecret, l.jobFunc(nil), WithAgentName("booking"), WithMaxJobs(3),
			WithLoad(func() float64 { return float64(w.Jobs()) / 5 }), WithWorkerLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		runWorker(t, w)
	}
	if err := registered(ctx, ws...); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		room := fmt.Sprintf("share-%d", i)
		if err := srv.Dispatch(ctx, room, "booking", ""); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(ctx, "the job in "+room, func() bool { return len(logs[0].inRoom(room))+len(logs[1].inRoom(room)) == 1 }); err != nil {
			t.Fatal(err)
		}
	}
	a, b := ws[0].Jobs(), ws[1].Jobs()
	if a+b != 5 || a < 2 || b < 2 {
		t.Errorf("the workers run %d and %d jobs; want 5 in all, at least 2 each", a, b)
	}
	t.Logf("jobs: %d and %d", a, b)
}

// What livekit-server v1.8.4 does when a worker's connection drops with a
// job running: nothing. The job is not offered to another worker (here
// one registered and idle, for 15 s), the job's agent stays in the room,
// the worker reconnects under a new id and its job keeps running; the
// server never hears of that job again.
func TestWorkerConnectionDropDoesNotRedispatch(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := newProxy(t, srv.HTTPURL[len("http://"):])
	la, lb := newJobLog(), newJobLog()
	joined := make(chan string, 1)
	// The job joins at the server itself, not through the proxy, so that
	// cutting the worker's connection leaves the room's alone.
	wa := startWorker(ctx, t, p.url(), srv, la.jobFunc(func(ctx context.Context, job Job) error {
		room, err := lksdk.ConnectToRoomWithToken(srv.URL, job.Token, lksdk.NewRoomCallback(), lksdk.WithAutoSubscribe(false))
		if err != nil {
			return err
		}
		defer room.Disconnect()
		joined <- room.LocalParticipant.Identity()
		<-ctx.Done()
		return ctx.Err()
	}), WithReconnectBackoff(50*time.Millisecond, 200*time.Millisecond))
	if err := srv.Dispatch(ctx, "dropped", "booking", ""); err != nil {
		t.Fatal(err)
	}
	var agent string
	select {
	case agent = <-joined:
	case <-ctx.Done():
		t.Fatal("the job never joined")
	}
	// Only now the second worker, so that the job could only have gone to
	// the first.
	startWorker(ctx, t, srv.URL, srv, lb.jobFunc(nil))
	oldID := wa.ID()
	p.cut()
	cutAt := time.Now()
	if err := waitFor(ctx, "the worker's new registration", func() bool { id := wa.ID(); return id != "" && id != oldID }); err != nil {
		t.Fatal(err)
	}
	t.Logf("reconnected %v after the cut, as %s (was %s)", time.Since(cutAt).Round(time.Millisecond), wa.ID(), oldID)
	// Nothing comes for the room: not to the other worker, not to the
	// reconnected one.
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	defer wcancel()
	err := waitFor(wctx, "a second job for the room", func() bool {
		return len(lb.inRoom("dropped")) > 0 || len(la.inRoom("dropped")) > 1
	})
	if err == nil {
		t.Fatalf("the job was dispatched again %v after the cut: %+v %+v", time.Since(cutAt), la.inRoom("dropped"), lb.inRoom("dropped"))
	}
	if wa.Jobs() != 1 {
		t.Errorf("the first worker runs %d jobs; want its job still running", wa.Jobs())
	}
	ps, err := srv.Participants(ctx, "dropped")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ps, func(p *lkproto.ParticipantInfo) bool { return p.Identity == agent }) {
		t.Errorf("the job's agent %s left the room", agent)
	}
	if ds := dispatchesOf(ctx, t, srv, "dropped", "booking"); len(ds) != 1 || len(ds[0].GetState().GetJobs()) != 1 {
		t.Errorf("dispatches %v; want one with its one job", ds)
	}
	// The server has forgotten the job: deleting the room does not end it
	// through the worker (the agent participant is disconnected, and the
	// JobTermination has no worker to go to).
	if err := srv.DeleteRoom(ctx, "dropped"); err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	if err := la.wait(dctx, "the job's end", func() bool { _, ok := la.endOf(la.inRoom("dropped")[0].ID); return ok }); err == nil {
		t.Errorf("the job ended when its room was deleted; the server had forgotten it")
	}
}

// rawWorker is a worker of the test's own, speaking the protocol by hand:
// it registers, then does only what the test tells it.
type rawWorker struct {
	c    *websocket.Conn
	msgs chan *lkproto.ServerMessage
}

func dialRaw(ctx context.Context, t *testing.T, srv *livekittest.Server, agentName string) *rawWorker {
	t.Helper()
	token, err := auth.NewAccessToken(srv.APIKey, srv.APISecret).SetVideoGrant(&auth.VideoGrant{Agent: true}).ToJWT()
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := websocket.Dial(ctx, srv.URL+"/agent", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": []string{"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	r := &rawWorker{c: c, msgs: make(chan *lkproto.ServerMessage, 64)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		c.CloseNow()
		wg.Wait()
	})
	r.send(ctx, t, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_Register{Register: &lkproto.RegisterWorkerRequest{AgentName: agentName}}})
	if msg, err := read(ctx, c); err != nil || msg.GetRegister() == nil {
		t.Fatalf("registering: %v %v", msg, err)
	}
	// Dispatchable once a ping after the registration is answered (see
	// Worker.session).
	r.send(ctx, t, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_Ping{Ping: &lkproto.WorkerPing{Timestamp: 7}}})
	for {
		msg, err := read(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if msg.GetPong().GetLastTimestamp() == 7 {
			break
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(r.msgs)
		for {
			msg, err := read(context.Background(), c)
			if err != nil {
				return
			}
			r.msgs <- msg
		}
	}()
	return r
}

func (r *rawWorker) send(ctx context.Context, t *testing.T, msg *lkproto.WorkerMessage) {
	t.Helper()
	if err := write(ctx, r.c, msg); err != nil {
		t.Fatal(err)
	}
}

// next returns the next message of the kind pick selects (the others are
// dropped), or nil when ctx ends first.
func (r *rawWorker) next(ctx context.Context, pick func(*lkproto.ServerMessage) bool) *lkproto.ServerMessage {
	for {
		select {
		case m, ok := <-r.msgs:
			if !ok {
				return nil
			}
			if pick(m) {
				return m
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// setLoad tells the server the worker's load and returns once the server
// has taken it: a ping sent after it has been answered.
func (r *rawWorker) setLoad(ctx context.Context, t *testing.T, load float32) {
	t.Helper()
	r.send(ctx, t, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_UpdateWorker{UpdateWorker: &lkproto.UpdateWorkerStatus{Load: load}}})
	r.send(ctx, t, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_Ping{Ping: &lkproto.WorkerPing{Timestamp: 42}}})
	if r.next(ctx, func(m *lkproto.ServerMessage) bool { return m.GetPong().GetLastTimestamp() == 42 }) == nil {
		t.Fatal("no pong")
	}
}

func isOffer(m *lkproto.ServerMessage) bool      { return m.GetAvailability() != nil }
func isAssignment(m *lkproto.ServerMessage) bool { return m.GetAssignment() != nil }

// dispatchesOf is the dispatches of room to agentName (a room's creation
// also makes one for the workers without a name).
func dispatchesOf(ctx context.Context, t *testing.T, srv *livekittest.Server, room, agentName string) []*lkproto.AgentDispatch {
	t.Helper()
	ds, err := srv.Dispatches(ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	var out []*lkproto.AgentDispatch
	for _, d := range ds {
		if d.AgentName == agentName {
			out = append(out, d)
		}
	}
	return out
}

// The server waits about 3 s for an answer to an AvailabilityRequest,
// counted from the dispatch (its RPC's timeout, psrpc's default, ends the
// wait well before the 10 s its worker code allows): an answer 1.5 s
// after the offer gets the job, one after 5 s is ignored and the job is
// lost. (The server's log shows the end at 3.0 s.)
func TestAvailabilityDeadline(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := dialRaw(ctx, t, srv, "booking")
	for _, tc := range []struct {
		room     string
		after    time.Duration
		assigned bool
	}{{"answered-in-1.5s", 1500 * time.Millisecond, true}, {"answered-in-5s", 5 * time.Second, false}} {
		if err := srv.Dispatch(ctx, tc.room, "booking", ""); err != nil {
			t.Fatal(err)
		}
		offer := r.next(ctx, isOffer)
		if offer == nil {
			t.Fatal("no offer")
		}
		offered := time.Now()
		id := offer.GetAvailability().GetJob().GetId()
		sctx, scancel := context.WithTimeout(ctx, tc.after)
		<-sctx.Done() // the answer's delay is what is tested
		scancel()
		r.send(ctx, t, &lkproto.WorkerMessage{Message: &lkproto.WorkerMessage_Availability{Availability: &lkproto.AvailabilityResponse{
			JobId: id, Available: true, ParticipantIdentity: "agent-" + id,
		}}})
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		a := r.next(actx, isAssignment)
		acancel()
		if (a != nil) != tc.assigned {
			t.Errorf("%s: answered %v after the offer: assigned %v; want %v", tc.room, time.Since(offered).Round(time.Millisecond), a != nil, tc.assigned)
		}
		if tc.assigned {
			// (ListDispatch did not always show a job assigned this
			// late; the assignment is what counts.)
			continue
		}
		ds := dispatchesOf(ctx, t, srv, tc.room, "booking")
		if len(ds) != 1 || len(ds[0].GetState().GetJobs()) != 0 {
			t.Errorf("%s: dispatches %v; want one, without jobs", tc.room, ds)
		}
	}
}

// A worker that has stopped answering stays registered (the server sets
// no read deadline on a worker's connection and wants no pongs), and a job
// offered to it is lost: the server does not ask another worker, though
// one was available by then. Later jobs may be offered to it again.
func TestHungWorkerLosesTheJob(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	hung := dialRaw(ctx, t, srv, "booking")
	if err := srv.Dispatch(ctx, "hung", "booking", ""); err != nil {
		t.Fatal(err)
	}
	offer := hung.next(ctx, isOffer)
	if offer == nil || offer.GetAvailability().GetJob().GetRoom().GetName() != "hung" {
		t.Fatalf("offered %v; want the job in room hung", offer)
	}
	offeredAt := time.Now()
	jobs := newJobLog()
	startWorker(ctx, t, srv.URL, srv, jobs.jobFunc(nil))
	// Well past the server's wait.
	wctx, wcancel := context.WithDeadline(ctx, offeredAt.Add(10*time.Second))
	defer wcancel()
	if err := jobs.wait(wctx, "the job", func() bool { return len(jobs.inRoom("hung")) > 0 }); err == nil {
		t.Fatalf("the job went to the other worker %v after it was offered to the hung one", time.Since(offeredAt))
	}
	if ds := dispatchesOf(ctx, t, srv, "hung", "booking"); len(ds) != 1 || len(ds[0].GetState().GetJobs()) != 0 {
		t.Errorf("dispatches %v; want one, without jobs", ds)
	}
	// New dispatches go to either; those offered to the hung worker are
	// lost too. Dispatch until one reaches the worker that answers.
	lost := 0
	for i := 0; len(jobs.jobs()) == 0; i++ {
		room := fmt.Sprintf("hung-%d", i)
		if err := srv.Dispatch(ctx, room, "booking", ""); err != nil {
			t.Fatal(err)
		}
		jctx, jcancel := context.WithTimeout(ctx, 6*time.Second)
		err := jobs.wait(jctx, "a job", func() bool { return len(jobs.jobs()) > 0 })
		jcancel()
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		if err != nil {
			lost++
		}
	}
	t.Logf("%d more jobs lost to the hung worker before one reached the other", lost)
}

// livekit-server's dispatch skips a node whose available workers all
// report a load of 0.65 or more (its "affinity" is the sum of 0.65 − load
// over them, and a node with 0 is never chosen): a worker at 0.7 that
// still says it is available gets no job offered, and the job is lost; at
// 0.6 it gets the next.
func TestLoadAboveServerTargetGetsNoJobs(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := dialRaw(ctx, t, srv, "booking")
	r.setLoad(ctx, t, 0.7)
	if err := srv.Dispatch(ctx, "busy", "booking", ""); err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithTimeout(ctx, 6*time.Second)
	offer := r.next(octx, isOffer)
	ocancel()
	if offer != nil {
		t.Fatalf("a worker at load 0.7 was offered %v", offer)
	}
	if ds := dispatchesOf(ctx, t, srv, "busy", "booking"); len(ds) != 1 || len(ds[0].GetState().GetJobs()) != 0 {
		t.Errorf("dispatches %v; want one, without jobs", ds)
	}
	r.setLoad(ctx, t, 0.6)
	if err := srv.Dispatch(ctx, "less-busy", "booking", ""); err != nil {
		t.Fatal(err)
	}
	if r.next(ctx, isOffer) == nil {
		t.Fatal("a worker at load 0.6 was offered nothing")
	}
}

// Drain: the worker refuses new jobs (they go to the other worker) and
// returns once its running job has ended; a drain that runs out of time
// cancels the jobs still running.
func TestWorkerDrain(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	la, lb := newJobLog(), newJobLog()
	release := make(chan struct{})
	wa := startWorker(ctx, t, srv.URL, srv, la.jobFunc(func(ctx context.Context, job Job) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	if err := srv.Dispatch(ctx, "before", "booking", ""); err != nil {
		t.Fatal(err)
	}
	if err := la.wait(ctx, "the first job", func() bool { return len(la.jobs()) == 1 }); err != nil {
		t.Fatal(err)
	}
	wb := startWorker(ctx, t, srv.URL, srv, lb.jobFunc(nil))

	drained := make(chan error, 1)
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	defer dcancel()
	go func() { drained <- wa.Drain(dctx) }()
	for i := range 3 {
		room := fmt.Sprintf("during-%d", i)
		if err := srv.Dispatch(ctx, room, "booking", ""); err != nil {
			t.Fatal(err)
		}
		if err := lb.wait(ctx, "the job in "+room, func() bool { return len(lb.inRoom(room)) == 1 }); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(la.jobs()); n != 1 {
		t.Errorf("the draining worker took %d jobs; want only its first", n)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with a job running", err)
	default:
	}
	close(release)
	select {
	case err := <-drained:
		if err != nil {
			t.Errorf("Drain: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Drain did not return after the job ended")
	}
	if err, _ := la.endOf(la.jobs()[0].ID); err != nil || wa.Jobs() != 0 {
		t.Errorf("the job ended with %v, %d jobs left; want nil and 0", err, wa.Jobs())
	}

	// Out of time: the second worker's three jobs are cancelled.
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer scancel()
	err := wb.Drain(sctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain out of time returned %v; want DeadlineExceeded", err)
	}
	for _, j := range lb.jobs() {
		if err, ok := lb.endOf(j.ID); !ok || !errors.Is(err, context.Canceled) {
			t.Errorf("job %s in %s ended %v (%v); want cancelled", j.ID, j.Room, err, ok)
		}
	}
}

// withPing shortens the worker's pings for a test.
func withPing(interval, timeout time.Duration) WorkerOption {
	return func(c *workerConfig) { c.pingInterval, c.pongTimeout = interval, timeout }
}

// serverSaysJobEnded waits until the server's log says job id ended with
// status (and the error text, if any).
func serverSaysJobEnded(ctx context.Context, srv *livekittest.Server, id, status, errText string) error {
	return waitFor(ctx, fmt.Sprintf("the server's log to say job %s ended %s", id, status), func() bool {
		for _, line := range strings.Split(srv.Log(), "\n") {
			if strings.Contains(line, "job ended") && strings.Contains(line, id) && strings.Contains(line, status) && strings.Contains(line, errText) {
				return true
			}
		}
		return false
	})
}

// What the JobFunc returns reaches the server: nil as SUCCESS, an error
// or a panic as FAILED with its text; a job cancelled because the worker
// shuts down ends SUCCESS, said before the connection closes.
func TestJobStatusReachesTheServer(t *testing.T) {
	srv := livekittest.StartT(t, livekittest.WithLogLevel("info"))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	jobs := newJobLog()
	run := jobs.jobFunc(func(ctx context.Context, job Job) error {
		// livekit-server v1.8.4 notes a job as running only after it has
		// sent the assignment: a status that comes back sooner is for a
		// job it does not know, and ignored. A real job takes longer than
		// that to end; this one waits until the server lists it.
		err := waitFor(ctx, "the server to list the job", func() bool {
			ds, err := srv.Dispatches(ctx, job.Room)
			if err != nil {
				return false
			}
			for _, d := range ds {
				if slices.ContainsFunc(d.GetState().GetJobs(), func(j *lkproto.Job) bool { return j.Id == job.ID }) {
					return true
				}
			}
			return false
		})
		if err != nil {
			return err
		}
		switch job.Room {
		case "fails":
			return errors.New("the model is down")
		case "panics":
			panic("a bug")
		case "stays":
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	w, err := NewWorker(srv.URL, srv.APIKey, srv.APISecret, run, WithAgentName("booking"), WithLoad(zeroLoad), WithWorkerLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	if err := registered(ctx, w); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ room, status, errText string }{
		{"succeeds", "JS_SUCCESS", ""},
		{"fails", "JS_FAILED", "the model is down"},
		{"panics", "JS_FAILED", "panicked: a bug"},
	} {
		if err := srv.Dispatch(ctx, tc.room, "booking", ""); err != nil {
			t.Fatal(err)
		}
		if err := jobs.wait(ctx, "the job in "+tc.room, func() bool { return len(jobs.inRoom(tc.room)) == 1 }); err != nil {
			t.Fatal(err)
		}
		if err := serverSaysJobEnded(ctx, srv, jobs.inRoom(tc.room)[0].ID, tc.status, tc.errText); err != nil {
			t.Error(err)
		}
	}
	if err := srv.Dispatch(ctx, "stays", "booking", ""); err != nil {
		t.Fatal(err)
	}
	if err := jobs.wait(ctx, "the job in stays", func() bool { return len(jobs.inRoom("stays")) == 1 }); err != nil {
		t.Fatal(err)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v; want context.Canceled", err)
	}
	if err := serverSaysJobEnded(ctx, srv, jobs.inRoom("stays")[0].ID, "JS_SUCCESS", ""); err != nil {
		t.Error(err)
	}
}

// A worker that shuts down with a job running ends the job (its agent
// leaves the room) and says so; livekit-server does not give the room's
// dispatch to the other worker, registered and idle.
func TestWorkerShutdownDoesNotRedispatch(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	la, lb := newJobLog(), newJobLog()
	wa, err := NewWorker(srv.URL, srv.APIKey, srv.APISecret, la.jobFunc(func(ctx context.Context, job Job) error {
		room, err := lksdk.ConnectToRoomWithToken(job.URL, job.Token, lksdk.NewRoomCallback(), lksdk.WithAutoSubscribe(false))
		if err != nil {
			return err
		}
		defer room.Disconnect()
		<-ctx.Done()
		return ctx.Err()
	}), WithAgentName("booking"), WithLoad(zeroLoad), WithWorkerLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	stopA := runWorker(t, wa)
	if err := registered(ctx, wa); err != nil {
		t.Fatal(err)
	}
	if err := srv.Dispatch(ctx, "orphan", "booking", ""); err != nil {
		t.Fatal(err)
	}
	agentIn := func() bool {
		ps, err := srv.Participants(ctx, "orphan")
		return err == nil && slices.ContainsFunc(ps, func(p *lkproto.ParticipantInfo) bool { return p.Kind == lkproto.ParticipantInfo_AGENT })
	}
	if err := waitFor(ctx, "the agent in the room", agentIn); err != nil {
		t.Fatal(err)
	}
	startWorker(ctx, t, srv.URL, srv, lb.jobFunc(nil))
	if err := stopA(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v; want context.Canceled", err)
	}
	stoppedAt := time.Now()
	if err := waitFor(ctx, "the agent to leave", func() bool { return !agentIn() }); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := lb.wait(wctx, "a job", func() bool { return len(lb.jobs()) > 0 }); err == nil {
		t.Fatalf("the other worker got %+v %v after the first stopped", lb.jobs(), time.Since(stoppedAt))
	}
	if ds := dispatchesOf(ctx, t, srv, "orphan", "booking"); len(ds) != 1 || len(ds[0].GetState().GetJobs()) != 1 {
		t.Errorf("dispatches %v; want one with its one job", ds)
	}
}

// A connection that stops carrying anything (the server or the path to it
// hung, TCP still open) is noticed by the worker's own pings: it dials
// again once no pong has come for the pong timeout, and registers anew
// once the path works.
func TestWorkerNoticesADeadConnection(t *testing.T) {
	srv := livekittest.StartT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p := newProxy(t, srv.HTTPURL[len("http://"):])
	w := startWorker(ctx, t, p.url(), srv, func(context.Context, Job) error { return nil },
		withPing(100*time.Millisecond, 500*time.Millisecond), WithReconnectBackoff(50*time.Millisecond, 100*time.Millisecond))
	oldID := w.ID()
	p.frozen.Store(true)
	frozenAt := time.Now()
	if err := waitFor(ctx, "the worker to dial again", func() bool { return p.accepted.Load() >= 2 }); err != nil {
		t.Fatal(err)
	}
	noticed := time.Since(frozenAt)
	if noticed > 3*time.Second {
		t.Errorf("the worker dialled again %v after its connection went dead; want within 3 s (pong timeout 500 ms)", noticed)
	}
	// Working again: the dial stuck in the frozen proxy is cut, the next
	// one gets through.
	p.frozen.Store(false)
	p.cut()
	if err := waitFor(ctx, "the new registration", func() bool { id := w.ID(); return id != "" && id != oldID }); err != nil {
		t.Fatal(err)
	}
	t.Logf("dialled again %v after the connection went dead", noticed.Round(time.Millisecond))
}
