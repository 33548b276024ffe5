package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// conn is one websocket with its two goroutines: the reader hands every
// server event to handle, in order; the writer sends queued client events
// in the order they were queued, so callers never wait on the network.
type conn struct {
	ws     *websocket.Conn
	handle func(serverEvent)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	queue      [][]byte
	audioBytes int // of caller audio in queue
	err        error
	wake       chan struct{}
}

func newConn(ws *websocket.Conn, handle func(serverEvent), lost func(*conn, error)) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{ws: ws, handle: handle, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	c.wg.Go(c.write)
	c.wg.Go(func() {
		err := c.read()
		c.close(err)
		lost(c, c.failure())
	})
	return c
}

// send queues e. It never blocks.
func (c *conn) send(e clientEvent) {
	if e.Type == "" {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic("realtime: marshal client event: " + err.Error()) // our own types
	}
	c.push(b, 0)
}

// audioBacklogBytes is maxAudioBacklog of base64 PCM16 at Rate.
var audioBacklogBytes = int(maxAudioBacklog.Seconds()*Rate*2) * 4 / 3

// errBacklog: the connection is not taking audio as fast as it comes.
var errBacklog = errors.New("realtime: connection not keeping up with the caller's audio")

// sendAudio queues an input_audio_buffer.append, or refuses it when too
// much audio is waiting already.
func (c *conn) sendAudio(e clientEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	c.mu.Lock()
	over := c.audioBytes+len(e.Audio) > audioBacklogBytes
	c.mu.Unlock()
	if over {
		return errBacklog
	}
	c.push(b, len(e.Audio))
	return nil
}

func (c *conn) push(b []byte, audio int) {
	c.mu.Lock()
	if c.err == nil {
		c.queue = append(c.queue, b)
		c.audioBytes += audio
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) write() {
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		}
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		c.audioBytes = 0
		c.mu.Unlock()
		for _, b := range batch {
			wctx, cancel := context.WithTimeout(c.ctx, writeTimeout)
			err := c.ws.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				c.close(err)
				return
			}
		}
	}
}

func (c *conn) read() error {
	for {
		_, b, err := c.ws.Read(c.ctx)
		if err != nil {
			return err
		}
		var ev serverEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			continue // not an event; the protocol has no use for it
		}
		c.handle(ev)
	}
}

// close ends the connection with err as its failure (the first one wins).
func (c *conn) close(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		c.queue = nil
	}
	c.mu.Unlock()
	c.cancel()
	c.ws.CloseNow()
}

func (c *conn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *conn) isDone() bool { return c.ctx.Err() != nil }

// wait waits for both goroutines, at most a little while: they end as
// soon as the socket is closed.
func (c *conn) wait() {
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}
