package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/webrtc"
)

const (
	// callTimeout bounds one request to the session core from a transport
	// callback (typed input, connection lost or back).
	callTimeout = 2 * time.Second
	// captionEvery is how often the words heard so far of a playing turn
	// are sent as a caption.
	captionEvery = 250 * time.Millisecond
)

// call is the WebRTC side of one hosted call: its connections, one at a
// time, and its resume token. The host (package calls) does the rest.
type call struct {
	s  *Server
	hc *calls.Call // set by answerNew once the host started it

	peer   atomic.Pointer[webrtc.Peer] // the current connection, nil while none; changed under netMu
	pushMu sync.Mutex                  // PushAudio is called from one goroutine at a time

	// netMu orders the connection's changes with the network counts: past
	// holds the counts of the call's earlier connections, so that a count
	// read while a connection is replaced never goes back.
	netMu sync.Mutex
	past  calls.Network

	token string // guarded by s.mu

	channelOpen atomic.Bool // the current connection's data channel is open
	moved       atomic.Bool // the client was told to move: Hangup lets the message arrive
}

// WriteFrame sends the agent's audio to the current connection; with none
// it is dropped, as a phone line drops what is said into it while cut.
func (c *call) WriteFrame(f media.Frame) error {
	if p := c.peer.Load(); p != nil {
		return p.WriteFrame(f)
	}
	return nil
}

// Hangup closes the connection of a call the host ended; its token answers
// 410 from now on.
func (c *call) Hangup(string) {
	c.s.mu.Lock()
	tok := c.token
	c.s.mu.Unlock()
	c.s.forget(tok)
	if p := c.swap(nil, nil); p != nil {
		moved := c.moved.Load()
		c.s.host.Go(func() {
			if moved {
				// The client closes it once its new connection is up.
				select {
				case <-p.Done():
				case <-time.After(moveGrace):
				}
			}
			p.Close()
		})
	}
}

// swap makes next the current connection if old is (any, for old nil),
// keeping the counts of the one it replaces; it returns that one, or nil
// when nothing changed.
func (c *call) swap(old, next *webrtc.Peer) *webrtc.Peer {
	c.netMu.Lock()
	defer c.netMu.Unlock()
	cur := c.peer.Load()
	if old != nil && cur != old || cur == next {
		return nil
	}
	c.peer.Store(next)
	if cur != nil {
		c.past.Add(peerNetwork(cur.Stats()))
	}
	return cur
}

// Network reports what the network did to the caller's audio over every
// connection of the call (calls.NetworkReporter).
func (c *call) Network() calls.Network {
	c.netMu.Lock()
	defer c.netMu.Unlock()
	n := c.past
	n.JitterDelay = 0
	if p := c.peer.Load(); p != nil {
		n.Add(peerNetwork(p.Stats()))
	}
	return n
}

func peerNetwork(s webrtc.Stats) calls.Network {
	return calls.Network{
		PacketsReceived: s.PacketsIn, Lost: s.Lost, FECRecovered: s.FECRecovered, Concealed: s.Concealed,
		Late: s.Late, Duplicates: s.Duplicates, JitterDelay: s.JitterDelay,
	}
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
			_ = c.hc.PushAudio(c.hc.Context(), f)
		},
		Message: func(b []byte) { c.onMessage(ref, b) },
		ChannelOpen: func() {
			if p := ref.p.Load(); p != nil {
				if ref.current(c) {
					c.channelOpen.Store(true)
				}
				c.send(p, map[string]any{"type": "session", "id": c.hc.ID(), "agent": c.s.cfg.agentName})
			}
		},
		Connected: func(up bool) {
			if !ref.current(c) {
				return
			}
			if up {
				c.hc.Connected()
			} else {
				c.hc.Lost()
			}
		},
	}, ref
}

// attach makes peer the call's connection, replacing (and closing) the old
// one: a reloaded page's offer arrives before its old connection times out.
func (c *call) attach(peer *webrtc.Peer, ref *peerRef) {
	ref.p.Store(peer)
	c.channelOpen.Store(false)
	old := c.swap(nil, peer)
	if old != nil {
		// Whatever went to the old connection since the client left is
		// lost: the agent stops, as for any drop, until this one is up.
		c.hc.Lost()
		c.s.host.Go(func() { old.Close() })
	}
	c.s.host.Go(func() {
		select {
		case <-peer.Done():
			if c.swap(peer, nil) != nil {
				c.hc.Lost()
			}
		case <-c.hc.Context().Done():
			if c.moved.Load() {
				// Hangup closes it once the move message is there.
				return
			}
			peer.Close()
		}
	})
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
		ref.hello.Do(func() { c.s.host.Go(func() { c.forward(p, m.After) }) })
	case "text":
		if err := checkText(m.Text); err != nil {
			c.send(p, refusal(err))
			return
		}
		// A message on the data channel means the connection is up, even
		// if the peer's own report of it is still on its way: the text
		// must not be refused for that race.
		if ref.current(c) {
			c.hc.Connected()
		}
		if err := c.hc.Inject(c.hc.Context(), m.Text); err != nil {
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
	var caption engine.Caption
	for {
		if c.hc.Moving() {
			// The session moves to another worker, which numbers its
			// events on from the state this one hands over: what this
			// one says from now on the client must not see. (A failed
			// move sends it all later.)
			select {
			case <-p.Done():
				return
			case <-c.hc.Context().Done():
				return
			case <-tick.C:
				continue
			}
		}
		evs, wake, closed := c.hc.Events(seq)
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
		case <-c.hc.Context().Done():
			// The last events (session_ended) are still to come.
			if _, _, closed := c.hc.Events(seq); !closed {
				select {
				case <-wake:
					continue
				case <-time.After(callTimeout):
				}
			}
			return
		case <-tick.C:
			if !c.hc.Playing() {
				continue
			}
			ctx, cancel := context.WithTimeout(c.hc.Context(), callTimeout)
			now, err := c.hc.Session().NowPlaying(ctx)
			cancel()
			if err == nil && now != caption && now.Text != "" {
				caption = now
				c.send(p, map[string]any{"type": "caption", "epoch": now.Epoch, "text": now.Text})
			}
		}
	}
}
