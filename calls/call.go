package calls

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/store"
)

// Line is what a transport gives a call: where the agent's audio goes, and
// how to hang up. WriteFrame is called on the session's output goroutine at
// the output rate of the Spec; a frame written while the connection is
// down is dropped, as a phone line drops what is said into it while cut.
type Line interface {
	media.Sink
	// Hangup ends the transport's side of the call (BYE, closing the peer
	// connection) because the host ended it, for reason. It must not wait
	// on the call, and is called once.
	Hangup(reason string)
}

// Transferrer is a Line that can hand its call to another party (a SIP
// REFER): the session's runtime.Transfer reaches it through the host,
// which adds a handoff token when it has a store. Transfer returns nil
// once the target answered; the transport then marks the call Transferred
// and ends it, so that its checkpoint stays for the worker the target may
// be.
type Transferrer interface {
	Transfer(ctx context.Context, req engine.TransferRequest) error
}

// Origin says how a call came to be, and so what the agent is told for
// its first words.
type Origin int

const (
	// Fresh is a new conversation: the agent greets.
	Fresh Origin = iota
	// Reconnected is a caller back on a new connection after theirs was
	// cut, on a worker that took the session over.
	Reconnected
	// PutThrough is a call transferred from another worker with a handoff
	// token.
	PutThrough
	// Redialled is a caller who called back after the call was cut off.
	Redialled
	// Moved is a call a draining worker moved here at a clean point: the
	// conversation goes on without a word about it.
	Moved
)

func (o Origin) String() string {
	switch o {
	case Reconnected:
		return "reconnected"
	case PutThrough:
		return "put_through"
	case Redialled:
		return "redialled"
	case Moved:
		return "moved"
	}
	return "fresh"
}

// DefaultInstructions are the agent's extra instructions for its first
// words on a call that picks up an earlier conversation, by origin
// (WithInstructions replaces them).
var DefaultInstructions = map[Origin]string{
	Reconnected: "The call was cut off and the caller is back. Pick up where the conversation was, in a sentence; " +
		"if a tool's outcome is unknown, say that you are checking rather than assuming it worked.",
	PutThrough: "The caller has just been put through to you; the conversation so far is above. " +
		"Greet them briefly and carry on from where it was; if a tool's outcome is unknown, say you are checking.",
	Redialled: "The call was cut off and the caller has called back; the conversation so far is above. " +
		"Pick up where it was, in a sentence; if a tool's outcome is unknown, say you are checking.",
}

// DefaultResumeTTL is how long a call whose connection dropped waits for
// it, for transports that have no setting of their own.
const DefaultResumeTTL = 2 * time.Minute

// Resumed is a conversation a new call picks up, and how it came.
type Resumed struct {
	Snapshot *handoff.Snapshot
	Origin   Origin
}

// Recovery is how a transport's calls are kept and waited for: data each
// transport picks, the host carries out.
type Recovery struct {
	// LeaseTTL is how long this worker's hold on the session lasts
	// unrenewed (WithStore): after it, another worker may take a dead
	// worker's call over. 0: handoff.DefaultLeaseTTL.
	LeaseTTL time.Duration
	// ResumeTTL is how long a call whose connection dropped (Lost) waits
	// for it to come back before it ends. 0: it ends at once.
	ResumeTTL time.Duration
	// ConnectTimeout is how long a started call waits for its first
	// connection (Connected) before it ends. 0: no limit, for transports
	// whose media flows as soon as the call is answered.
	ConnectTimeout time.Duration
}

