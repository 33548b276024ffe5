// Package openaitest runs an in-process server that speaks OpenAI's wire
// protocol, for testing code that talks to OpenAI or a compatible server
// with no network, no key and no bill: Holdline's own clients (llm/openai,
// stt/openai, tts/openai, llm/realtime) or any other.
//
// The server listens on a loopback port and serves
//
//	POST /v1/chat/completions     chat completions, streamed (server-sent events) or not, with tools
//	POST /v1/audio/transcriptions a WAV upload in, its transcript out
//	POST /v1/audio/speech         text in, 24 kHz PCM or WAV out (a tone as long as the text)
//	GET  /v1/realtime             the Realtime API over a websocket
//
// Its answers come from a brain, any [llm.Model]: a scripted.LLM for a
// test that says exactly what the model answers, or an agent's demo model
// (examples/booking) for a whole conversation; nil will do for a test of
// the transcription and speech endpoints alone. Every request is recorded
// for the test to inspect: [Server.Requests], [Server.ChatRequests],
// [Server.Transcriptions], [Server.Speeches], [Server.RealtimeEvents] and
// [Server.RealtimeConversation].
//
// # Use in a test
//
//	srv := openaitest.New(scripted.NewLLM(scripted.Response{Text: "Hello."}))
//	defer srv.Close()
//	model, err := openai.New(openai.WithBaseURL(srv.URL()), openai.WithAPIKey(openaitest.APIKey))
//	// ... run the code under test with model ...
//	if got := srv.ChatRequests(); len(got) != 1 { ... }
//
// [Server.URL] ends in /v1, as OPENAI_BASE_URL does, so a program that
// reads that variable can be pointed at the server too ("holdline
// fake-openai" serves one on a port of its own). A request without the
// key ([APIKey], or [WithAPIKey]'s) gets OpenAI's 401.
//
// # Latency
//
// [WithLatency] (or [Server.SetLatency]) makes every request take as long
// as a provider's on an ordinary day, for measuring what the code under
// test adds to it ("holdline bench latency" does, for a whole voice
// agent): a chat completion's first token ChatFirstToken after the request
// and a token every ChatTokenInterval after it (the text cut into words,
// [ChatTokens]; tool-call arguments into pieces of [ChatArgsTokenBytes]),
// the speech endpoint's first audio SpeechFirstAudio after the request,
// and the transcription's answer Transcription after the upload. Each
// record says when: [ChatRequest] Received and FirstToken (and the Answer
// sent), [Speech] Received and FirstAudio, [Transcription] Received and
// Answered. A brain that paces itself is not hurried: give the server a
// scripted.LLM's Unpaced model so that only the server sets the pace.
//
// # Faults
//
// The server behaves until told otherwise, and then misbehaves the way real
// providers do on a bad day. Faults are queued, and taken in order, one
// per request (for the Realtime API, one per response); requests after the
// queue runs dry behave.
//
// Chat completions ([Server.QueueChatFault], [ChatFault]):
//   - an error status instead of an answer (429 with Retry-After, 500,
//     503, ...) in OpenAI's error body: Status, RetryAfter, Message, Type,
//     Code;
//   - a provider slow to accept the request (HeaderDelay), or slow to its
//     first token on an open stream (FirstTokenDelay);
//   - tool-call arguments split mid-JSON into fragments of a few bytes
//     (ArgsFragment);
//   - tool-call indexes that start at 1 (IndexBase) or are missing
//     (OmitIndex);
//   - a stream that fails after FailAfter chunks: with an error event, as
//     OpenAI sends when a generation fails after the headers
//     ([ChatFailEvent]), or by cutting the connection ([ChatFailDrop]).
//
// Audio endpoints ([Server.QueueTranscriptionFault],
// [Server.QueueSpeechFault], [AudioFault]):
//   - a signal that the request has arrived, so a test need not sleep
//     (Arrived);
//   - a delay, or a hold until the test lets the answer go, before the
//     first byte or, for speech, part-way through the audio (Delay, Hold,
//     HoldAfter);
//   - an error status with Retry-After (Status, Message, RetryAfter);
//   - a connection cut before the answer or part-way through the audio
//     (Abort, AbortAfter).
//
// The speech endpoint's pacing is set apart ([Server.SetSpeechPace]):
// writes of an odd size split samples across them, as TCP segments do,
// and the audio can come at real time or any multiple of it.
//
// Realtime ([Server.QueueRealtimeFault], [RealtimeFault]):
//   - response.created held back, during which a response.cancel is
//     ignored with an error, as the real server does (CreatedDelay);
//   - a slow first output (FirstDeltaDelay);
//   - a response cancelled after its function-call arguments were
//     streamed, as when the server's detector hears the caller
//     (CancelAfterArguments);
//   - an error event after the first output, and the response failed
//     (FailMidResponse).
//
// [Server.RealtimeViolations] lists the protocol rules a Realtime client
// broke: a second response.create while one is in flight, a response asked
// for while a function call has no output, two outputs for one call, a
// cancel without the response id.
//
// [WithChatOnly] serves chat completions alone, as many OpenAI-compatible
// servers do (vLLM, Ollama, llama.cpp's server): the audio and Realtime
// paths answer 404, for testing a client's fallback.
package openaitest
