package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/webrtc"
)

const (
	// callTimeout bounds one request to the session core from a transport
	// callback (typed input, connection lost or back).
	callTimeout = 2 * time.Second
	// captionEvery is how often the words heard so far of a playing turn
	// are sent as a caption.
	captionEvery = 250 * time.Millisecond
	// eventBuffer is the event subscription's buffer: room for bursts
	// while the log appends.
	eventBuffer = 512
)

// call is one session and the connections it has had.
type call struct {
	s       *Server
	id      string
	ctx     context.Context // ends the session and everything of the call
	cancel  context.CancelFunc
	sess    *runtime.Session
	release func()
	sub     *events.Subscription
	log     *eventLog

	peer    atomic.Pointer[webrtc.Peer] // the current connection, nil while none
	pushMu  sync.Mutex                  // PushAudio is called from one goroutine at a time
	playing atomic.Bool                 // a turn's audio is playing: captions are worth sending

	token string // guarded by s.mu

	// With a store (WithStore): the session's checkpointer, and the
	// snapshot it was taken over from, if it was.
	cp      *handoff.Checkpointer
	resumed *handoff.Snapshot

	mu      sync.Mutex
	running bool // Run was started (the first connection came up)
	down    bool // the connection dropped and no new one is up yet
	ended   bool
	timer   *time.Timer // the connect timeout, then the resume TTL while down
	endOnce sync.Once
}

func newCall(s *Server, id string) *call {
	c := &call{s: s, id: id, log: newEventLog(s.cfg.history)}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c
}

// prepare makes the agent and the session. Nothing runs until the first
// connection is up, so the greeting is not spoken into a connection that
// cannot carry it yet.
func (c *call) prepare(ctx context.Context) error {
	agent, release, err := c.s.newAgent(ctx)
	if err != nil {
		return err
	}
	if release == nil {
		release = func() {}
	}
	opts := []runtime.Option{
		runtime.WithID(c.id),
		// 24 kHz: no voice we have speaks above it (OpenAI's is 24 kHz,
		// espeak-ng's 22.05), and Opus codes it as it is; 48 kHz would
		// carry nothing more at twice the player's memory and more
		// encoder time.
		runtime.WithOutput(c, media.Rate24k),
		runtime.WithContinuousOutput(),
		// The browser cancels its own echo unless told to use ours.
		runtime.WithInput(runtime.InputConfig{Rate: media.Rate16k, NoEchoCancellation: !c.s.cfg.echoCancel, EchoFree: !c.s.cfg.echoCancel}),
		runtime.WithLogger(c.s.cfg.log.With("session", c.id)),
	}
	opts, err = c.checkpointed(ctx, append(opts, c.s.cfg.sessionOpts...))
	if err != nil {
		release()
		return err
	}
	c.sess, err = runtime.New(agent, opts...)
	if err != nil {
		release()
		return err
	}
	c.release = release
	c.sub = c.sess.Subscribe(eventBuffer)
	c.s.wg.Go(c.pump)
	c.mu.Lock()
	c.timer = time.AfterFunc(c.s.cfg.connectTimeout, func() { c.end("no connection within the connect timeout") })
	c.mu.Unlock()
	return nil
}

// WriteFrame sends the agent's audio to the current connection; with none
// it is dropped, as a phone line drops what is said into it while cut.
func (c *call) WriteFrame(f media.Frame) error {
	if p := c.peer.Load(); p != nil {
		return p.WriteFrame(f)
	}
	return nil
}

// pump keeps the event log and the metrics.
func (c *call) pump() {
	obs := c.s.metrics.observer()
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
		c.log.append(e)
		obs.observe(e)
		if e.Kind == events.ProviderError && e.Provider == "stt" && !warned {
			// Once per call: a recogniser that falls behind fails every
			// turn after, and the log should say why, not repeat it.
			warned = true
			msg := "the recogniser failed; the caller's words may be lost"
			if e.Reason == runtime.TurnDropped {
				msg = "a caller turn was dropped: the recogniser gave no final transcript in time; this machine may run more calls than its recogniser can decode (see --max-sessions)"
			}
			c.s.cfg.log.Warn(msg, "session", c.id, "sessions", c.s.Sessions(), "err", e.Error)
		}
	}
	c.log.close()
}

