// Package tracing turns a session's events into OpenTelemetry spans.
//
// It is an event subscriber like any other: a Session is fed the events
// the session core published, on the subscriber's goroutine, so a slow
// exporter costs events (an events_dropped event says how many), never
// the conductor's time. Every span carries the instants the events
// recorded (trace.WithTimestamp), not the moment it was made.
//
// A session is one trace, its id derived from the session id (TraceID):
// a session resumed on another worker after a crash, or put through to
// one, continues the same trace, and its session span links to the one
// of the life before. The spans:
//
//	holdline.session                      session_started → session_ended
//	├── holdline.turn                     turn_started → turn_settled (epoch, agent, interrupted, the stage breakdown)
//	│   ├── chat MODEL                    the model request (gen_ai.*: chat, model, tokens; event at the first token)
//	│   ├── holdline.synthesis            first phrase to the voice → its last audio
//	│   ├── holdline.playout              first audio played → playout_done/truncated
//	│   ├── execute_tool NAME             tool_requested → tool_terminal (call id, state, policy, idempotency key)
//	│   ├── holdline.barge_in             barge_in_suspected → confirmed or resumed (reasons)
//	│   └── holdline.provider_error       status error
//	├── holdline.handoff, holdline.checkpoint (a failed write), holdline.transport_lost (→ restored)
//	└── events: user_turn, checkpoint_saved, session_resumed, events_dropped, ...
//
// What was said (tool arguments, transcripts, the agent's words) is left
// out unless WithContent; credentials never go in.
//
// FromEnv sets up the exporter from the standard OTEL_* variables, and
// makes nothing when they ask for no traces.
package tracing
