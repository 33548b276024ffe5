// Package aec removes the agent's own voice from the caller's audio: an
// acoustic echo canceller for the near end (the caller's microphone
// stream) given the far end (what the agent played to the caller).
//
// On a phone call the agent's speech comes back to us in the caller's
// audio, through the line hybrid or a speakerphone, some 20 to 250 ms or
// more later and 3 to 20 dB quieter. Left in, the voice activity detector
// hears the agent as the caller and the agent interrupts itself. A
// [Canceller] subtracts that echo before the audio reaches the VAD.
//
// The adaptive filter is libspeexdsp's echo canceller (MDF), with its
// preprocessor suppressing the residual echo; the library is loaded at run
// time with dlopen (Debian package libspeexdsp1), so building needs neither
// it nor its headers, and [New] returns an error wrapping [ErrUnavailable]
// where it is missing. Loading it needs cgo (a C compiler, Debian package
// gcc): built with CGO_ENABLED=0, New returns an error wrapping
// ErrUnavailable too. The bulk delay between the two streams is estimated
// here, by cross-correlating both at 2 kHz, and taken out before the filter,
// so that the filter's tail (128 ms by default) only has to model the echo
// path itself.
//
// # The reference is the playout stream
//
// The far end given to [Canceller.Playback] must be exactly what was
// played, as the playout clock counts it: every sample, silence and
// underrun fill included, in order — not what the agent meant to say, nor
// text-to-speech output before it was queued. The canceller aligns the two
// streams by counting samples alone (near sample n against far sample n
// plus the count at the first [Canceller.Process], minus the estimated
// delay), so that scheduling jitter in either goroutine does not matter. A
// dropped, repeated or late-inserted far sample would shift every later
// one: the estimated delay would be wrong until the estimator noticed, and
// the adaptive filter would be modelling audio that was never played. With
// package media's Player, feed every frame it writes to its Sink, and run
// it WithIdleSilence so that the time nothing is said is counted too.
//
// [Canceller.FarActive] tells whether the agent may be audible in the
// frame just processed, for barge-in logic that wants to hold the VAD to a
// higher bar while echo is possible; [Canceller.Delay] tells the echo's
// delay once it is known.
//
// The frame path allocates nothing: every buffer is allocated by New. Its
// cost is speex's: on the 2-core development machine a 20 ms frame takes
// about 0.6–0.8% of a core at 16 kHz (half of it the residual echo
// suppressor) and 0.3–0.4% at 8 kHz; the delay search adds under 10 µs a
// frame on average.
package aec
