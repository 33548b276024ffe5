package llm

import (
	"encoding/json"
	"strings"
	"time"
)

// Kind says what a chat item is.
type Kind string

// Item kinds.
const (
	KindMessage    Kind = "message"
	KindToolCall   Kind = "tool_call"
	KindToolResult Kind = "tool_result"
)

// Role is the speaker of a message item.
type Role string

// Roles of message items.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Item is one entry of the chat context.
type Item struct {
	Kind Kind `json:"kind"`

	// Message fields.
	Role Role   `json:"role,omitempty"`
	Text string `json:"text,omitempty"`
	// Interrupted marks an assistant message cut short by the user: Text
	// holds exactly the words that were played before the cut.
	Interrupted bool `json:"interrupted,omitempty"`
	// Played is, for an interrupted assistant message, how much of its
	// audio the caller heard.
	Played time.Duration `json:"played,omitempty"`
	// Confidence is, for a user message heard through a recogniser, how
	// sure the recogniser was of the words (stt.Transcript.Confidence;
	// the least of the turn's utterances); 0 when typed, or unknown. A
	// model may confirm what it heard with low confidence before acting.
	// Providers do not send it: it is for models that read the context.
	Confidence float64 `json:"confidence,omitempty"`

	// Tool-call and tool-result fields.
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"` // tool call: JSON object from the model
	Output    string          `json:"output,omitempty"`    // tool result: what the model is shown
	IsError   bool            `json:"is_error,omitempty"`  // tool result: the call failed
}

// ChatContext is the ordered history a model request carries.
type ChatContext struct {
	Items []Item `json:"items"`
}

// Clone returns a deep copy that shares nothing with c.
func (c ChatContext) Clone() ChatContext {
	items := make([]Item, len(c.Items))
	copy(items, c.Items)
	for i := range items {
		if items[i].Arguments != nil {
			items[i].Arguments = append(json.RawMessage(nil), items[i].Arguments...)
		}
	}
	return ChatContext{Items: items}
}

// String renders the context one item a line, for logs and tests.
func (c ChatContext) String() string {
	var b strings.Builder
	for _, it := range c.Items {
		switch it.Kind {
		case KindMessage:
			b.WriteString(string(it.Role))
			if it.Interrupted {
				b.WriteString(" (interrupted)")
			}
			b.WriteString(": ")
			b.WriteString(it.Text)
		case KindToolCall:
			b.WriteString("tool_call ")
			b.WriteString(it.Name)
			b.WriteString(" ")
			b.WriteString(string(it.Arguments))
			b.WriteString(" [")
			b.WriteString(it.CallID)
			b.WriteString("]")
		case KindToolResult:
			b.WriteString("tool_result ")
			b.WriteString(it.Name)
			if it.IsError {
				b.WriteString(" (error)")
			}
			b.WriteString(": ")
			b.WriteString(it.Output)
			b.WriteString(" [")
			b.WriteString(it.CallID)
			b.WriteString("]")
		}
		b.WriteByte('\n')
	}
	return b.String()
}
