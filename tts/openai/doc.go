// Package openai synthesises speech with OpenAI's speech endpoint (POST
// /audio/speech, models gpt-4o-mini-tts, tts-1 and tts-1-hd).
//
// A [Synthesizer] asks for the "pcm" format, raw 16-bit little-endian mono
// at 24 kHz, and reads the body as it arrives: Recv hands out chunks of 20
// to 40 ms as soon as the bytes are in, so the first audio plays long
// before the whole answer has been sent. WithSampleRate resamples inside
// the stream; without it the chunks are at 24 kHz and the session's player
// resamples them.
//
// The endpoint gives no word timings, so the stream estimates them: after
// the last audio chunk comes one chunk with no audio whose Words spread
// the text over the audio in proportion to each word's length, the
// convention the runtime uses for synthesisers without timings (it would
// do the same estimate itself; giving it here keeps the synthesiser
// self-contained for other consumers).
//
// Rate limits (429), server errors (5xx) and broken connections before any
// audio are retried twice with a short backoff, honouring Retry-After when
// it is short; once audio has been delivered a failure ends the stream
// (the audio cannot be taken back). An error answer is returned by
// Synthesize as an [*APIError] carrying the API's message.
package openai
