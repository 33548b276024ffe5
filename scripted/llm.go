package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/holdline/holdline/llm"
)

// ErrScriptExhausted is returned by [LLM.Stream] once every scripted
// response has been used.
var ErrScriptExhausted = errors.New("scripted: llm script exhausted")

// DefaultTokensPerSecond is the streaming rate of a [Response] that does not
// set one.
const DefaultTokensPerSecond = 50

// Response is one scripted model answer.
type Response struct {
	// TTFB is the delay from the Stream call to the first chunk.
	TTFB time.Duration
	// Text is streamed word by word: each chunk is a word with the
	// whitespace that follows it, so the chunks concatenate to Text.
	Text string
	// ToolCalls are streamed after the text, two deltas per call.
	ToolCalls []Call
	// TokensPerSecond paces the chunks after the first; 0 means
	// DefaultTokensPerSecond and +Inf means no pacing at all.
	TokensPerSecond float64
	// Err is returned by Recv in place of the first chunk, after TTFB,
	// unless ErrAfter moves it later.
	Err error
	// ErrAfter, if positive, lets that many chunks through before Recv
	// fails with Err (a mid-stream failure), at the time the next chunk
	// would have arrived. If the response has fewer chunks, Err replaces
	// io.EOF. ErrAfter without Err is ignored.
	ErrAfter int
	// Hang makes the stream yield nothing until its context ends or it is
	// closed, as a model that accepted the request and went silent.
	Hang bool
	// Usage, if set, is reported on a last chunk of its own, as models
	// that count tokens report them.
	Usage *llm.Usage
}

// Call is a scripted tool call.
type Call struct {
	ID   string // may be empty, as some models send no call ids
	Name string
	// Args is marshalled to JSON; a json.RawMessage or a string is taken
	// as JSON text as is (even if invalid, to script a broken model), and
	// nil stands for "{}".
	Args any
}

// LLM is a scripted [llm.Model]. It is safe for concurrent use.
type LLM struct {
	fn func(llm.Request) Response
	// of, when set, answers in this model's place, unpaced (Unpaced).
	of *LLM

	mu     sync.Mutex
	script []Response
	used   int
	reqs   []llm.Request
}

var _ llm.Model = (*LLM)(nil)

// NewLLM returns a model that answers the n-th Stream call with the n-th
// response and fails with [ErrScriptExhausted] after the last.
func NewLLM(responses ...Response) *LLM {
	return &LLM{script: append([]Response(nil), responses...)}
}

// NewLLMFunc returns a model that answers every Stream call with fn(req),
// for answers that depend on the request. fn may be called concurrently.
func NewLLMFunc(fn func(llm.Request) Response) *LLM {
	return &LLM{fn: fn}
}

// Unpaced returns a model that answers as m does, from m's script or
// function, but delivers each answer at once: no TTFB and no pause between
// chunks. It is for a server that sets the pace itself (openaitest with
// its Latency), which a model pacing itself would slow further. The two
// share the script, and the requests either receives are recorded in m's
// Requests.
func (m *LLM) Unpaced() *LLM {
	if m.of != nil {
		return m
	}
	return &LLM{of: m}
}

// Requests returns deep copies of every request received, in order, so tests
// can inspect what the model was shown without racing later turns.
func (m *LLM) Requests() []llm.Request {
	if m.of != nil {
		return m.of.Requests()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]llm.Request, len(m.reqs))
	for i, r := range m.reqs {
		out[i] = cloneRequest(r)
	}
	return out
}

// Stream implements [llm.Model]. It records req and returns at once; the
// response's schedule starts now.
func (m *LLM) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	start := time.Now()
	resp, err := m.respond(req)
	if err != nil {
		return nil, err
	}
	chunks, err := responseChunks(resp)
	if err != nil {
		return nil, err
	}
	tps := resp.TokensPerSecond
	if tps <= 0 || math.IsNaN(tps) {
		tps = DefaultTokensPerSecond
	}
	failAt := -1
	if resp.Err != nil {
		failAt = min(max(resp.ErrAfter, 0), len(chunks))
	}
	return &llmStream{
		ctx:    ctx,
		start:  start.Add(resp.TTFB),
		tps:    tps,
		chunks: chunks,
		hang:   resp.Hang,
		err:    resp.Err,
		failAt: failAt,
		closed: make(chan struct{}),
	}, nil
}

