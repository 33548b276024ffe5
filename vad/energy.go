package vad

import (
	"math"

	"github.com/holdline/holdline/media"
)

// Energy defaults.
const (
	DefaultThreshold = 12  // dB above the noise floor
	DefaultFloor     = -60 // dBFS
)

const (
	// floorRise is how fast, in dB per second, the floor follows a louder
	// background. It is slow so that speech, which always has pauses
	// where the floor can fall back, is not learnt as noise.
	floorRise = 1.0
	// slope is the width, in dB, of the soft step from level to
	// probability: 0.5 at the threshold, 0.95 about 6 dB above it.
	slope = 2.0
	// silenceDB stands in for the level of digital silence, -Inf.
	silenceDB = -120.0
)

// EnergyOption configures an [Energy] detector.
type EnergyOption func(*Energy)

// WithThreshold sets how far above the noise floor, in dB, a frame's level
// must be to count as speech with probability 0.5 (default 12).
func WithThreshold(dB float64) EnergyOption { return func(e *Energy) { e.threshold = dB } }

// WithFloor sets the lowest the noise floor may go, in dBFS (default -60),
// so that after digital silence faint line noise is not taken for speech.
func WithFloor(dBFS float64) EnergyOption { return func(e *Energy) { e.minFloor = dBFS } }

// Energy is a [Detector] that compares a frame's RMS level with an adaptive
// noise floor. The floor tracks the quietest recent level: it falls at once
// to a quieter frame and rises slowly, by 1 dB a second, towards louder
// ones. The first frame sets it, so streams should not start mid-word.
//
// Energy cannot tell speech from other sounds of the same level; it suits
// quiet lines, tests and the simulator.
type Energy struct {
	threshold float64
	minFloor  float64
	floor     float64
	started   bool
}

var _ Detector = (*Energy)(nil)

// NewEnergy returns an energy detector configured by opts.
func NewEnergy(opts ...EnergyOption) *Energy {
	e := &Energy{threshold: DefaultThreshold, minFloor: DefaultFloor}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Detect implements [Detector].
func (e *Energy) Detect(f media.Frame) (float32, error) {
	if len(f.Samples) == 0 || f.SampleRate <= 0 {
		return 0, ErrEmptyFrame
	}
	level := Level(f.Samples)
	if !e.started {
		e.started = true
		e.floor = level
	}
	if level < e.floor {
		e.floor = level
	} else {
		secs := float64(len(f.Samples)) / float64(f.SampleRate)
		e.floor += min(level-e.floor, floorRise*secs)
	}
	e.floor = max(e.floor, e.minFloor)
	x := (level - e.floor - e.threshold) / slope
	return float32(1 / (1 + math.Exp(-x))), nil
}

// Floor returns the current noise floor estimate in dBFS.
func (e *Energy) Floor() float64 { return e.floor }

// Level returns the RMS level of samples in dBFS, where a full-scale square
// wave is 0 dBFS; silence gives -120.
func Level(samples []int16) float64 {
	var sum int64
	for _, s := range samples {
		sum += int64(s) * int64(s)
	}
	if sum == 0 {
		return silenceDB
	}
	ms := float64(sum) / float64(len(samples)) / (32768 * 32768)
	return max(10*math.Log10(ms), silenceDB)
}
