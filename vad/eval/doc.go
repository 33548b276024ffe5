// Package eval measures barge-in decisions: it plays scenes (the agent's
// voice echoed back at some delay and gain, with or without a caller talking
// over it, with or without noise) through each pipeline mode, from plain
// voice activity to the whole arbiter, and reports false barge-ins, misses,
// detection latency and backchannel interruptions side by side.
//
// The echo is simulated in a closed loop: the microphone hears the echo of
// what the output actually played, so when the arbiter pauses the output
// the echo stops too, and resumes from the same sample. A recording of the
// echo could not show that.
package eval
