package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"

	"github.com/holdline/holdline/media"
)

// Model starts streaming completions. Stream must return promptly; the
// response arrives through the returned Stream. Cancelling ctx must end the
// stream: Recv then returns an error wrapping ctx.Err().
type Model interface {
	Stream(ctx context.Context, req Request) (Stream, error)
}

// Stream yields a response piece by piece. Recv returns io.EOF after the last
// chunk. Close releases the stream and may be called at any time.
type Stream interface {
	Recv() (Chunk, error)
	Close() error
}

// Request is one model request.
type Request struct {
	Instructions string
	Context      ChatContext
	Tools        []ToolSpec
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"` // JSON schema of the arguments object
}

// Chunk is one piece of a streamed response: text for the session to
// speak, a tool-call delta, or, from a speech-to-speech model, audio the
// model spoke itself and its transcript.
type Chunk struct {
	// Text is the model's words, to be synthesised.
	Text     string
	ToolCall *ToolCallDelta

	// Audio is speech the model produced itself. The session plays it as
	// it is, resampled to the output rate; Samples may be reused by the
	// stream after the next Recv.
	Audio media.Frame
	// Transcript is the text of the model's own audio: it enters the
	// context as what was said (as far as it was played) and is never
	// synthesised.
	Transcript string
}

// ToolCallDelta is a fragment of a tool call. Fragments of one call share an
// Index; ID and Name usually arrive on the first fragment and Arguments are
// split across several, as chat-completion APIs stream them.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// ToolCall is a complete call assembled from its deltas.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// CallAccumulator assembles tool calls from deltas keyed by Index, in the
// order of their indexes (indexes need not start at 0 nor be contiguous).
type CallAccumulator struct {
	calls map[int]*ToolCall
	args  map[int][]byte
}

// Add folds one delta in.
func (a *CallAccumulator) Add(d ToolCallDelta) {
	if a.calls == nil {
		a.calls = map[int]*ToolCall{}
		a.args = map[int][]byte{}
	}
	c, ok := a.calls[d.Index]
	if !ok {
		c = &ToolCall{}
		a.calls[d.Index] = c
	}
	if d.ID != "" {
		c.ID = d.ID
	}
	if d.Name != "" {
		c.Name = d.Name
	}
	a.args[d.Index] = append(a.args[d.Index], d.Arguments...)
}

// Calls returns the assembled calls in index order. A call the model gave no
// id keeps an empty ID; the session assigns one so that it can be answered.
func (a *CallAccumulator) Calls() []ToolCall {
	idx := make([]int, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := make([]ToolCall, 0, len(idx))
	for _, i := range idx {
		c := *a.calls[i]
		c.Arguments = bytes.Clone(a.args[i])
		if len(c.Arguments) == 0 {
			c.Arguments = json.RawMessage("{}")
		}
		out = append(out, c)
	}
	return out
}

// Voiced is implemented by speech-to-speech models. When Voiced reports
// true their streams carry Audio and Transcript instead of Text, and an
// agent on such a model needs no synthesiser.
type Voiced interface {
	Voiced() bool
}

// IsVoiced reports whether m speaks for itself.
func IsVoiced(m Model) bool {
	v, ok := m.(Voiced)
	return ok && v.Voiced()
}
