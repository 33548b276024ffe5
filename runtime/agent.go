package runtime

import (
	"context"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// AgentFunc makes the agent for a new call, with a function that releases
// what it holds (provider connections, decoders) once the call has ended
// (nil if nothing). Every transport and the host take one: a fresh agent
// per call, since an agent's providers may hold per-call state.
type AgentFunc func(ctx context.Context) (agent *Agent, release func(), err error)

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
	// Phrases are examples of what callers say to this agent. Recognisers
	// that work from a grammar or take hints use them: the local one
	// (stt/pocketsphinx) listens only for their words, so a word missing
	// here is a word it cannot hear.
	Phrases []string
	// Apology is what the agent says when its model fails before saying
	// anything, so the caller is never left in silence; DefaultApology when
	// empty.
	Apology string
	// BackupModel, BackupSTT and BackupTTS, each optional, take over their
	// role when the primary provider fails: a model that fails before its
	// first token, a synthesiser that fails on a phrase, a recogniser whose
	// stream breaks. A provider_failover event says so each time.
	BackupModel llm.Model
	BackupSTT   stt.Recognizer
	BackupTTS   tts.Synthesizer
	// OnEnter runs when the session starts, on a goroutine of its own (so it
	// may wait, under ctx), and when a handoff makes it the agent; a
	// typical body greets the caller with s.GenerateReply. For a session
	// restored from a state, s.Restored is true and the OnEnter that runs
	// is the restored agent's: a greeting there would repeat one the
	// caller has heard (the transport that restored the session has the
	// agent pick up where it was).
	OnEnter func(ctx context.Context, s *Session) error
	// Peers are the agents this one may hand the session to
	// (Session.Handoff). They are how a session restored from a state
	// (engine.WithState) comes back as the agent it was talking as: New
	// looks the state's agent up by Name among the agent given to it, its
	// peers, their peers and so on. A state naming none of them is taken over by
	// the agent given to New, as a transfer to another worker's agent is.
	Peers []*Agent
	// DTMF says what a key the caller pressed on a phone does. By default
	// (DTMFAsInput) it is a user turn the model answers, written as
	// engine.DTMFText says ("Pressed 1"), so "press 1 to confirm" works
	// with any model; DTMFEventOnly leaves it an event for the agent's own
	// code.
	DTMF DTMFMode
}

// DTMFMode is what a caller's key press does; see Agent.DTMF.
type DTMFMode int

const (
	// DTMFAsInput makes each key press a user turn ("Pressed 1").
	DTMFAsInput DTMFMode = iota
	// DTMFEventOnly only emits the dtmf event.
	DTMFEventOnly
)

// describe is what the session core knows of a: no providers.
func (a *Agent) describe() engine.Agent {
	return engine.Agent{Name: a.Name, Instructions: a.Instructions, Tools: a.Tools, DTMFEventOnly: a.DTMF == DTMFEventOnly, Phrases: a.Phrases}
}

// find returns the agent named name among a and the agents reachable
// through Peers, or nil.
func (a *Agent) find(name string) *Agent {
	seen := map[*Agent]bool{}
	queue := []*Agent{a}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		if next == nil || seen[next] {
			continue
		}
		if next.Name == name {
			return next
		}
		seen[next] = true
		queue = append(queue, next.Peers...)
	}
	return nil
}
