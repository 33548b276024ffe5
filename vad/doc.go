// Package vad detects voice activity in audio frames.
//
// Detection is split in two. A [Detector] gives the probability that one
// frame holds speech; [Energy], which needs no model and no setup, is the
// default, and a neural detector can replace it behind the same interface.
// A [Segmenter] turns the frame-by-frame probabilities into decisions that
// speech started or stopped, with hysteresis and minimum durations so that a
// cough does not start a turn and a breath does not end one.
//
// An [Arbiter] decides barge-in while the agent speaks: it suspects, has
// the output paused, and confirms or resumes, from the probabilities, what
// the agent's output is doing ([Agent]) and the recogniser's transcripts.
//
// Energy is the default because it measured as well as Silero (vad/silero)
// on the barge-in corpus in the middle of a call, and faster at 8 kHz, at
// half the CPU; see the README's barge-in section and `holdline
// bargein-eval`.
//
// All of them work frame by frame on the audio path and allocate nothing.
// None is safe for concurrent use: each audio stream gets its own.
package vad
