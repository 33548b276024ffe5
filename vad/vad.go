package vad

import (
	"errors"

	"github.com/holdline/holdline/media"
)

// Detector estimates whether a frame holds speech. Detectors keep state
// across frames (noise estimates, recurrent models), so frames must be
// given in order, one stream per Detector.
type Detector interface {
	// Detect returns the probability, from 0 to 1, that f holds speech.
	// Frames of 10 to 32 ms work best.
	Detect(f media.Frame) (float32, error)
}

// ErrEmptyFrame is returned for a frame without samples or sample rate.
var ErrEmptyFrame = errors.New("vad: frame has no samples or no sample rate")