// respond records req and picks the response to it.
func (m *LLM) respond(req llm.Request) (Response, error) {
	if m.of != nil {
		resp, err := m.of.respond(req)
		resp.TTFB, resp.TokensPerSecond = 0, math.Inf(1)
		return resp, err
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, cloneRequest(req))
	var (
		resp Response
		ok   = true
	)
	if m.fn == nil {
		if m.used < len(m.script) {
			resp = m.script[m.used]
			m.used++
		} else {
			ok = false
		}
	}
	used := m.used
	m.mu.Unlock()

	if !ok {
		return Response{}, fmt.Errorf("%w: all %d responses used", ErrScriptExhausted, used)
	}
	if m.fn != nil {
		// Outside the lock: fn may well call Requests.
		resp = m.fn(req)
	}
	return resp, nil
}

// responseChunks splits a response into the chunks it streams.
func responseChunks(resp Response) ([]llm.Chunk, error) {
	var chunks []llm.Chunk
	for _, w := range splitWords(resp.Text) {
		chunks = append(chunks, llm.Chunk{Text: w})
	}
	for i, c := range resp.ToolCalls {
		args, err := marshalArgs(c.Args)
		if err != nil {
			return nil, fmt.Errorf("scripted: arguments of tool call %d (%s): %w", i, c.Name, err)
		}
		// Split in the middle, on a rune boundary, so that a consumer
		// which does not accumulate sees broken JSON.
		half := len(args) / 2
		for half > 0 && !utf8.RuneStart(args[half]) {
			half--
		}
		chunks = append(chunks,
			llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: i, ID: c.ID, Name: c.Name, Arguments: args[:half]}},
			llm.Chunk{ToolCall: &llm.ToolCallDelta{Index: i, Arguments: args[half:]}},
		)
	}
	if resp.Usage != nil {
		u := *resp.Usage
		chunks = append(chunks, llm.Chunk{Usage: &u})
	}
	return chunks, nil
}

// splitWords cuts s after each run of whitespace that follows a word, so the
// pieces concatenate back to s; leading whitespace stays with the first word.
func splitWords(s string) []string {
	var out []string
	start := 0
	inSpace := false
	for i, r := range s {
		sp := unicode.IsSpace(r)
		if inSpace && !sp && strings.TrimSpace(s[start:i]) != "" {
			out = append(out, s[start:i])
			start = i
		}
		inSpace = sp
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func marshalArgs(a any) (string, error) {
	switch a := a.(type) {
	case nil:
		return "{}", nil
	case json.RawMessage:
		return string(a), nil
	case string:
		return a, nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func cloneRequest(r llm.Request) llm.Request {
	r.Context = r.Context.Clone()
	if r.Tools != nil {
		tools := make([]llm.ToolSpec, len(r.Tools))
		for i, t := range r.Tools {
			if t.Parameters != nil {
				t.Parameters = append(json.RawMessage(nil), t.Parameters...)
			}
			tools[i] = t
		}
		r.Tools = tools
	}
	return r
}

type llmStream struct {
	ctx    context.Context
	start  time.Time // when the first chunk is due
	tps    float64
	chunks []llm.Chunk
	hang   bool
	err    error
	failAt int // index of the chunk Err replaces, -1 for none

	next int
	done error // io.EOF or the failure, once reached

	closed    chan struct{}
	closeOnce sync.Once
}

// due is when the i-th chunk (or the failure in its place) arrives. The end
// of the stream follows the last chunk without a gap.
func (s *llmStream) due(i int) time.Time {
	if i >= len(s.chunks) {
		i = max(len(s.chunks)-1, 0)
	}
	return s.start.Add(offset(i, s.tps))
}

func (s *llmStream) Recv() (llm.Chunk, error) {
	if err := s.ctx.Err(); err != nil {
		return llm.Chunk{}, streamErr("llm", err)
	}
	select {
	case <-s.closed:
		return llm.Chunk{}, ErrClosed
	default:
	}
	if s.done != nil {
		return llm.Chunk{}, s.done
	}
	if s.hang {
		select {
		case <-s.ctx.Done():
			return llm.Chunk{}, streamErr("llm", s.ctx.Err())
		case <-s.closed:
			return llm.Chunk{}, ErrClosed
		}
	}
	if s.next == s.failAt {
		// A failure replacing io.EOF comes when the next chunk would
		// have, not together with the last one.
		due := s.start.Add(offset(s.next, s.tps))
		if err := waitUntil(s.ctx, s.closed, due); err != nil {
			return llm.Chunk{}, streamErr("llm", err)
		}
		s.done = s.err
		return llm.Chunk{}, s.done
	}
	if err := waitUntil(s.ctx, s.closed, s.due(s.next)); err != nil {
		return llm.Chunk{}, streamErr("llm", err)
	}
	if s.next >= len(s.chunks) {
		s.done = io.EOF
		return llm.Chunk{}, io.EOF
	}
	c := s.chunks[s.next]
	s.next++
	return c, nil
}

func (s *llmStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}
