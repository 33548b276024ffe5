// Package openai recognises speech with OpenAI's transcription endpoint
// (POST /audio/transcriptions, models gpt-4o-mini-transcribe,
// gpt-4o-transcribe and whisper-1).
//
// The endpoint transcribes whole files, not streams, so a [Recognizer]'s
// streams cut the caller's audio into utterances and upload each one as a
// 16-bit mono WAV when it ends. The session's voice activity detector says
// where utterances start (StartOfSpeech, see [stt.SpeechStarter]) and end
// (EndOfSpeech). A stream keeps a short pre-roll of the audio before the
// start (300 ms by default), because detectors hear speech a little after
// it began and a clipped first syllable costs the first word. A session
// that never calls StartOfSpeech still works: each EndOfSpeech then sends
// everything since the previous one, up to the utterance limit.
//
// Uploads run concurrently, one goroutine per utterance owned by the
// stream, but transcripts come out of Recv in utterance order: a short
// second utterance never overtakes a long first one. Every transcript is
// final; there are no partials. Utterances shorter than 100 ms are not sent
// (the API rejects them) and empty transcripts are not delivered.
//
// Rate limits (429), server errors (5xx) and broken connections are retried
// twice with a short backoff, honouring Retry-After when it is short; each utterance has a
// deadline (15 s by default) covering its retries. A failed utterance fails
// the stream: Recv returns the error, an [*APIError] for an HTTP error, and
// goes on returning it.
package openai
