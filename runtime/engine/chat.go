package engine

import (
	"encoding/json"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
)

// chat is the conversation: the context as the caller experienced it,
// what the model was last shown of it, the caller's words of the turn
// being heard, and the application's data carried with the state.
type chat struct {
	entries []*entry
	// sent is the context of the previous model request, for the next
	// one's New; nil when the agent has been shown nothing (a new session,
	// a restored one, a handoff).
	sent  []llm.Item
	heard heard
	// userData is the application's, carried with the state.
	userData map[string]json.RawMessage
}

// heard is the caller's turn as it is being heard.
type heard struct {
	// stages are the caller's side of the breakdown of the turn that will
	// answer them: their speech's end, the last final, the endpoint.
	stages events.Turn
	finals []string
	// wordsSinceSpeech: a final with words came since the caller last
	// started speaking, so finals may hold their latest words.
	wordsSinceSpeech bool
	// confidence is the least recogniser confidence of finals that has
	// one; 0: none has.
	confidence float64
}
