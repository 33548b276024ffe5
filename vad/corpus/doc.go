// Package corpus generates, at test time, the audio on which barge-in
// decisions are measured, and transcribes it.
//
// # The problem it measures
//
// A voice agent plays speech to a caller; the phone line sends part of it
// back, delayed and attenuated, in the caller's audio. That echo must not
// be taken for the caller interrupting (a barge-in), real barge-ins must be
// detected fast, and backchannels ("uh-huh", "yeah") must not be treated as
// interruptions. Each [Clip] holds the two signals an echo canceller and a
// barge-in detector see: Far, what the agent played, and Near, what came
// back from the caller's side.
//
// # What is in it
//
// [Generate] returns three kinds of clip, all at one sample rate, 8 kHz
// (band-limited to the telephone band, 300-3400 Hz) or 16 kHz:
//
//   - [Echo]: the agent speaks a sentence (2.7-3.6 s) with 300 ms of silence
//     before and 600 ms after; Near is its echo and nothing else. Every
//     combination of delay (20, 60, 120, 250 ms), echo gain (-3, -6, -12,
//     -20 dB) and background noise (off, on) is there, with
//     Options.EchoSentences sentences each (4 by default: 128 clips), plus
//     twice as many on a line without echo (NoEcho, noise alone: 8 clips).
//     Any barge-in detected here is a false alarm.
//   - [BargeIn]: the same, plus the caller saying one of twelve
//     interruptions ("Wait, actually make it Friday instead.", 1.5-2.5 s),
//     starting anywhere from 0.4 s after the agent starts to 0.5 s before
//     it ends. 144 clips by default, balanced over the interruptions; a
//     third on a line without echo (NoEcho: a digital trunk), the rest
//     over the delay×gain conditions; on each kind of line half the
//     callers at the agent's level and half 6 dB quieter (UserLevelDB);
//     half of them with noise.
//   - [Backchannel]: the same with "uh-huh", "yeah", "okay", "mm-hmm" or
//     "right" (0.4-0.8 s) instead of an interruption, in three voices
//     (Voice). 48 clips by default.
//
// In BargeIn and Backchannel clips Far and Near run on until 600 ms after
// the last speech, the agent's or the caller's: Far is what the agent would
// have played had it not been interrupted. UserOnset and UserEnd are
// measured on the caller's audio before mixing (first and last sample at or
// above -45 dBFS), not taken from where it was placed; AgentSpan is
// measured the same way on Far.
//
// # How it is made
//
// Speech is synthesised with espeak-ng in two voices chosen to be told
// apart easily: the agent a female variant with raised pitch (median
// about 225 Hz), the caller a male variant with lowered pitch (about
// 85 Hz); backchannels come in the caller's voice slowed down and two
// more (a low female variant and another male one, both slow). sox converts it to the corpus rate (and, at 8 kHz, to the
// telephone band). Each distinct utterance is synthesised once and cached
// in Options.CacheDir, keyed by voice, text, rate and tool versions, so
// reruns only read WAV files. Everything after that is done in Go.
//
// The echo is Far through a short room response (the direct path plus
// three to five reflections 10-30 ms later, each at most 0.35 of it, so
// the direct path carries at least two thirds of the energy), delayed by
// the clip's Delay and scaled so that its energy is GainDB relative to
// Far's. The noise is pink-ish, like a fan or a street, drifting slowly by
// a couple of dB, generated in Go.
//
// # Levels
//
// Levels are in dBFS relative to the RMS of a full-scale square wave (a
// full-scale sine is at -3 dBFS). Every utterance, agent's or caller's,
// sentence or backchannel, is normalised to -20 dBFS active-speech level:
// the RMS over 10 ms frames within 35 dB of the loudest, a simplified
// ITU-T P.56 measure that does not depend on pauses. So in Near the caller
// is at -20 dBFS and the echo at -20+GainDB: with -3 dB of echo the caller
// is only 3 dB louder than the agent's echo, with -20 dB 20 dB louder. A
// quieter caller (UserLevelDB -6) is scaled down after that, to -26 dBFS.
// Background noise, when on, is at -50 dBFS RMS (30 dB below speech);
// every Near also carries triangular dither at -70 dBFS, so it is never
// digital silence. Mixing saturates at the int16 limits rather than
// wrapping.
//
// # Determinism
//
// All random choices (sentences, onsets, room responses, noise, dither)
// come from Options.Seed through per-clip streams keyed by clip name, so the
// same Options give byte-identical clips, on a first run or from the cache,
// and changing one clip count does not reshuffle the other kinds.
//
// # Transcription
//
// [Transcribe] runs pocketsphinx_batch over many inputs at once, with a
// grammar that allows any sequence of the words of the corpus
// ([Vocabulary]): with its general language model pocketsphinx makes little
// of synthetic speech. On the clean sentences at 16 kHz it finds about 90%
// of the agent's words and 80% of the caller's; at 8 kHz, which its
// wideband model was not trained on, about 55%.
//
// # Requirements
//
// Generate needs espeak-ng and sox, Transcribe pocketsphinx and its English
// model; without them they return errors wrapping [ErrTools] that name the
// Debian packages to install (apt-get install espeak-ng sox pocketsphinx
// pocketsphinx-en-us). The tests skip then, unless HOLDLINE_REQUIRE_MODELS=1.
package corpus
