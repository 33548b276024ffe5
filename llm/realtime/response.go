package realtime

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
)

// response is one response in flight and the stream reading it. The
// reader goroutine fills it (holding c.mu); Recv drains it.
type response struct {
	// Guarded by the client's mu.
	id           string
	cancelWanted bool
	cancelSent   bool
	calls        []llm.ToolCall // function calls, in output order, not yet handed over

	mu    sync.Mutex
	queue []llm.Chunk
	end   error // io.EOF or the failure, once the response is over
	wake  chan struct{}
}

func newResponse() *response {
	return &response{wake: make(chan struct{}, 1)}
}

func (r *response) push(ch llm.Chunk) {
	r.mu.Lock()
	if r.end == nil {
		r.queue = append(r.queue, ch)
	}
	r.mu.Unlock()
	r.signal()
}

// finish ends the stream after what is queued; the first end stands.
func (r *response) finish(err error) {
	r.mu.Lock()
	if r.end == nil {
		r.end = err
	}
	r.mu.Unlock()
	r.signal()
}

func (r *response) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *response) addCall(callID, name, args string) {
	for i := range r.calls {
		if r.calls[i].ID == callID {
			if args != "" {
				r.calls[i].Arguments = json.RawMessage(args)
			}
			return
		}
	}
	if args == "" {
		args = "{}"
	}
	r.calls = append(r.calls, llm.ToolCall{ID: callID, Name: name, Arguments: json.RawMessage(args)})
}

// stream is the llm.Stream of one response.
type stream struct {
	c   *Client
	r   *response
	ctx context.Context

	stopMu sync.Mutex
	stop   func() bool // unregisters the cancel-on-ctx hook

	closeOnce sync.Once
}

// Stream sends the session's context and asks for a response. It waits,
// within the response wait, for the previous response to end: two are
// never in flight.
func (c *Client) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	cn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(c.cfg.responseWait)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		idle := c.idle
		if c.resp == nil {
			break // c.mu held
		}
		c.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			c.abandon()
			return nil, ErrResponseStuck
		}
	}
	defer c.mu.Unlock()
	if c.conn != cn || cn.isDone() {
		return nil, fmt.Errorf("%w: %w", ErrConnectionLost, cn.failure())
	}
	ops := []clientEvent{c.sessionUpdate(req, true)}
	ops = append(ops, c.sync(req.Context.Items)...)
	ops = append(ops, c.event(clientEvent{Type: "response.create"}))
	r := newResponse()
	c.resp = r
	c.idle = make(chan struct{})
	for _, op := range ops {
		cn.send(op)
	}
	s := &stream{c: c, r: r, ctx: ctx}
	// Barge-in cancels the response at once, whoever is reading.
	s.stopMu.Lock()
	s.stop = context.AfterFunc(ctx, func() { s.Close() })
	s.stopMu.Unlock()
	return s, nil
}

// abandon gives up on a response whose end never came: it is cancelled by
// id, if known, and no longer counted as in flight.
func (c *Client) abandon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.resp; r != nil {
		c.cancel(r)
		r.finish(ErrResponseStuck)
		c.endResponse()
	}
}

// cancel asks the server to stop r: by id when response.created has given
// one, otherwise as soon as it does (a cancel sent before it is ignored by
// the server). Called with c.mu held.
func (c *Client) cancel(r *response) {
	if r.cancelSent {
		return
	}
	if r.id == "" {
		r.cancelWanted = true
		return
	}
	r.cancelSent = true
	if c.conn != nil {
		c.conn.send(c.event(clientEvent{Type: "response.cancel", ResponseID: r.id}))
	}
}

// Recv returns the response's next piece: audio and its transcript (or
// text), then, once response.done says the response completed, its
// function calls, then io.EOF.
func (s *stream) Recv() (llm.Chunk, error) {
	for {
		s.r.mu.Lock()
		if len(s.r.queue) > 0 {
			ch := s.r.queue[0]
			s.r.queue = s.r.queue[1:]
			s.r.mu.Unlock()
			return ch, nil
		}
		end := s.r.end
		s.r.mu.Unlock()
		if end != nil {
			return llm.Chunk{}, end
		}
		select {
		case <-s.r.wake:
		case <-s.ctx.Done():
			return llm.Chunk{}, s.ctx.Err()
		}
	}
}

// Close cancels the response if it is still going. It never waits.
func (s *stream) Close() error {
	s.closeOnce.Do(func() {
		s.stopMu.Lock()
		stop := s.stop
		s.stopMu.Unlock()
		if stop != nil {
			stop()
		}
		s.c.mu.Lock()
		defer s.c.mu.Unlock()
		if s.c.resp == s.r {
			s.c.cancel(s.r)
		}
		s.r.finish(io.EOF)
	})
	return nil
}

// decodePCM decodes base64 PCM16LE into samples, appended to buf[:0].
func decodePCM(buf []int16, b64 string) ([]int16, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return buf, err
	}
	buf = buf[:0]
	for i := 0; i+1 < len(raw); i += 2 {
		buf = append(buf, int16(binary.LittleEndian.Uint16(raw[i:])))
	}
	return buf, nil
}

