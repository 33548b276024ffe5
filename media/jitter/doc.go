// Package jitter is the receive jitter buffer of a telephony (RTP) leg: it
// takes audio packets, already decoded to PCM16, in whatever order and with
// whatever delay the network delivered them, and hands the pipeline one frame
// per frame period, in timestamp order.
//
// A phone leg is lossy and jittery, but the pipeline behind it (the framer,
// the voice detector, the recogniser) wants a steady clock. The Buffer holds
// a fixed depth of audio so that late and reordered packets still make their
// slot, conceals a short loss by repeating the last frame with falling level
// rather than clicking into silence, and restarts its playout point on a
// talkspurt start (the RTP marker bit) or a timestamp jump, so the delay it
// adds does not drift over a long call. It allocates its storage once, in
// New, and nothing per packet or frame.
package jitter
