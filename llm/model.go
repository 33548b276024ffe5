package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strconv"

	"github.com/holdline/holdline/media"
)

// Model starts streaming completions. Stream must return promptly; the
// response arrives through the returned Stream. Cancelling ctx must end the
// stream: Recv then returns an error wrapping ctx.Err(). The package
// documentation has the whole contract: what the context holds, what the
// session does when a stream fails.
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

	// Reason is why the session made this request. A model may answer a
	// greeting differently from a tool's result; it needs no Reason to
	// answer correctly, because the context says everything.
	Reason Reason
	// New is the index of the first item of Context that the session's
	// previous request did not carry as it is now. Context.Items[:New]
	// are exactly, item for item, the first New items of the previous
	// request; the item at New is not: it was added, or it changed (an
	// interrupted answer cut to the words played, a provisional tool
	// output replaced by the result), or an item before it was dropped.
	//
	// Usually everything from New on is news: the caller's turn, or the
	// model's own last answer with the results of its calls. A tool result
	// that arrives after the caller has spoken again is the exception: it
	// sits next to its call, before user turns the model was already
	// shown, so the items after it are not all new (see the package
	// documentation).
	//
	// New is 0 for the first request of a session, of an agent that took
	// over by a handoff, of a session restored from a saved state, and in
	// a Request built by hand: its zero value claims nothing was seen. A
	// retry carries the failed request's New.
	New int
}

// NewItems returns the items of the context from New on: what the model
// has not been shown in this form, and, after a late tool result, the
// items already shown that follow it. It shares Context's backing array.
// A New out of range is taken as 0 (below) or the context's length.
func (r Request) NewItems() []Item {
	return r.Context.Items[min(max(r.New, 0), len(r.Context.Items)):]
}

// Reason says why a session made a model request.
type Reason int

// Reasons for a request. A model answers each the same way (with what the
// context calls for); the Reason only saves it guessing what happened.
const (
	// ReasonUnspecified is the zero value: a request made outside a
	// session, or by code that does not say.
	ReasonUnspecified Reason = iota
	// ReasonUserTurn: the caller finished a turn (spoken, typed with
	// Session.Inject, or a key press). The turn is the context's last
	// user message.
	ReasonUserTurn
	// ReasonFollowUp: the tool calls of the model's previous answer have
	// all ended (calls run with the Detach policy aside) and their results
	// are in the context, right after the calls. The model speaks about
	// them; it may call more tools.
	ReasonFollowUp
	// ReasonToolResult: a tool result came in that no follow-up carries:
	// a detached call's, the result of a call that ended after the caller
	// had spoken again (it replaces the provisional output the model saw),
	// or a result corrected by an outcome that came after the call's
	// deadline. The model tells the caller what matters of it.
	ReasonToolResult
	// ReasonRetry: the previous request failed before the model said
	// anything, and the same request (context, tools and New) goes to the
	// agent's backup model. The reason of the failed request is not
	// repeated; the context shows what it was.
	ReasonRetry
	// ReasonHandoff: an agent took the session over by a handoff and
	// speaks first (runtime.WithGreeting). New is 0.
	ReasonHandoff
	// ReasonGreeting: the application asked the agent to speak before it
	// had made any request (Session.GenerateReply from OnEnter, at the
	// start of a call or after a handoff): the agent speaks first.
	ReasonGreeting
	// ReasonReply: the application asked the agent to speak
	// (Session.GenerateReply) later in the call, for instance to prompt a
	// caller who went quiet. The request's Instructions may carry what
	// to say.
	ReasonReply
	// ReasonSummary: a handoff with runtime.Summarize asks the outgoing
	// agent's model for a summary of the call for the next agent. The
	// answer is not spoken, and the request does not count as the
	// previous request of the next one; New is 0.
	ReasonSummary
)

var reasonNames = [...]string{
	ReasonUnspecified: "unspecified",
	ReasonUserTurn:    "user_turn",
	ReasonFollowUp:    "follow_up",
	ReasonToolResult:  "tool_result",
	ReasonRetry:       "retry",
	ReasonHandoff:     "handoff",
	ReasonGreeting:    "greeting",
	ReasonReply:       "reply",
	ReasonSummary:     "summary",
}

// String returns the reason's name in snake case, as logs and events
// write it ("user_turn", "follow_up").
func (r Reason) String() string {
	if r >= 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
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
	// Usage is the model's own count of the request's and the answer's
	// tokens, on the chunk that carries it (usually the last), for
	// models that report it.
	Usage *Usage
}

// Usage is a model's count of tokens.
type Usage struct {
	InputTokens  int
	OutputTokens int
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