// peerRef ties a Handler's callbacks to the peer they belong to, known only
// once Answer returns.
type peerRef struct {
	p     atomic.Pointer[webrtc.Peer]
	hello sync.Once
}

func (r *peerRef) current(c *call) bool {
	p := r.p.Load()
	return p != nil && p == c.peer.Load()
}

func (c *call) handler() (webrtc.Handler, *peerRef) {
	ref := &peerRef{}
	return webrtc.Handler{
		Audio: func(f media.Frame) {
			if !ref.current(c) {
				return
			}
			c.pushMu.Lock()
			defer c.pushMu.Unlock()
			c.mu.Lock()
			running := c.running
			c.mu.Unlock()
			if running {
				_ = c.sess.PushAudio(c.ctx, f)
			}
		},
		Message: func(b []byte) { c.onMessage(ref, b) },
		ChannelOpen: func() {
			if p := ref.p.Load(); p != nil {
				c.send(p, map[string]any{"type": "session", "id": c.id, "agent": c.s.cfg.agentName})
			}
		},
		Connected: func(up bool) {
			if !ref.current(c) {
				return
			}
			if up {
				c.connected()
			} else {
				c.disconnected()
			}
		},
	}, ref
}

// attach makes peer the call's connection, replacing (and closing) the old
// one: a reloaded page's offer arrives before its old connection times out.
func (c *call) attach(peer *webrtc.Peer, ref *peerRef) {
	ref.p.Store(peer)
	old := c.peer.Swap(peer)
	if old != nil {
		// Whatever went to the old connection since the client left is
		// lost: the agent stops, as for any drop, until this one is up.
		c.disconnected()
		c.s.spawn(func() { old.Close() })
	}
	c.s.spawn(func() {
		select {
		case <-peer.Done():
			if c.peer.CompareAndSwap(peer, nil) {
				c.disconnected()
			}
		case <-c.ctx.Done():
			peer.Close()
		}
	})
}

func (c *call) connected() {
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
		c.s.spawn(c.run)
		c.s.spawn(c.runCheckpoints)
		if c.resumed != nil {
			// Taken over: the agent speaks first, from where it was.
			c.s.spawn(func() {
				ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
				defer cancel()
				_ = c.sess.GenerateReply(ctx, resumeInstructions)
			})
		}
	case back:
		ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
		defer cancel()
		_ = c.sess.TransportRestored(ctx)
	}
}

func (c *call) disconnected() {
	c.mu.Lock()
	if c.ended || c.down || !c.running {
		c.mu.Unlock()
		return
	}
	c.down = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timer = time.AfterFunc(c.s.cfg.resumeTTL, func() { c.end("not resumed within the resume TTL") })
	c.mu.Unlock()
	c.s.metrics.connectionsLost.Inc()
	ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	defer cancel()
	_ = c.sess.TransportLost(ctx)
}

func (c *call) run() {
	err := c.sess.Run(c.ctx)
	if err != nil {
		c.s.cfg.log.Error("session failed", "session", c.id, "err", err)
	}
	c.end("session ended")
	c.release()
}

