package vad

import (
	"fmt"
	"time"
)

// Transition is what a [Segmenter] decided on a frame.
type Transition int

// Transitions.
const (
	None    Transition = iota // nothing changed
	Started                   // speech started
	Stopped                   // speech stopped
)

func (t Transition) String() string {
	switch t {
	case None:
		return "none"
	case Started:
		return "started"
	case Stopped:
		return "stopped"
	}
	return fmt.Sprintf("Transition(%d)", int(t))
}

// SegmenterConfig tunes a [Segmenter]. Zero fields take the defaults.
type SegmenterConfig struct {
	// ActivationThreshold is the probability a frame needs to count
	// towards the start of speech (default 0.5).
	ActivationThreshold float32
	// DeactivationThreshold is the probability below which a frame counts
	// towards the end of speech once it started (default 0.35). The gap to
	// ActivationThreshold keeps a level hovering near one threshold from
	// flapping. It is capped at ActivationThreshold.
	DeactivationThreshold float32
	// MinSpeech is how long frames must stay at or above
	// ActivationThreshold, without a break, before speech has started
	// (default 100 ms), so that clicks and coughs are ignored.
	MinSpeech time.Duration
	// MinSilence is how long frames must stay below DeactivationThreshold
	// before speech has stopped (default 300 ms), so that pauses between
	// words do not end it.
	MinSilence time.Duration
}

// Segmenter defaults.
const (
	DefaultActivationThreshold   = 0.5
	DefaultDeactivationThreshold = 0.35
	DefaultMinSpeech             = 100 * time.Millisecond
	DefaultMinSilence            = 300 * time.Millisecond
)

// Segmenter turns per-frame speech probabilities into speech started and
// stopped decisions. Time is audio time: the sum of the frame durations
// pushed, from the first Push.
type Segmenter struct {
	cfg SegmenterConfig

	elapsed  time.Duration
	speaking bool
	run      time.Duration // length of the current run of speech or silence
	runStart time.Duration // when that run began
	started  time.Duration
	stopped  time.Duration
}

// NewSegmenter returns a segmenter in the not-speaking state.
func NewSegmenter(cfg SegmenterConfig) *Segmenter {
	if cfg.ActivationThreshold == 0 {
		cfg.ActivationThreshold = DefaultActivationThreshold
	}
	if cfg.DeactivationThreshold == 0 {
		cfg.DeactivationThreshold = DefaultDeactivationThreshold
	}
	cfg.DeactivationThreshold = min(cfg.DeactivationThreshold, cfg.ActivationThreshold)
	if cfg.MinSpeech == 0 {
		cfg.MinSpeech = DefaultMinSpeech
	}
	if cfg.MinSilence == 0 {
		cfg.MinSilence = DefaultMinSilence
	}
	return &Segmenter{cfg: cfg}
}

// Config returns the configuration in use, defaults filled in.
func (s *Segmenter) Config() SegmenterConfig { return s.cfg }

// Push adds a frame of duration d with speech probability prob and reports
// whether speech started or stopped with it. The decision comes MinSpeech
// or MinSilence after the fact; SpeechStartedAt and SpeechStoppedAt say
// when the fact was.
func (s *Segmenter) Push(prob float32, d time.Duration) Transition {
	at := s.elapsed
	s.elapsed += d
	if !s.speaking {
		if prob < s.cfg.ActivationThreshold {
			s.run = 0
			return None
		}
		if s.run == 0 {
			s.runStart = at
		}
		s.run += d
		if s.run < s.cfg.MinSpeech {
			return None
		}
		s.speaking, s.run, s.started = true, 0, s.runStart
		return Started
	}
	if prob >= s.cfg.DeactivationThreshold {
		s.run = 0
		return None
	}
	if s.run == 0 {
		s.runStart = at
	}
	s.run += d
	if s.run < s.cfg.MinSilence {
		return None
	}
	s.speaking, s.run, s.stopped = false, 0, s.runStart
	return Stopped
}

// Speaking reports whether speech has started and not stopped.
func (s *Segmenter) Speaking() bool { return s.speaking }

// SpeechStartedAt returns when the latest speech began: the start of the
// first frame of the run that led to Started.
func (s *Segmenter) SpeechStartedAt() time.Duration { return s.started }

// SpeechStoppedAt returns when the latest speech ended: the start of the
// first frame of the silence that led to Stopped.
func (s *Segmenter) SpeechStoppedAt() time.Duration { return s.stopped }

// Elapsed returns the audio time pushed so far.
func (s *Segmenter) Elapsed() time.Duration { return s.elapsed }

// Reset returns the segmenter to the not-speaking state at time zero.
func (s *Segmenter) Reset() { *s = Segmenter{cfg: s.cfg} }
