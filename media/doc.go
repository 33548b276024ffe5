// Package media holds the audio primitives every other stage shares: the
// Frame (PCM16 mono with its sample rate carried), WAV reading and writing,
// resampling among the telephony and wideband rates, and the Player, a paced
// output queue that knows which epoch each sample belongs to and reports what
// was actually played and when (the playout clock).
//
// The steady-state frame path allocates nothing: frames are values that point
// into buffers their producer owns, and the Player copies samples into a ring
// it allocated once.
package media