// Spec is what a transport says of a new call.
type Spec struct {
	// Kind names the transport ("webrtc", "sip"): a label of the metrics,
	// and sealed with every checkpoint.
	Kind string
	// ID is the session's id; "" makes one. A call resumed from a
	// snapshot keeps the snapshot's.
	ID string
	// Input is how the caller's audio comes (rate, echo cancellation);
	// OutputRate the rate the Line takes.
	Input      engine.InputConfig
	OutputRate int
	// Resumed is the snapshot the call continues from (Resume, PickUp),
	// and Origin how it came; nil and Fresh for a new conversation.
	Resumed *handoff.Snapshot
	Origin  Origin
	// Recovery is how the call is kept and waited for.
	Recovery Recovery
	// Context, if set, is the parent of the call's context: its values
	// reach the session's tools (a transport's own, to find the call).
	// The call's context ends when the call does either way.
	Context context.Context
	// Facts are the transport's facts sealed with every checkpoint, with
	// "kind": Kind.
	Facts map[string]string
	// Options are further session options of this transport.
	Options []runtime.Option
}

// how a call ends
type ending int

const (
	endDelete  ending = iota // over everywhere: the checkpoint is deleted
	endRelease               // over here: another worker may take it over
	endLost                  // another worker has it already: leave the store alone
)

// Call is one live call on a Host.
type Call struct {
	h       *Host
	id      string
	kind    string
	origin  Origin
	started time.Time
	rec     Recovery
	line    Line

	ctx     context.Context // ends the session and everything of the call
	cancel  context.CancelFunc
	sess    *runtime.Session
	release func()
	sub     *events.Subscription
	// observers watch the session's events (WithObserver), each on a
	// subscription of obsSubs.
	observers []Observer
	obsSubs   []*events.Subscription
	log       *eventLog
	cp        *handoff.Checkpointer
	resumed   *handoff.Snapshot
	done      chan struct{} // closed once ended and the session stopped
	endedC    chan struct{} // closed by finish
	stored    chan struct{} // closed once runStore has returned: no more checkpoint writes

	playing atomic.Bool // a turn's audio is playing
	// quiet: the session is at a clean point (its last telling event was
	// idle): a draining host may move the call.
	quiet      atomic.Bool
	moving     atomic.Bool // a drain is moving the call
	moveFailed atomic.Bool // a move was tried and failed: the call stays
	leaving    atomic.Bool // a drain is releasing the call
	movedFrom  string      // the worker a moved call came from

	mu       sync.Mutex
	running  bool // the session runs (the first connection came up)
	down     bool // the connection dropped and is not back yet
	ended    bool
	handover bool        // end releases rather than deletes (Transferred)
	timer    *time.Timer // the connect timeout, then the resume TTL while down
	aliases  map[string]time.Duration
	endOnce  sync.Once
	reason   string
}

// Start makes the call's session for a new agent and registers the call;
// nothing runs until Connected, so the greeting is not spoken into a
// connection that cannot carry it yet. It fails with ErrFull or ErrClosed
// when the host takes no more calls.
func (h *Host) Start(ctx context.Context, spec Spec, line Line) (*Call, error) {
	if spec.Kind == "" || line == nil || spec.OutputRate <= 0 {
		return nil, errors.New("calls: Start needs a kind, a line and an output rate")
	}
	id := spec.ID
	if spec.Resumed != nil {
		id = spec.Resumed.State.SessionID
	}
	if id == "" {
		id = NewID(spec.Kind)
	}
	var movedFrom string
	if spec.Resumed != nil {
		// A move's checkpoint says so, whatever way the caller came back.
		if movedFrom = spec.Resumed.Transport[FactMovedFrom]; movedFrom != "" {
			spec.Origin = Moved
		}
	}
	c := &Call{movedFrom: movedFrom, h: h, id: id, kind: spec.Kind, origin: spec.Origin, started: time.Now(), rec: spec.Recovery,
		line: line, resumed: spec.Resumed, log: newEventLog(h.cfg.history), done: make(chan struct{}), endedC: make(chan struct{}), stored: make(chan struct{}), aliases: map[string]time.Duration{}}
	// A moved call left its worker at a clean point, and is at one here
	// until it does something: a drain here may move it on again.
	c.quiet.Store(movedFrom != "")
	if err := h.reserve(c); err != nil {
		return nil, err
	}
	parent := spec.Context
	if parent == nil {
		parent = h.ctx
	}
	c.ctx, c.cancel = context.WithCancel(parent)
	stop := context.AfterFunc(h.ctx, c.cancel)
	if err := c.prepare(ctx, spec); err != nil {
		stop()
		c.cancel()
		_ = h.admit(c, false)
		return nil, err
	}
	if err := h.admit(c, true); err != nil {
		// Closed while the session was made: it never ran.
		c.cancel()
		c.sub.Close()
		c.closeObservers()
		close(c.endedC)
		c.release()
		if c.cp != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			_ = c.cp.Release(rctx)
			cancel()
		}
		return nil, err
	}
	h.metrics.started(c.kind, c.origin != Fresh)
	if c.rec.ConnectTimeout > 0 {
		c.mu.Lock()
		c.timer = time.AfterFunc(c.rec.ConnectTimeout, func() { c.End("no connection within the connect timeout") })
		c.mu.Unlock()
	}
	return c, nil
}

