// Package vad detects voice activity in audio frames.
//
// Detection is split in two. A [Detector] gives the probability that one
// frame holds speech; [Energy], which needs no model and no setup, is the
// default, and a neural detector can replace it behind the same interface.
// A [Segmenter] turns the frame-by-frame probabilities into decisions that
// speech started or stopped, with hysteresis and minimum durations so that a
// cough does not start a turn and a breath does not end one.
//
// Both work frame by frame on the audio path and allocate nothing. Neither
// is safe for concurrent use: each audio stream gets its own.
package vad
