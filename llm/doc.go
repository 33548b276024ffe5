// Package llm defines what the session core needs from a language model: a
// streaming, cancellable request that yields text and tool-call deltas, and
// the chat context (system, user, assistant, tool-call and tool-result items)
// the request carries.
//
// Providers live in subpackages or elsewhere; the scripted package has a
// deterministic model for tests and simulations.
//
// # The provider contract
//
// A session asks its agent's [Model] for an answer each time the agent is to
// speak: [Model.Stream] with a [Request], then [Stream.Recv] until the
// stream ends. What follows is what a Model can rely on and what it owes.
//
// Instructions are the agent's system prompt, with whatever the application
// asked for this one reply appended (Session.GenerateReply). Tools are the
// tools of the agent answering; after a handoff they are another agent's.
//
// The context is the conversation as the caller experienced it, oldest
// first. A user message is one turn of the caller's. An assistant message
// is what the agent said: while its audio may still be playing, the text
// the model wrote; once it was cut short, exactly the words that played
// (Interrupted and Played say so). The tool calls of an answer follow its
// assistant message (whose text may be empty), and their results follow
// the calls, one per call, in the order the model made them. A system
// message in the context is the session's own: for instance a note that
// the end of an answer never reached the caller.
//
// A result always sits next to its call, however late it comes. When a call
// is still running as a request goes out (the caller spoke again, or the
// call runs in the background), its result is a provisional output
// ([ProvisionalRunning], [ProvisionalDetached], [ProvisionalDeferred];
// [IsProvisional] tells them): providers reject a call without an output.
// When the call ends, its real result replaces the provisional one in the
// same place, next to the call and before the user turns and answers that
// came after it; it is not appended at the end. The request that brings it
// has Reason [ReasonToolResult] (or [ReasonFollowUp], if the caller has not
// spoken since the call was made), and its New is no later than the
// result's index. A result corrected later (a call abandoned at its deadline that
// finished after all) keeps its place too, its Output followed by an
// "update:" line, and is brought the same way.
//
// [Request.Reason] says why the request was made: a turn of the caller's,
// the results of the model's own calls, a result that came later, a retry
// of a request that failed, an agent taking over or greeting, a reply the
// application asked for. A model needs none of it to answer well, since
// the context holds everything; it saves a simple model guessing, and a
// model that keeps state of its own learns when to start afresh. New marks
// where the context stops matching the previous request ([Request.New]);
// [Request.NewItems] returns the rest.
//
// # Streaming and cancellation
//
// Stream must return promptly, before the model's first token: the answer
// arrives through the [Stream]. The session reads the stream on one
// goroutine and calls Close once it stops reading, whether the stream
// ended or not.
//
// The stream ends one of three ways:
//
//   - Recv returns io.EOF after the last chunk: the answer is complete.
//   - Recv returns another error: the model failed. If nothing of the answer
//     had come yet, the session asks the agent's backup model, if it has
//     one, the same request (ReasonRetry), and failing that apologises to
//     the caller; if something had,
//     what came stands (its words are spoken, its tool calls made) and the
//     error is reported.
//   - The context passed to Stream is cancelled: the caller cut in, the
//     session moved on or ended, or the stream sent nothing for the stall
//     timeout. The model must stop at once, sending nothing more: Recv
//     returns an error wrapping ctx.Err(), and a Recv blocked waiting for
//     the provider must return then, not when the provider next speaks.
//
// Cancellation does not wait for the stream to end: the session makes its
// next request at once, so Stream may be called while an earlier stream
// is still winding down. A model that holds a single connection must make
// the new request wait for, or cancel, the old one.
//
// Tool calls come as [ToolCallDelta] fragments, which the session joins with
// a [CallAccumulator]; arguments are validated against the tool's schema
// before anything runs, and a call the model gave no id gets one from the
// session. A speech-to-speech model ([Voiced]) sends Audio and Transcript
// instead of Text.
package llm
