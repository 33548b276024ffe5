// Package tools defines the tools an agent may call.
//
// A tool is a typed Go function made available to the model: [New] infers the
// JSON schema of its arguments from a Go struct, so the description the model
// sees and the value the function receives cannot drift apart. [NewRaw] takes a
// hand-written schema instead, for tools whose arguments no Go type describes
// well.
//
// Arguments come from a language model and are untrusted. [Tool.Run]
// validates them against the schema before the function is called, and
// rejects bad input with an error wrapping [ErrInvalidArguments] whose message
// names the field and the problem, so that the session can hand it back to the
// model for another try. A panicking tool is reported as [ErrToolPanicked]
// rather than taking the session down.
//
// Each tool declares its [Effect] (a read is safe to repeat, a mutation is
// not) and a deadline ([Tool.Timeout]); the session uses both to decide what
// it may retry and when it stops waiting. Through the context the session
// also tells a running tool which call it serves ([CallInfoFrom]) and lets it
// wait until the agent has finished saying what it is about to do
// ([WaitPlayout]).
//
// The session's ledger of calls (what was requested, run, and committed to the
// chat) will live here too.
package tools
