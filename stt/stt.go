package stt

import (
	"context"

	"github.com/holdline/holdline/media"
)

// Recognizer opens recognition streams.
type Recognizer interface {
	// Stream starts recognising audio at sampleRate. Cancelling ctx ends the
	// stream.
	Stream(ctx context.Context, sampleRate int) (Stream, error)
}

// Stream takes audio and yields transcripts. Write and Recv may be called
// from different goroutines. Recv returns io.EOF once the stream is closed
// and every transcript has been delivered.
type Stream interface {
	// Write feeds audio. The frame's samples are only read during the call.
	Write(f media.Frame) error
	// EndOfSpeech tells the recogniser the speaker stopped, so it can
	// finalise the pending utterance now instead of waiting for more audio.
	EndOfSpeech() error
	Recv() (Transcript, error)
	Close() error
}

// Transcript is a recognition result. Partials may be revised; a final is
// the recogniser's settled text for one utterance.
type Transcript struct {
	Text  string
	Final bool
	// Confidence is the recogniser's estimate, above 0 and at most 1, that
	// Text is what was said; 0 means the recogniser does not say. A model
	// may confirm words heard with low confidence before acting on them.
	Confidence float64
}

// SpeechStarter is implemented by streams that want to know where an
// utterance begins, such as recognisers that upload whole utterances: the
// session calls StartOfSpeech from the goroutine that calls Write, when its
// voice activity detector hears the caller start, a little after the speech
// itself began (keep some audio from before the call).
type SpeechStarter interface {
	StartOfSpeech() error
}
