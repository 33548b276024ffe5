package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/vad"
)

// InputConfig sets how caller audio is judged.
type InputConfig struct {
	// Detector scores each frame (default: vad.NewEnergy()).
	Detector vad.Detector
	// Segmenter turns scores into speech start and stop (zero fields take
	// the vad package's defaults).
	Segmenter vad.SegmenterConfig
	// Rate is the caller audio rate the recogniser is opened at (default
	// 16 kHz).
	Rate int
}

// DefaultInputConfig is the input configuration used when none is given.
func DefaultInputConfig() InputConfig {
	return InputConfig{Rate: media.Rate16k}
}

// WithInput sets how caller audio is judged.
func WithInput(in InputConfig) Option {
	return func(c *config) error {
		if in.Rate == 0 {
			in.Rate = media.Rate16k
		}
		if err := media.CheckRate(in.Rate); err != nil {
			return fmt.Errorf("runtime: input: %w", err)
		}
		c.input = in
		return nil
	}
}

// audioInput is the caller-audio edge: voice activity and recognition. It
// runs on the goroutine that calls PushAudio, so the frame path needs no
// copies and no channel hops; only decisions reach the conductor.
type audioInput struct {
	s   *Session
	det vad.Detector
	seg *vad.Segmenter
	cfg InputConfig

	mu     sync.Mutex
	stream stt.Stream
}

func newAudioInput(s *Session, cfg InputConfig) (*audioInput, error) {
	det := cfg.Detector
	if det == nil {
		det = vad.NewEnergy()
	}
	return &audioInput{s: s, det: det, seg: vad.NewSegmenter(cfg.Segmenter), cfg: cfg}, nil
}

// start opens the recogniser, if the agent has one, and relays its
// transcripts to the conductor.
func (a *audioInput) start(ctx context.Context, g *errgroup.Group) error {
	rec := a.s.agent.STT
	if rec == nil {
		return nil
	}
	stream, err := rec.Stream(ctx, a.cfg.Rate)
	if err != nil {
		return fmt.Errorf("runtime: open speech recognition: %w", err)
	}
	a.mu.Lock()
	a.stream = stream
	a.mu.Unlock()
	g.Go(func() error {
		defer stream.Close()
		for {
			tr, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) && ctx.Err() == nil {
					a.s.post(providerFailure{provider: "stt", err: err})
				}
				return nil
			}
			a.s.post(UserTranscript{Text: tr.Text, Final: tr.Final})
		}
	})
	return nil
}

func (a *audioInput) push(ctx context.Context, f media.Frame) error {
	prob, err := a.det.Detect(f)
	if err != nil {
		return fmt.Errorf("runtime: voice activity: %w", err)
	}
	a.mu.Lock()
	stream := a.stream
	a.mu.Unlock()
	if stream != nil {
		if err := stream.Write(f); err != nil {
			return fmt.Errorf("runtime: speech recognition: %w", err)
		}
	}
	switch a.seg.Push(prob, f.Duration()) {
	case vad.Started:
		return a.s.send(ctx, UserSpeechStarted{})
	case vad.Stopped:
		if stream != nil {
			if err := stream.EndOfSpeech(); err != nil {
				return fmt.Errorf("runtime: speech recognition: %w", err)
			}
		}
		return a.s.send(ctx, UserSpeechStopped{})
	}
	return nil
}
