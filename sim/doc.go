// Package sim replays scenarios against the real session core in virtual
// time and checks that nothing a caller can do breaks it.
//
// A scenario file (format v1, see the README's "Simulator" section) scripts
// a caller (speech, typed input, backchannels and noises at given times),
// the line (its echo), the model's answers, the synthesiser and recogniser
// timings, the tools (duration, result or error, interrupt policy, hang,
// ignores cancellation) and faults (llm_error, tts_error and voice outages,
// transport_drop), and says what must happen. The simulator runs
// engine.Core, the same state machine that answers real calls, with
// scripted [engine.Edges] on a discrete-event clock, and the caller's
// sound goes through engine.InputJudge, the barge-in arbiter calls run: a
// thirty-second call runs in well under a millisecond, and the 200–700 ms
// windows where interruption bugs live are exact. Work due at one instant
// from different sources (a tool's result and the caller's speech) happens
// in an order drawn from the seed, as racing goroutines would; work from one
// source keeps its order. A run is a pure function of the file and the
// seed, so every failure can be replayed.
//
// # Go agents
//
// A file may test a Go agent instead of describing one: `agent: pizza`
// names an agent given to Parse or Load with WithAgents (simtest.Run does
// that for a test). Its instructions and its tools — names, descriptions,
// JSON schemas, effects, interrupt policies, timeouts, dedupe — are the Go
// agent's, read once at parse time, so when the agent changes its
// scenarios see the change: a mutation made to complete when interrupted
// fails the scenario that said "wait" stops it, and the model's scripted
// arguments are validated by the Go schema. The file scripts only what the
// bodies do, in a top-level `tools` mapping by tool name:
//
//	agent: pizza
//	tools:
//	  menu: {duration: 200ms, result: {pizzas: [margherita]}}
//	  place_order: {duration: 2s, result: {order_id: PZ1}}   # or error, hang, ignores_cancel
//
// A script takes duration, result, error, hang and ignores_cancel, with the
// defaults below; effect, on_interrupt, timeout and dedupe come from Go, and
// writing one is an error. A script for a tool the agent lacks, and a model
// call (model[].tool_calls) to an agent tool without a script, are errors
// naming the line. A scripted duration is swept or fixed as
// tools.NAME.duration. Only the instructions and tools are taken from the
// agent: the model, the voices and the caller are the file's, as always.
//
// With WithRealTools (simtest.RealTools) a tool the file does not script
// runs its Go body, on a fresh agent from the AgentFunc for each run and a
// goroutine per call, with the context a live session gives it (its
// deadline, the call's identity, its turn's playout; cancelled with the
// turn under the cancel policy). The run must then happen inside a
// testing/synctest bubble: the run sleeps in the bubble up to its next
// piece of work, so the bubble's fake clock, which the bodies' timers and
// sleeps read, keeps step with the virtual one, and a body that returns
// meanwhile has its outcome land at the virtual time it took. Before each
// step synctest.Wait lets every body go as far as it can at that instant,
// so such runs too are replayable from their seed, as long as the bodies
// are (no I/O leaving the bubble).
//
// # Speculative answers
//
// As in a session, the model is asked as soon as the caller's words are in,
// while the silence that ends their turn still runs (runtime.WithSpeculation):
// the scripted edges hold the speculative answer's audio, play it from the
// moment the turn ends on the same words, or discard it when the caller goes
// on, and its scripted response then goes to the next request, so a file's
// `model` list stays one entry per answer the caller can hear. A tool
// declared `speculative: true` (tools.WithSpeculative) is a read that may
// start on a speculative answer. `speculate: false` turns speculation off
// for a file timed for answers asked at the end of the turn; Options.Speculate
// (holdline simulate --speculate=true|false) sets it for every file, and a
// file made to run otherwise than it says is checked against the invariants
// only, its expectations being written for its own timing. Result.Speculation
// counts the spoken turns, the speculative answers used and discarded, and the
// tool bodies started for discarded ones.
//
// # Names and the schema
//
// Every name a file uses is checked when it loads: keys, fault kinds,
// effects, interrupt policies, and in expect.events the event kind
// (events.Kinds), the state (a call's terminal state for tool_terminal,
// tool_late_outcome and tool_committed; none or present for echo_path;
// other kinds carry none) and the reason, for the kinds whose reasons are
// a closed set (the core's and the arbiter's words; session_ended and
// handoff, whose reasons are open, are not checked), and the tool, which
// must be one the agent has or the model calls. A wrong name is a
// *ParseError wrapping ErrUnknownName, with the line and, when one is
// close, the nearest valid name. JSONSchema (holdline simulate --schema)
// is the format as a JSON Schema, made from the same tables, for editors.
//
// # Reports
//
// Result.Report writes a file's outcome for a person: the failing runs
// with their violations, the event timeline of the first, and the command
// that replays it (Result.Replay; holdline simulate by default, go test for
// simtest).
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
//   - never silent: an answer no one cut into is heard to its last word, or
//     the context holds the note naming the words the caller missed;
//   - an interrupted turn's audio is flushed in the same step;
//   - max_stall: a finished user turn, injected input, or a result whose
//     turn is complete and whose floor is free is carried by a model request
//     within expect.max_stall (a speculative request carries the turn from
//     the moment it is used);
//   - no tool body starts for a turn that was never committed (a discarded
//     speculative answer), except reads declared speculative.
//
// # Defaults
//
// Keys absent from a file take these values (scenario.go is the reference):
//
//	seed                     1
//	timeout                  30s (virtual; work still in flight then is a hang)
//	speculate                true: speculative answers, as a session gives
//	agent.instructions       "You are a helpful voice agent."
//	agent.tools[].effect     mutation
//	agent.tools[].on_interrupt  by effect: read → complete, mutation → defer
//	agent.tools[].duration   100ms
//	agent.tools[].timeout    10s
//	agent.tools[].result     {"ok":true}
//	agent.tools[].error      "" (succeeds)
//	agent.tools[].ignores_cancel, hang  false
//	agent.tools[].dedupe     true (at most once for mutations)
//	agent.tools[].speculative  false (true: a read that may start on a
//	                         speculative answer)
//	tools.NAME.duration, result, error, hang, ignores_cancel
//	                         as agent.tools[]; a Go tool without a script is
//	                         never called (or runs its body: WithRealTools)
//	model[].ttfb             300ms; the whole response arrives then
//	model[].text             "" ; tool_calls: none; args: {}
//	requests beyond model[]  an empty reply (no words, no calls) after 300ms
//	tts.ttfb                 200ms per sentence, sentences synthesised in turn
//	tts.words_per_second     2.5
//	tts.backup               false (true: a backup voice no fault reaches)
//	stt.latency              150ms after the speech ends
//	vad.onset                100ms (shorter speech is never detected; also the
//	                         speech over the agent that makes it pause)
//	vad.endpointing          500ms of silence ends the caller's turn (the
//	                         detector's 240ms, or half when shorter, then the
//	                         core's endpointing timer)
//	vad.endpointing_min, _max  not set; set together, the caller's words choose
//	                         the silence: min after a complete request (a
//	                         sentence's end), max after words that leave it
//	                         open ("and", "um"), endpointing otherwise
//	line.echo                none: a clean line
//	line.echo.delay          120ms
//	line.echo.gain_db        -6 (only echo louder than -3 dB reaches the detector)
//	line.echo.learn          1s of the agent's audio before the canceller removes it
//	line.echo_free           false
//	user[].noise             a label; the sound lasts 300ms
//	user[].level_db          0: as loud as the agent on the line
//	user[].duration          words / 3 per second (a noise: 300ms)
//	faults[].duration        0: one failure (tts_error only; longer: an outage)
//	expect.max_stall         100ms
//	expect.every_call_answered, context_matches_playout  true (cannot be turned off)
//	expect.events[].count    at least one; within: no limit; after: session start
//	sweep                    none; with --sweep N the values are evenly spaced
//	                         from `from` to `to`, and run i uses seed+i
//
// # The caller's sound
//
// A say, backchannel or noise is sound from `at` for its duration. The
// caller-audio edge scores it per 20ms frame as the default detector
// would (0.9 for any frame it fills at least half of: the energy detector
// hears a cough as loudly as a word) and hands the score, with what the
// agent's output was doing (audible, a turn under way, silent), to
// engine.InputJudge; spoken words reach the judge as the recogniser's
// final transcript stt.latency after the sound ends. So speech over the
// agent pauses it, and is confirmed (barge-in) or ruled out (resume) by the
// arbiter's own rules: a backchannel resumes the agent from the same
// sample, a cough that stops resumes it, the agent's own words in a
// transcript are echo. A line echo louder than -3 dB scores like speech
// while the agent's voice comes back, until the canceller has heard `learn`
// of it. A caller quieter than the agent (level_db) meets the canceller's
// level rule as media/aec applies it: until 800ms of the agent have played
// a line echoing 6 dB down is assumed (a caller 3 dB or more below the
// agent is taken for echo while the agent is audible); then a clean line
// has no rule, and an echoing one takes for echo only what is within 9 dB
// of its measured gain, at most 3 dB below the agent (15 dB below it once
// learnt). Frames are judged only while something can change; in between,
// one frame of silence as long as the gap keeps the arbiter's audio time
// the call's.
//
// A transport_drop cuts the output at once; the caller's next action brings
// the line back. A tts_error fails one synthesis (the one in flight at its
// time, or else the next); the phrase is tried again as engine.Synthesis
// says, the very rule a live generation follows.
package sim
