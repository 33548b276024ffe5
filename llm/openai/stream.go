package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/holdline/holdline/llm"
)

// stream is one streamed completion. Recv is called from one goroutine;
// Close may be called from any, at any time, any number of times.
type stream struct {
	m      *Model
	req    goopenai.ChatCompletionRequest
	parent context.Context
	ctx    context.Context // parent, also cancelled by Close
	cancel context.CancelCauseFunc

	ready chan struct{} // closed when the first connection attempt is over

	// mu is held by Recv while it reads conn and by Close to close it, so
	// the body is never closed under a read. Close cancels ctx first,
	// which ends any read at once.
	mu      sync.Mutex
	conn    *goopenai.ChatCompletionStream
	connErr error // why the connection could not be made

	// Owned by the connecting goroutine until ready, then by Recv.
	attempts  int // requests sent
	retries   int // retries made
	delivered bool
	finished  bool // a finish_reason was seen
	pending   []llm.Chunk
	index     indexMapper
	done      error // the error every later Recv returns
}

func (m *Model) start(ctx context.Context, req goopenai.ChatCompletionRequest) *stream {
	s := &stream{m: m, req: req, parent: ctx, ready: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	s.index.reset()
	go s.open()
	return s
}

// open makes the first connection, with retries, in the background so that
// Stream returns at once.
func (s *stream) open() {
	conn, err := s.connect()
	s.mu.Lock()
	if err == nil && s.ctx.Err() != nil {
		// Closed or cancelled while the answer was arriving.
		conn.Close()
		conn, err = nil, s.ctxErr()
	}
	s.conn, s.connErr = conn, err
	s.mu.Unlock()
	close(s.ready)
}

// connect sends the request until it is answered with a stream, retrying
// 429, 5xx and connection failures within the retry budget.
func (s *stream) connect() (*goopenai.ChatCompletionStream, error) {
	for {
		a := &attempt{}
		conn, err := s.m.client.CreateChatCompletionStream(context.WithValue(s.ctx, attemptKey{}, a), s.req)
		if a.sent {
			s.attempts++
		}
		if err == nil {
			return conn, nil
		}
		if s.ctx.Err() != nil {
			return nil, s.ctxErr()
		}
		if !a.sent || !retryable(err, a) || insufficientQuota(err) {
			return nil, s.fail("chat completion", err)
		}
		if s.retries >= s.m.cfg.retries {
			return nil, s.fail("chat completion", err)
		}
		if err := s.m.wait(s.ctx, s.m.backoff(s.retries, a.retryAfter)); err != nil {
			return nil, s.ctxErr()
		}
		s.retries++
	}
}

func insufficientQuota(err error) bool {
	var apiErr *goopenai.APIError
	return errors.As(err, &apiErr) && apiErr.Code == "insufficient_quota"
}

// fail wraps err with what happened: the sentinel of the status class, how
// many attempts were made, and go-openai's error with the provider's
// message. The API key is redacted.
func (s *stream) fail(what string, err error) error {
	switch st := status(err); {
	case st == http.StatusTooManyRequests:
		err = fmt.Errorf("%w: %s (attempts: %d): %w", ErrRateLimited, what, s.attempts, err)
	case st >= 500:
		err = fmt.Errorf("%w: %s (attempts: %d): %w", ErrServer, what, s.attempts, err)
	case s.attempts > 1:
		err = fmt.Errorf("openai: %s (attempts: %d): %w", what, s.attempts, err)
	default:
		err = fmt.Errorf("openai: %s: %w", what, err)
	}
	return s.m.redact(err)
}

// ctxErr is the error for a stream whose context ended: ErrClosed after
// Close, else the caller's ctx.Err() wrapped.
func (s *stream) ctxErr() error {
	if err := s.parent.Err(); err != nil {
		return fmt.Errorf("openai: chat completion: %w", err)
	}
	if errors.Is(context.Cause(s.ctx), ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("openai: chat completion: %w", s.ctx.Err())
}

func (s *stream) Recv() (llm.Chunk, error) {
	if s.done != nil {
		return llm.Chunk{}, s.done
	}
	if len(s.pending) > 0 && s.ctx.Err() == nil {
		return s.pop(), nil
	}
	select {
	case <-s.ready:
	case <-s.ctx.Done():
		// open sees the context end and drops the connection itself.
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return llm.Chunk{}, s.end(s.ctxErr())
	}
	if s.connErr != nil {
		return llm.Chunk{}, s.end(s.connErr)
	}
	for {
		resp, err := s.conn.Recv()
		if err == nil {
			s.take(resp)
			if len(s.pending) > 0 {
				return s.pop(), nil
			}
			continue
		}
		if s.ctx.Err() != nil {
			return llm.Chunk{}, s.end(s.ctxErr())
		}
		if errors.Is(err, io.EOF) {
			if s.finished {
				return llm.Chunk{}, s.end(io.EOF)
			}
			// A stream that stops without a finish_reason was cut off; a
			// clean EOF would pass a truncated answer off as complete.
			err = fmt.Errorf("stream ended before a finish_reason: %w", io.ErrUnexpectedEOF)
		}
		if s.delivered || !brokenConnection(err) || s.retries >= s.m.cfg.retries {
			return llm.Chunk{}, s.end(s.fail("chat completion stream", err))
		}
		// The connection broke before anything was delivered: as good as
		// a failed request, so try again.
		s.conn.Close()
		s.conn = nil
		if err := s.m.wait(s.ctx, s.m.backoff(s.retries, 0)); err != nil {
			return llm.Chunk{}, s.end(s.ctxErr())
		}
		s.retries++
		s.index.reset()
		s.finished = false
		s.pending = nil
		conn, err := s.connect()
		if err != nil {
			return llm.Chunk{}, s.end(err)
		}
		s.conn = conn
	}
}

// end makes err the answer to every later Recv and releases the
// connection. The caller holds mu.
func (s *stream) end(err error) error {
	s.done = err
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	s.cancel(ErrClosed) // release the context; done answers from now on
	return err
}

func (s *stream) pop() llm.Chunk {
	c := s.pending[0]
	s.pending = s.pending[1:]
	s.delivered = true
	return c
}

// take queues the chunks of one response: text first, then tool calls.
func (s *stream) take(resp goopenai.ChatCompletionStreamResponse) {
	if u := resp.Usage; u != nil {
		defer func() {
			s.pending = append(s.pending, llm.Chunk{Usage: &llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}})
		}()
	}
	for _, ch := range resp.Choices {
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		if ch.FinishReason != "" {
			s.finished = true
		}
		d := ch.Delta
		if text := d.Content + d.Refusal; text != "" {
			s.pending = append(s.pending, llm.Chunk{Text: text})
		}
		for _, tc := range d.ToolCalls {
			s.pending = append(s.pending, llm.Chunk{ToolCall: &llm.ToolCallDelta{
				Index:     s.index.index(tc.Index, tc.ID),
				ID:        tc.ID,
				Name:      tc.Function.Name,
				Arguments: tc.Function.Arguments,
			}})
		}
	}
}

func (s *stream) Close() error {
	s.cancel(ErrClosed)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	return nil
}

// indexMapper gives every tool-call delta the index of its call. Deltas
// with an index keep it. Some providers send none: then a delta with an id
// not seen before starts a new call after the highest index so far, and a
// delta without one (or with the current call's id) continues the latest.
type indexMapper struct {
	last, highest int            // -1 before the first call
	ids           map[string]int // id -> index
}

func (m *indexMapper) reset() {
	m.last, m.highest = -1, -1
	m.ids = nil
}

func (m *indexMapper) index(idx *int, id string) int {
	var i int
	switch known, ok := m.ids[id]; {
	case idx != nil:
		i = *idx
	case id != "" && ok:
		i = known
	case id != "" || m.last < 0:
		i = m.highest + 1
	default:
		i = m.last
	}
	if id != "" {
		if m.ids == nil {
			m.ids = map[string]int{}
		}
		m.ids[id] = i
	}
	m.last = i
	m.highest = max(m.highest, i)
	return i
}