// end ends the call once: the session stops, the connection closes, the
// token answers 410 from now on.
func (c *call) end(reason string) {
	c.endOnce.Do(func() {
		c.mu.Lock()
		c.ended = true
		ran := c.running
		if c.timer != nil {
			c.timer.Stop()
		}
		c.mu.Unlock()
		c.cancel()
		if !ran && c.sub != nil {
			c.sub.Close() // Run never closed the bus: end the pump here
			c.release()
		}
		c.s.mu.Lock()
		tok, closing := c.token, c.s.closed
		c.s.mu.Unlock()
		c.s.forget(c, tok)
		switch {
		case reason == reasonTakenOver:
		case closing && c.cp != nil:
			// The worker is going away, not the call: another worker may
			// take it over from its last checkpoint.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), storeTimeout)
			_ = c.cp.Release(ctx)
			cancel()
		default:
			c.retireToken(tok)
			c.endCheckpoints()
		}
		c.s.metrics.sessionsActive.Dec()
		c.s.cfg.log.Info("session ended", "session", c.id, "reason", reason)
	})
}

// inject is typed input from the client.
func (c *call) inject(ctx context.Context, text string) error {
	c.mu.Lock()
	running := c.running
	c.mu.Unlock()
	if !running {
		return errors.New("the session has not connected yet")
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.sess.Inject(ctx, text)
}

// clientMessage is what a client sends on the data channel.
type clientMessage struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	After uint64 `json:"after"`
}

func (c *call) onMessage(ref *peerRef, b []byte) {
	p := ref.p.Load()
	if p == nil {
		return
	}
	if len(b) > maxInputMessage {
		// Not even parsed: the bound is on the work a message can cause.
		c.send(p, refusal(fmt.Errorf("%w: the message is %d bytes", ErrTextTooLong, len(b))))
		return
	}
	var m clientMessage
	if err := json.Unmarshal(b, &m); err != nil {
		c.send(p, map[string]any{"type": "error", "error": "message not understood: " + jsonProblem(b, err)})
		return
	}
	switch m.Type {
	case "hello":
		ref.hello.Do(func() { c.s.spawn(func() { c.forward(p, m.After) }) })
	case "text":
		if err := checkText(m.Text); err != nil {
			c.send(p, refusal(err))
			return
		}
		// A message on the data channel means the connection is up, even
		// if the peer's own report of it is still on its way: the text
		// must not be refused for that race.
		if ref.current(c) {
			c.connected()
		}
		if err := c.inject(c.ctx, m.Text); err != nil {
			c.send(p, refusal(fmt.Errorf("input not taken: %w", err)))
		}
	default:
		c.send(p, map[string]any{"type": "error", "error": fmt.Sprintf("unknown message type %q (want hello or text)", m.Type)})
	}
}

// refusal is the error message for typed text that did not become a turn;
// "refused" tells the client which of its messages it answers, "limit" is
// MaxTextBytes.
func refusal(err error) map[string]any {
	return map[string]any{"type": "error", "error": err.Error(), "refused": "text", "limit": MaxTextBytes}
}

func (c *call) send(p *webrtc.Peer, v any) {
	b, err := json.Marshal(v)
	if err == nil {
		_ = p.Send(b)
	}
}

// forward sends a connection the session's events after seq, then live
// ones, and captions of the playing turn, until the connection or the
// session ends.
func (c *call) forward(p *webrtc.Peer, seq uint64) {
	tick := time.NewTicker(captionEvery)
	defer tick.Stop()
	var caption runtime.Caption
	for {
		evs, wake, closed := c.log.after(seq)
		for _, e := range evs {
			c.send(p, map[string]any{"type": "event", "event": e})
			seq = e.Seq
		}
		if closed {
			return
		}
		select {
		case <-wake:
		case <-p.Done():
			return
		case <-c.ctx.Done():
			// The last events (session_ended) are still to come.
			if _, _, closed := c.log.after(seq); !closed {
				select {
				case <-wake:
					continue
				case <-time.After(callTimeout):
				}
			}
			return
		case <-tick.C:
			if !c.playing.Load() {
				continue
			}
			ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
			now, err := c.sess.NowPlaying(ctx)
			cancel()
			if err == nil && now != caption && now.Text != "" {
				caption = now
				c.send(p, map[string]any{"type": "caption", "epoch": now.Epoch, "text": now.Text})
			}
		}
	}
}