// prepare makes the agent and the session.
func (c *Call) prepare(ctx context.Context, spec Spec) error {
	agent, release, err := c.h.newAgent(ctx)
	if err != nil {
		return fmt.Errorf("making the agent: %w", err)
	}
	if release == nil {
		release = func() {}
	}
	obsFacts := c.makeObservers(spec)
	made := false
	defer func() {
		if !made {
			c.closeObservers()
		}
	}()
	opts := []runtime.Option{
		runtime.WithID(c.id),
		runtime.WithOutput(c.line, spec.OutputRate),
		// Output flows continuously on every transport: a phone leg's
		// gateways expect RTP, and the echo canceller's reference is
		// exactly what went out.
		engine.WithContinuousOutput(),
		engine.WithInput(spec.Input),
		runtime.WithLogger(c.h.cfg.log.With("session", c.id, "transport", c.kind)),
		// The agent (or the app, through Session.End) ends the call as
		// the caller hanging up does: everywhere, the line hung up. The
		// session calls this before Run returns, so its reason is the
		// call's, not run's "session ended".
		engine.WithHangup(c.End),
	}
	if tl, ok := c.line.(Transferrer); ok {
		opts = append(opts, engine.WithTransferer(c.transferVia(tl)))
	}
	opts = append(append(opts, c.h.cfg.sessionOpts...), spec.Options...)
	if c.h.cfg.store != nil {
		facts := map[string]string{"kind": spec.Kind}
		for k, v := range obsFacts {
			facts[k] = v
		}
		for k, v := range spec.Facts {
			facts[k] = v
		}
		ttl := spec.Recovery.LeaseTTL
		if ttl <= 0 {
			ttl = handoff.DefaultLeaseTTL
		}
		c.cp = handoff.NewCheckpointer(c.h.cfg.store, c.h.cfg.keys[0], c.id, c.h.cfg.worker,
			handoff.WithLeaseTTL(ttl), handoff.WithTransport(facts), handoff.WithReport(c.checkpointDone))
		hctx, cancel := context.WithTimeout(ctx, storeTimeout)
		err := c.cp.Hold(hctx, c.resumed)
		cancel()
		if err != nil {
			release()
			return fmt.Errorf("holding the session in the store: %w", err)
		}
		opts = append(opts, c.cp.SessionOptions(c.resumed)...)
	}
	c.sess, err = runtime.New(agent, opts...)
	if err != nil {
		if c.cp != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			_ = c.cp.Release(rctx)
			cancel()
		}
		release()
		return err
	}
	c.release = release
	c.sub = c.sess.Subscribe(eventBuffer)
	c.h.wg.Go(c.pump)
	c.watch()
	made = true
	return nil
}

