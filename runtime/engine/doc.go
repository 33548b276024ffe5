// Package engine is the machinery under a session (runtime.Session): the
// state machine that answers a call, what it is told and what it
// commands, and the settings whoever carries the call gives a session.
// An agent's author needs none of it; package runtime is theirs.
//
// The session core (Core) is one conductor per call that owns all session
// state (floor, epochs, chat context, tool calls) and never waits. Edges
// (Edges) — the model stream, speech synthesis, the paced audio output,
// tool bodies, speech recognition — do the I/O: every command the core
// gives them (start, cancel, flush) returns at once, and what they do
// comes back as timestamped Inputs that the core takes one at a time. An
// edge that hangs can delay only its own result, and every such result has
// a deadline. runtime.Session drives a Core with goroutines around the
// agent's providers, a mailbox and the wall clock; the simulator (package
// sim) drives the very same Core with scripted edges on a VirtualClock,
// which is how a scenario tests the code that answers calls.
//
// What an edge decides, rather than waits for, is here too, so that the
// live edges and the simulator's take the same decisions: how a model's
// streamed text becomes phrases and what is said when it fails
// (AnswerText), which voice says a phrase, when to try again and what went
// unspoken (Synthesis), and the context a tool body runs in and how its
// return becomes a ToolOutcome (ToolCall, ToolOutcomeOf). The edges keep
// only the waiting: goroutines and the wall clock live, a scheduler on the
// virtual clock in the simulator.
//
// Every agent turn gets an epoch. Barge-in cancels the turn's context,
// flushes the output up to its epoch and truncates the assistant message
// to the words that were actually played; anything an old epoch produces
// later is dropped where it is met. A Turn exposes Interrupted,
// PlayoutStopped and Settled as separate signals, and Turn.WaitPlayout
// returns ErrInterrupted the moment the turn is interrupted.
//
// The caller's audio is judged by an InputJudge: the barge-in arbiter
// (vad.Arbiter), what it is told about the agent's output, and the Inputs
// its decisions mean (speech started and stopped, barge-in suspected,
// confirmed or resumed, the caller's words or words ignored). A live
// session runs one behind its echo canceller (EchoCanceller) and voice
// activity detector; the simulator runs one on scripted scores and
// transcripts.
//
// The core knows an agent by its Agent: name, instructions, tools, and
// what a key press means. What a session is set up with is its Settings:
// runtime.New's options set them, and so do this package's SessionOptions,
// which a transport or host gives (how the caller's audio comes, the
// output's framing, hang-up and transfer, the state a session starts from
// and where its states go, the clock). State is a session's state for a
// checkpoint or another worker, as package handoff seals it.
package engine
