// Package espeak is a tts.Synthesizer on espeak-ng, the formant speech
// synthesiser: robotic, but local, free, in some hundred languages, and
// fast enough that its first audio comes some 10 ms after a sentence is
// handed to it (BenchmarkFirstAudio: 7–10 ms to the first chunk of a short
// or a two-clause sentence on the 2-core development machine, the process
// start included).
//
// Each Synthesize runs one espeak-ng process (Debian package espeak-ng)
// with the text on its standard input and reads the WAV it writes to
// standard output as it comes: the header first, whose sizes espeak-ng
// leaves as placeholders because it cannot seek back on a pipe, then the
// samples, handed out in chunks of 20 ms. The session already cuts the
// model's text into sentences, so a process per call costs little and a
// cancelled or interrupted sentence costs nothing more than a killed
// process. Cancelling the context, or closing the stream, kills espeak-ng
// and reaps it; a stream must be closed.
//
// espeak-ng's program does not say where the words fall in its audio, so
// the timings are estimated once the audio is complete, and delivered in a
// last chunk without audio: over the speech actually produced (its leading
// and trailing silence left out), each clause of the text over its own
// stretch of speech when espeak-ng's pauses line up with the text's
// punctuation, and each word in proportion to its syllables. That is
// closer than the session's own estimate, which spreads the words over the
// whole audio, silence included.
//
// Audio comes at espeak-ng's own 22.05 kHz unless WithSampleRate asks for
// one of the session's rates.
package espeak
