// Package realtime runs an agent on OpenAI's Realtime API, a
// speech-to-speech model, over a websocket, while Holdline stays in the
// media path: the caller's audio goes through the session's echo canceller,
// voice detector and barge-in arbiter before it is sent, the model's audio
// is played by the session's player, and barge-in is decided by the
// arbiter, not by the server.
//
// One Client is one Realtime session (one websocket) and serves one call:
// it is the agent's Model, and Recognizer returns its STT, which sends the
// caller's utterances and returns the server's transcripts of them.
//
// The client keeps a mirror of the server's conversation and, before each
// response, brings it in line with the session's context: items the caller
// never heard are deleted, an interrupted answer is truncated with
// conversation.item.truncate at the integer number of milliseconds the
// playout clock says were played, every tool result is sent as one
// function_call_output and followed by a separate response.create. It
// avoids the protocol's traps:
//
//   - function calls are handed to the session only when response.done
//     says the response completed: response.function_call_arguments.done
//     also arrives for responses that were cancelled or cut short;
//   - never two responses in flight: a new one waits for the previous
//     response.done;
//   - response.cancel names the response id, and a cancel asked for before
//     response.created is sent when the id arrives;
//   - every function call the session was given gets exactly one output.
//
// With WithServerVAD the server's voice detector segments the caller's
// audio (and, if asked, cuts its own responses short when the caller
// speaks); the server is never allowed to start responses on its own,
// because the session decides when the agent answers.
package realtime
