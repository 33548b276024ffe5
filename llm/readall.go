package llm

import (
	"errors"
	"io"
	"time"
)

// Answer is a whole response, read to its end: what a test of a model
// looks at.
type Answer struct {
	// Text is the words the model wrote, its chunks joined.
	Text string
	// Transcript is the text of the model's own audio (speech-to-speech
	// models), and Audio how long that audio plays.
	Transcript string
	Audio      time.Duration
	// Calls are its tool calls, their deltas put together.
	Calls []ToolCall
}

// ReadAll reads s to its end and closes it. It returns what was read
// before the first error other than io.EOF, with that error.
func ReadAll(s Stream) (Answer, error) {
	defer s.Close()
	var (
		a     Answer
		calls CallAccumulator
	)
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			a.Calls = calls.Calls()
			return a, err
		}
		a.Text += c.Text
		a.Transcript += c.Transcript
		a.Audio += c.Audio.Duration()
		if c.ToolCall != nil {
			calls.Add(*c.ToolCall)
		}
	}
	a.Calls = calls.Calls()
	return a, nil
}