// NewID returns a new session id for a call of kind.
func NewID(kind string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	prefix := "s_"
	if kind == "sip" {
		prefix = "sip_"
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// ID is the call's session id.
func (c *Call) ID() string { return c.id }

// Kind is the transport's kind.
func (c *Call) Kind() string { return c.kind }

// Session is the call's session: for what the transport does beyond
// media (typed input, DTMF, captions, the chat context).
func (c *Call) Session() *runtime.Session { return c.sess }

// Context ends when the call does.
func (c *Call) Context() context.Context { return c.ctx }

// Done is closed once the call has ended and its session has stopped.
func (c *Call) Done() <-chan struct{} { return c.done }

// Reason is why the call ended; "" while it runs.
func (c *Call) Reason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// Info describes the call.
func (c *Call) Info() Info {
	var net *Network
	if n, ok := c.network(); ok {
		net = &n
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Info{ID: c.id, Transport: c.kind, Started: c.started, Running: c.running,
		Connected: c.running && !c.down && !c.ended, Origin: c.origin.String(), Network: net}
}

// Running reports whether the session runs: its first connection came up
// and it has not ended.
func (c *Call) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running && !c.ended
}

// Playing reports whether a turn's audio is playing (captions are worth
// sending).
func (c *Call) Playing() bool { return c.playing.Load() }

// PushAudio hands the caller's audio to the session once it runs; before,
// it is dropped.
func (c *Call) PushAudio(ctx context.Context, f media.Frame) error {
	if !c.Running() {
		return nil
	}
	return c.sess.PushAudio(ctx, f)
}

// Inject is typed input from the caller.
func (c *Call) Inject(ctx context.Context, text string) error {
	if !c.Running() {
		return errors.New("the session has not connected yet")
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.sess.Inject(ctx, text)
}

// Events returns the kept events with Seq > seq, a channel closed when more
// arrive, and whether the call's events have ended.
func (c *Call) Events(seq uint64) ([]events.Event, <-chan struct{}, bool) {
	return c.log.after(seq)
}

// Connected says the transport's connection is up: the first time, the
// session starts (and a call that picks up an earlier conversation has
// the agent speak first, from where it was); after Lost, the session is
// told the caller is back.
func (c *Call) Connected() {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	first, back := !c.running, c.down
	c.running, c.down = true, false
	c.mu.Unlock()
	switch {
	case first:
		// The store's goroutine first: on a closed host spawn runs each
		// in turn, and the session's end waits for the store's.
		c.h.spawn(c.runStore)
		c.h.spawn(c.run)
		switch {
		case c.movedFrom != "":
			c.h.spawn(func() {
				ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
				defer cancel()
				c.movedIn(ctx)
			})
		case c.resumed != nil:
			words := c.h.cfg.words[c.origin]
			c.h.spawn(func() {
				ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
				defer cancel()
				_ = c.sess.GenerateReply(ctx, words)
			})
		}
	case back:
		ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
		defer cancel()
		_ = c.sess.TransportRestored(ctx)
	}
}

// Lost says the transport's connection dropped: the agent stops speaking
// (what the caller heard is what was played) and the call waits up to its
// ResumeTTL for Connected.
func (c *Call) Lost() {
	c.mu.Lock()
	if c.ended || c.down || !c.running {
		c.mu.Unlock()
		return
	}
	c.down = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timer = time.AfterFunc(c.rec.ResumeTTL, func() { c.End("not resumed within the resume TTL") })
	c.mu.Unlock()
	c.h.metrics.connectionsLost.WithLabelValues(c.kind).Inc()
	ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	defer cancel()
	_ = c.sess.TransportLost(ctx)
}

// run runs the session until it ends.
func (c *Call) run() {
	err := c.sess.Run(c.ctx)
	if err != nil && c.ctx.Err() == nil {
		c.h.cfg.log.Error("session failed", "session", c.id, "transport", c.kind, "err", err)
	}
	if c.h.ctx.Err() != nil {
		// The host is closing (Close ends the session through the
		// host's context): the worker goes away, not the call, whether
		// this or Close gets to end it first.
		c.Release("the worker closed")
	} else {
		c.End("session ended")
	}
	c.release()
}

// runStore writes the session's checkpoints and keeps the call's aliases
// until the call ends; a call whose session another worker took over
// ends here.
func (c *Call) runStore() {
	defer close(c.stored)
	if c.cp == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(c.keepAliases)
	if err := c.cp.Run(c.ctx); errors.Is(err, handoff.ErrLeaseLost) {
		c.finish(reasonTakenOver, endLost)
	}
	wg.Wait()
}

// reasonTakenOver ends a call whose session another worker took over.
const reasonTakenOver = "another worker took the session over"

// End ends the call once, everywhere: the session stops, its checkpoint is
// deleted (unless Transferred), the transport's Line hangs up.
func (c *Call) End(reason string) {
	c.mu.Lock()
	how := endDelete
	if c.handover {
		how = endRelease
	}
	c.mu.Unlock()
	c.finish(reason, how)
}

// Release ends the call on this worker only: its checkpoint stays, for
// another worker to take it over (the worker is going away, not the
// call).
func (c *Call) Release(reason string) { c.finish(reason, endRelease) }

// Transferred marks the call as handed to another worker (a transfer with
// a handoff token): when it ends, its checkpoint stays for that worker.
func (c *Call) Transferred() {
	c.mu.Lock()
	c.handover = true
	c.mu.Unlock()
}

func (c *Call) finish(reason string, how ending) {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.ended = true
		c.reason = reason
		ran := c.running
		if c.timer != nil {
			c.timer.Stop()
		}
		aliases := make([]string, 0, len(c.aliases))
		for a := range c.aliases {
			aliases = append(aliases, a)
		}
		c.mu.Unlock()
		c.cancel()
		if !ran {
			c.sub.Close() // Run never closed the bus: end the pump here
			c.closeObservers()
			c.release()
		}
		if c.cp != nil && ran && how != endLost {
			// The checkpointer writes what the session's last moments
			// left pending as its ctx ends: a write landing after the
			// delete would bring an ended call back, one after the
			// release would race the next worker. (endLost: runStore
			// itself is ending the call.)
			select {
			case <-c.stored:
			case <-time.After(storeTimeout):
				c.h.cfg.log.Warn("the last checkpoint write did not finish in time", "session", c.id)
			}
		}
		if c.cp != nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), storeTimeout)
			switch how {
			case endRelease:
				_ = c.cp.Release(ctx)
			case endDelete:
				for _, a := range aliases {
					_, _ = c.h.cfg.store.TakeAlias(ctx, a)
				}
				if err := c.h.cfg.store.Delete(ctx, c.cp.Lease()); err != nil && !errors.Is(err, store.ErrLeaseLost) {
					c.h.cfg.log.Warn("checkpoint not deleted", "session", c.id, "err", err)
				}
			}
			cancel()
		}
		// Off the host's list only now: a call gone from it is gone from
		// the store and from the active calls' gauge too.
		c.h.metrics.sessionsActive.WithLabelValues(c.kind).Dec()
		c.h.forget(c)
		c.h.cfg.log.Info("session ended", "session", c.id, "transport", c.kind, "reason", reason)
		c.line.Hangup(reason)
		close(c.endedC)
	})
}

