// Package pocketsphinx is a local stt.Recognizer on CMU pocketsphinx with a
// grammar built from an agent's example phrases: no network, no key, some
// 8% of a core per call, and accurate on what the agent's callers are
// expected to say.
//
// # Library and model
//
// libpocketsphinx and libsphinxbase (pocketsphinx 5prealpha, Debian 12's
// 0.8+5prealpha) are loaded at run time with dlopen, so building needs
// neither them nor their headers; the few functions used are declared
// here. New fails with an error wrapping ErrMissingLibrary or
// ErrMissingModel, naming the Debian packages to install (pocketsphinx
// pocketsphinx-en-us), where they are missing. Loading them needs cgo (a
// C compiler, Debian package gcc): built with CGO_ENABLED=0, New fails with
// an error wrapping ErrMissingLibrary. The model is the US English
// acoustic model at 16 kHz and the CMU pronouncing dictionary, at their
// Debian paths (DefaultModelDir, DefaultDictionary).
//
// # Grammar
//
// pocketsphinx's general English language model does badly here; a
// grammar does well. Grammar (or New with WithPhrases) turns example
// phrases into a JSGF grammar: each phrase normalised (Normalise: lower
// case, numbers and times spelled out, punctuation gone), its number words
// made a slot that takes a count or an hour (one to twelve, and any number
// a phrase has there), then perhaps minutes, and every word of the
// phrases in a free loop besides, so that a caller who says
// something else still comes out word by word. Every word must be in the
// dictionary: New fails with ErrUnknownWords, naming them, otherwise.
// WithGrammar takes a grammar of one's own instead. The grammar and the
// dictionary entries of its words are written to a temporary directory
// the Recognizer owns, removed by Close.
//
// # Streams
//
// Each Stream has a goroutine of its own: Write does no decoding, it
// copies the frame into a bounded queue (WithQueue) and returns; only if
// the goroutine has fallen so far behind that the queue stays full does
// it wait, for 100 ms by default, and then drop the frame with
// ErrOverrun. The goroutine resamples to 16 kHz, adds a noise floor
// (WithNoiseFloor), and decodes the open utterance, from StartOfSpeech
// (with the pre-roll of the last 300 ms before it) to EndOfSpeech, which
// yields the final transcript. It decodes as the audio comes, on a decoder
// the Recognizer's streams share (see Recognizer), so that a short sound's
// words are there as soon as it ends; an utterance of 1.5 s or more is
// decoded again, whole, at its end, with its own cepstral mean rather than
// one carried over from other audio or another call, and that is its
// final. When no decoder is spare, the utterance is kept and decoded whole
// at its end. Partial transcripts are optional (WithPartials).
// Sessions whose voice activity detector never calls StartOfSpeech still
// work: until the first StartOfSpeech, an utterance opens at the first
// Write and at the first Write after each EndOfSpeech, and pocketsphinx's
// own silence removal keeps the pauses out of the search. The first
// StartOfSpeech drops the utterance the first Write opened (on a call, the
// line through the greeting, echo and all) and opens one at its pre-roll.
//
// # Accuracy
//
// On the booking agent's phrases (examples/booking.Phrases) spoken by
// espeak-ng in vad/corpus's caller voice (en-us+edward, pitch 35, 175
// words a minute), with 300 ms of silence around each, word accuracy is
// 100% at 16 kHz and 97.7% on telephone audio (8 kHz, upsampled here);
// sentences of the same words that are not in the list come out at 75%
// and 70% (TestBookingPhrasesWordAccuracy, TestUnlistedPhrases). Synthetic
// speech is a poor stand-in for callers, and the voice matters: at 16 kHz
// espeak-ng's default voice and its f5 and klatt variants score 99–100%
// too, but at 8 kHz 84%, 83% and 94%, and en-gb 92% and 66%. Telephone
// audio is the weak spot: the model was trained on 16 kHz speech and finds
// nothing above 4 kHz in it, where "six" and "seven" differ from "eight"
// and "eleven"; the errors that remain at 8 kHz are such numbers. An 8 kHz
// acoustic model would help.
//
// Decoding a booking phrase whole takes 105 ms at 16 kHz and 125 ms at
// 8 kHz (BenchmarkDecode's final-ms, 2-core development machine), which
// its final waits for after EndOfSpeech; a short sound's final comes as
// soon as the decoder has caught up. Making a decoder costs some 15 ms
// (BenchmarkNewDecoder).
package pocketsphinx
