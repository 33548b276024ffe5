package tts

import (
	"errors"
	"io"
)

// ReadAll reads s to its end and closes it: the utterance's samples, one
// chunk after another. It returns what was read before the first error
// other than io.EOF, with that error.
func ReadAll(s Stream) ([]int16, error) {
	defer s.Close()
	var out []int16
	for {
		ch, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ch.Audio.Samples...)
	}
}
