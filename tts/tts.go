package tts

import (
	"context"
	"time"

	"github.com/holdline/holdline/media"
)

// Synthesizer turns text into audio.
type Synthesizer interface {
	// Synthesize starts speaking text. Cancelling ctx ends the stream: Recv
	// then returns an error wrapping ctx.Err().
	Synthesize(ctx context.Context, text string) (Stream, error)
}

// Stream yields the audio of one utterance. Recv returns io.EOF after the
// last chunk; an utterance may legitimately have no audio at all.
type Stream interface {
	Recv() (Chunk, error)
	Close() error
}

// Chunk is a piece of synthesised speech: audio, word timings, or both.
// Audio.Samples may be reused by the stream after the next Recv.
type Chunk struct {
	Audio media.Frame
	// Words are timings relative to the start of this utterance's audio.
	Words []WordTiming
}

// WordTiming places one spoken word in the utterance audio.
type WordTiming struct {
	Word  string        `json:"word"`
	Start time.Duration `json:"start"`
	End   time.Duration `json:"end"`
}
