// Package cli is the holdline command line for your own agents. A main of
// a few lines gets every command of holdline for the agents it names:
//
//	func main() {
//		cli.Main(map[string]runtime.AgentFunc{"pizza": pizza.New})
//	}
//
//	go run . console                 # type as the caller; the agent answers
//	go run . serve --sip udp:127.0.0.1:5060   # browsers and phones
//	go run . simulate scenarios/ --sweep 200
//
// console talks to an agent in the terminal: type as the caller; the agent's
// reply streams at speaking pace, and a line entered while it speaks barges
// in. With standard input not a terminal it reads one line per turn, waits
// for each turn to settle and prints one line per event (user:, agent:,
// tool:, and error: or failover: when a provider fails), so scripts can
// drive it. --audio-in speaks WAV files as the caller, through the
// recogniser; --audio-out records the agent.
//
// serve answers WebRTC offers from browsers (POST /v1/sessions) and serves
// the reference web client at /, events as SSE (and as a live timeline at
// /sessions/{id}) and Prometheus metrics; with
// --sip it answers phone calls too, on the same host. Without
// HOLDLINE_TOKEN it listens on 127.0.0.1 only. Sessions are checkpointed to
// a store (a file by default, Redis with --store) so that a call outlives
// its worker.
//
// livekit runs the agent as a LiveKit agent worker (package livekit): a
// LiveKit server dispatches rooms to it, by name (--agent-name) or to
// every new room, and each room is one call; with a shared store the
// workers dispatch again the rooms of a worker that died, and SIGTERM
// drains.
//
// call places a phone call and runs the agent on it. talk runs the agent on
// this computer's microphone and speaker, with echo cancellation so that
// talking over it interrupts it. simulate runs scenario files in virtual
// time, and a scenario may name one of the agents (agent: pizza) to test
// the Go agent itself; it exits non-zero when any run breaks an expectation
// or an invariant. bargein-eval measures barge-in decisions on an echo
// corpus. fake-openai serves an OpenAI-compatible API answered by an
// agent's own model. inspect writes a call's timeline as one self-contained
// HTML page, from the events file console --events wrote or from a live
// session's event stream on serve (whose page /sessions/{id} draws the
// same timeline live).
//
// bench latency measures voice-to-voice latency: it serves the agent in
// process as serve --llm openai --stt openai --tts openai would, against
// an openaitest server with the provider latencies given (--ttft,
// --token-interval, --speech-first-audio, --transcribe), the agent's own
// model answering; a WebRTC caller (webrtc/rtctest) on 127.0.0.1 speaks
// --turns turns in espeak-ng's voice, each once the agent has finished the
// last, and the table (or --json) gives p50, p95 and max from the end of
// the caller's speech to the agent's first audio heard, each stage on the
// way (from the session's events, the fake provider's records and the
// caller), the floor the providers and the endpointing set, and
// Holdline's share beyond it.
//
// # Providers
//
// What an agent's Go code sets (Model, STT, TTS and their backups) is what
// it runs on. A flag naming an engine for a role (--llm openai, --stt
// pocketsphinx, --tts espeak, --llm-backup, ...) replaces the agent's own
// for that role, on the agent and every peer it may hand the call to. The
// roles both leave empty go to OpenAI when OPENAI_API_KEY is set for
// OpenAI's own API, else to this machine's engines: espeak-ng speaks, and
// pocketsphinx listens for the agent's Phrases. Every command prints which
// engine runs each role, and which of them are paid cloud services, before
// it starts.
//
// Every command builds one agent before it takes a call, so a provider
// that cannot be made (a recogniser missing a word, a missing key, a
// missing system library) fails at start-up, with the reason.
package cli