// pump keeps the event log and the metrics.
func (c *Call) pump() {
	obs := c.h.metrics.observer(c.kind)
	var last uint64
	warned := false
	for e := range c.sub.C() {
		if e.Seq == 0 { // a drop notice: keep the log's order
			e.Seq = last
		}
		last = e.Seq
		switch e.Kind {
		case events.PlayoutStarted:
			c.playing.Store(true)
		case events.PlayoutDone, events.PlayoutTruncate, events.TurnInterrupted:
			c.playing.Store(false)
		}
		if q, ok := quietAfter[e.Kind]; ok {
			c.quiet.Store(q)
		}
		c.log.append(e)
		obs.observe(e)
		if e.Kind == events.ProviderError && e.Provider == "stt" && !warned {
			// Once per call: a recogniser that falls behind fails every
			// turn after, and the log should say why, not repeat it.
			warned = true
			msg := "the recogniser failed; the caller's words may be lost"
			if e.Reason == engine.TurnDropped {
				msg = "a caller turn was dropped: the recogniser gave no final transcript in time; this machine may run more calls than its recogniser can decode (see --max-sessions)"
			}
			c.h.cfg.log.Warn(msg, "session", c.id, "transport", c.kind, "calls", c.h.Len(), "err", e.Error)
		}
	}
	c.log.close()
	obs.close()
	// Done once the call has ended and its last events are in the log.
	<-c.endedC
	close(c.done)
}