// encodePCM encodes samples as base64 PCM16LE.
func encodePCM(samples []int16) string {
	raw := make([]byte, 2*len(samples))
	for i, v := range samples {
		binary.LittleEndian.PutUint16(raw[2*i:], uint16(v))
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// handle applies one server event. It runs on the connection's reader
// goroutine and never blocks on a consumer.
func (c *Client) handle(ev serverEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.resp
	mine := r != nil && (ev.ResponseID == "" || ev.ResponseID == r.id)
	switch ev.Type {
	case "error":
		c.onError(ev)
	case "conversation.item.added", "conversation.item.created":
		if it := ev.Item; it != nil {
			m := mirrorItem{id: it.ID, kind: it.Type, role: it.Role, callID: it.CallID, origin: byServer}
			for _, ct := range it.Content {
				if ct.Type == "input_audio" {
					m.transcribing = ct.Transcript == ""
					m.text = ct.Transcript
				}
			}
			c.mirror.add(m, ev.PreviousItemID)
		}
	case "conversation.item.deleted":
		c.mirror.remove(ev.ItemID)
	case "conversation.item.truncated":
		if m := c.mirror.get(ev.ItemID); m != nil {
			m.truncated = true
			m.samples = min(m.samples, ev.AudioEndMs*Rate/1000)
		}
	case "conversation.item.input_audio_transcription.delta":
		if c.rec != nil && ev.Delta != "" {
			c.rec.partial(ev.ItemID, ev.Delta)
		}
	case "conversation.item.input_audio_transcription.completed":
		if m := c.mirror.get(ev.ItemID); m != nil {
			m.transcribing = false
			m.text = ev.Transcript
		}
		if c.rec != nil {
			c.rec.final(ev.ItemID, ev.Transcript)
		}
	case "conversation.item.input_audio_transcription.failed":
		if m := c.mirror.get(ev.ItemID); m != nil {
			m.transcribing = false
		}
		msg := ""
		if ev.Error != nil {
			msg = ev.Error.Message
		}
		c.cfg.log.Warn("realtime: transcription of the caller's audio failed", "item", ev.ItemID, "error", msg)
	case "response.created":
		if r != nil && r.id == "" && ev.Response != nil {
			r.id = ev.Response.ID
			if r.cancelWanted {
				c.cancel(r)
			}
		}
	case "response.output_audio.delta", "response.audio.delta":
		if !mine {
			return
		}
		pcm, err := decodePCM(nil, ev.Delta)
		if err != nil || len(pcm) == 0 {
			return
		}
		if m := c.mirror.get(ev.ItemID); m != nil {
			m.samples += len(pcm)
		} else {
			c.mirror.add(mirrorItem{id: ev.ItemID, kind: "message", role: "assistant", samples: len(pcm)}, nil)
		}
		r.push(llm.Chunk{Audio: media.Frame{Samples: pcm, SampleRate: Rate}})
	case "response.output_audio_transcript.delta", "response.audio_transcript.delta":
		if mine && ev.Delta != "" {
			r.push(llm.Chunk{Transcript: ev.Delta})
		}
	case "response.output_text.delta", "response.text.delta":
		if mine && ev.Delta != "" {
			r.push(llm.Chunk{Text: ev.Delta})
		}
	case "response.function_call_arguments.done":
		// Not yet a call to run: the response may still end cancelled.
		if mine {
			r.addCall(ev.CallID, ev.Name, ev.Arguments)
		}
	case "response.output_item.done":
		if mine && ev.Item != nil && ev.Item.Type == "function_call" {
			r.addCall(ev.Item.CallID, ev.Item.Name, ev.Item.Arguments)
		}
	case "response.done":
		if r == nil || ev.Response == nil || (r.id != "" && ev.Response.ID != r.id) {
			return
		}
		switch ev.Response.Status {
		case "completed":
			for i, call := range r.calls {
				r.push(llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: i, ID: call.ID, Name: call.Name, Arguments: string(call.Arguments)}})
			}
			r.finish(io.EOF)
		case "failed":
			r.finish(&APIError{Type: "response_failed", Message: string(ev.Response.StatusDetails), Event: "response.create"})
		default: // cancelled, incomplete: its calls never run
			r.finish(io.EOF)
		}
		c.endResponse()
	}
}

// onError routes an error event. Called with c.mu held.
func (c *Client) onError(ev serverEvent) {
	e := &APIError{}
	if ev.Error != nil {
		e.Type, e.Code, e.Message = ev.Error.Type, ev.Error.Code, ev.Error.Message
		e.Event = c.sent[ev.Error.EventID]
	}
	r := c.resp
	switch {
	case e.Event == "response.cancel":
		// The response ended before the cancel arrived: nothing to do.
	case e.Event == "response.create" && r != nil && r.id == "":
		r.finish(e) // it never started
		c.endResponse()
	case r != nil && e.Event == "":
		r.finish(e)
	default:
		c.cfg.log.Warn("realtime: server refused an event", "event", e.Event, "code", e.Code, "message", e.Message)
	}
}
