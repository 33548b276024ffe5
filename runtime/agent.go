package runtime

import (
	"context"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// Agent is what a session runs: instructions, tools and providers.
type Agent struct {
	// Name identifies the agent in events and handoffs.
	Name string
	// Instructions are the system prompt.
	Instructions string
	// Tools the model may call.
	Tools []*tools.Tool
	// Model answers; required.
	Model llm.Model
	// STT recognises the caller's audio; needed only for audio input.
	STT stt.Recognizer
	// TTS speaks the model's text. Without it the agent is text-only: its
	// text counts as played the moment the model produces it.
	TTS tts.Synthesizer
	// OnEnter runs when the session starts, on a goroutine of its own (so it
	// may wait, under ctx); a typical body greets the caller with
	// s.GenerateReply.
	OnEnter func(ctx context.Context, s *Session) error
}