// checkpointDone tells the session how a write went.
func (c *Call) checkpointDone(seq uint64, err error) {
	if c.sess == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	_ = c.sess.CheckpointDone(ctx, seq, err)
	cancel()
}

// KeepAlias makes name lead to the call's session in the store (WithStore)
// for ttl, renewed while the call runs: a resume token, the caller's
// line for a redial. When the call ends everywhere the alias is removed;
// when it is released to another worker it is left to lapse. Without a
// store it does nothing.
func (c *Call) KeepAlias(ctx context.Context, name string, ttl time.Duration) {
	if c.h.cfg.store == nil || name == "" || ttl <= 0 {
		return
	}
	c.mu.Lock()
	c.aliases[name] = ttl
	c.mu.Unlock()
	c.putAlias(ctx, name, ttl)
}

// DropAlias removes an alias the call kept (a resume token used up).
func (c *Call) DropAlias(name string) {
	if c.h.cfg.store == nil || name == "" {
		return
	}
	c.mu.Lock()
	delete(c.aliases, name)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), storeTimeout)
	defer cancel()
	_, _ = c.h.cfg.store.TakeAlias(ctx, name)
}

func (c *Call) putAlias(ctx context.Context, name string, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := c.h.cfg.store.PutAlias(ctx, name, c.id, ttl); err != nil && c.ctx.Err() == nil {
		c.h.cfg.log.Warn("alias not kept in the store: the call may not be found again", "session", c.id, "err", err)
	}
}

// keepAliases renews the call's aliases at a third of their TTL until
// the call ends.
func (c *Call) keepAliases() {
	const step = time.Second
	next := map[string]time.Time{}
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			due := map[string]time.Duration{}
			for a, ttl := range c.aliases {
				if at, ok := next[a]; !ok || !now.Before(at) {
					if ok {
						due[a] = ttl
					}
					next[a] = now.Add(ttl / 3)
				}
			}
			c.mu.Unlock()
			for a, ttl := range due {
				c.putAlias(c.ctx, a, ttl)
			}
		}
	}
}

// handoffTTL is how long a handoff token is good for: the transfer target
// has to answer within it.
const handoffTTL = 2 * time.Minute

// HandoffToken checkpoints the session as it is now and returns a token
// that leads to it, for a transfer to another worker sharing the store
// (which resumes it with Resume and origin PutThrough).
func (c *Call) HandoffToken(ctx context.Context) (string, error) {
	if c.cp == nil {
		return "", errors.New("calls: no store to hand the call over through")
	}
	st, err := c.sess.State(ctx)
	if err != nil {
		return "", err
	}
	if err := c.cp.Write(ctx, st); err != nil {
		return "", err
	}
	tok := NewToken()
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := c.h.cfg.store.PutAlias(ctx, tok, st.SessionID, handoffTTL); err != nil {
		return "", err
	}
	return tok, nil
}

// transferVia is the session's Transferer for a line that can transfer.
func (c *Call) transferVia(tl Transferrer) engine.Transferer {
	return func(ctx context.Context, req engine.TransferRequest) error {
		if req.Token == "" && c.cp != nil {
			// The target, if it is a Holdline worker sharing the store,
			// takes the conversation over from this moment.
			tok, err := c.HandoffToken(ctx)
			if err != nil {
				return fmt.Errorf("checkpointing for the handoff: %w", err)
			}
			req.Token = tok
		}
		return tl.Transfer(ctx, req)
	}
}

// NewToken returns a new unguessable token (a resume or handoff token).
func NewToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
