// Package sim replays scenarios against the real session core in virtual
// time and checks that nothing a caller can do breaks it.
//
// A scenario file (format v1, see the README's "Simulator" section) scripts
// a caller (speech, typed input, backchannels at given times), the model's
// answers, the synthesiser and recogniser timings, the tools (duration,
// result or error, interrupt policy, hang, ignores cancellation) and faults
// (llm_error, tts_error, transport_drop), and says what must happen. The
// simulator runs runtime.Core, the same state machine that answers real
// calls, with scripted [runtime.Edges] on a discrete-event clock: a
// thirty-second call runs in well under a millisecond, and the 200–700 ms
// windows where interruption bugs live are exact. Work due at one instant
// from different sources (a tool's result and the caller's speech) happens
// in an order drawn from the seed, as racing goroutines would; work from one
// source keeps its order. A run is a pure function of the file and the
// seed, so every failure can be replayed.
//
// # Invariants
//
// Every run checks, whatever the file expects:
//   - no hang: the session is idle (no turn, no call in flight, no result
//     owed an answer) before the scenario's timeout;
//   - every call reaches exactly one terminal state and is committed;
//   - every request the model receives, and the final context, hold exactly
//     one result per call, in call order, next to the calls (a call still
//     running shows a provisional output);
//   - the assistant messages in the context are exactly the words the
//     caller heard, turn by turn (judged from the simulated output, not the
//     core's own account);
//   - every result not ended by the interruption itself reaches the model,
//     and no request goes out with nothing new in it (one inference per
//     result, not two);
//   - at most once: a mutation body never starts while an earlier run with
//     its idempotency key is running, has succeeded or timed out;
//   - an interrupted turn's audio is flushed in the same step;
//   - max_stall: a finished user turn, injected input, or a result whose
//     turn is complete and whose floor is free is carried by a model request
//     within expect.max_stall.
//
// # Defaults
//
// Keys absent from a file take these values (scenario.go is the reference):
//
//	seed                     1
//	timeout                  30s (virtual; work still in flight then is a hang)
//	agent.instructions       "You are a helpful voice agent."
//	agent.tools[].effect     mutation
//	agent.tools[].on_interrupt  by effect: read → complete, mutation → defer
//	agent.tools[].duration   100ms
//	agent.tools[].timeout    10s
//	agent.tools[].result     {"ok":true}
//	agent.tools[].error      "" (succeeds)
//	agent.tools[].ignores_cancel, hang  false
//	agent.tools[].dedupe     true (at most once for mutations)
//	model[].ttfb             300ms; the whole response arrives then
//	model[].text             "" ; tool_calls: none; args: {}
//	requests beyond model[]  an empty reply (no words, no calls) after 300ms
//	tts.ttfb                 200ms per sentence, sentences synthesised in turn
//	tts.words_per_second     2.5
//	stt.latency              150ms after the speech ends
//	vad.onset                100ms (shorter speech is never detected)
//	vad.endpointing          500ms of silence ends the caller's turn
//	user[].duration          words / 3 per second
//	expect.max_stall         100ms
//	expect.every_call_answered, context_matches_playout  true (cannot be turned off)
//	expect.events[].count    at least one; within: no limit; after: session start
//	sweep                    none; with --sweep N the values are evenly spaced
//	                         from `from` to `to`, and run i uses seed+i
//
// A `backchannel` is speech like `say`; until the barge-in arbiter lands it
// interrupts like any speech. A transport_drop cuts the output at once; the
// caller's next action brings the line back.
package sim
