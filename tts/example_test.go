package tts_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/tts"
)

// beeps is a hand-written synthesiser, the shape of one for a voice
// Holdline does not ship: it "says" each word as a tone, a letter lasting
// letterTime, with a pause after it, and tells where each word falls.
// Word timings are what let a session know which words a caller heard
// before cutting in.
type beeps struct{ rate int }

const (
	letterTime = 50 * time.Millisecond
	pause      = 100 * time.Millisecond
)

func (v beeps) Synthesize(ctx context.Context, text string) (tts.Stream, error) {
	if err := media.CheckRate(v.rate); err != nil {
		return nil, err
	}
	return &beepStream{ctx: ctx, rate: v.rate, words: strings.Fields(text)}, nil
}

// beepStream yields one chunk a word: its audio and its timing.
type beepStream struct {
	ctx   context.Context
	rate  int
	words []string
	at    time.Duration // where the next word starts in the utterance
	buf   []int16
}

func (s *beepStream) Recv() (tts.Chunk, error) {
	if err := s.ctx.Err(); err != nil {
		return tts.Chunk{}, fmt.Errorf("beeps: %w", err)
	}
	if len(s.words) == 0 {
		return tts.Chunk{}, io.EOF
	}
	word := s.words[0]
	s.words = s.words[1:]
	sound := time.Duration(len(word)) * letterTime
	tone, n := media.SamplesFor(s.rate, sound), media.SamplesFor(s.rate, sound+pause)
	// The buffer is reused by the next Recv, as the contract allows: the
	// session copies what it keeps.
	if cap(s.buf) < n {
		s.buf = make([]int16, n)
	}
	s.buf = s.buf[:n]
	for i := range s.buf {
		s.buf[i] = 0
		if i < tone {
			s.buf[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/float64(s.rate)))
		}
	}
	timing := tts.WordTiming{Word: word, Start: s.at, End: s.at + sound}
	s.at += sound + pause
	return tts.Chunk{Audio: media.Frame{Samples: s.buf, SampleRate: s.rate}, Words: []tts.WordTiming{timing}}, nil
}

func (s *beepStream) Close() error {
	s.words = nil
	return nil
}

// A Synthesizer written by hand, read as a session reads one: chunks until
// io.EOF, each with audio, word timings relative to the start of the
// utterance, or both.
func ExampleSynthesizer() {
	var voice tts.Synthesizer = beeps{rate: media.Rate16k}
	stream, err := voice.Synthesize(context.Background(), "Your table is booked.")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stream.Close()
	var audio time.Duration
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		audio += chunk.Audio.Duration()
		for _, w := range chunk.Words {
			fmt.Printf("%-8s %v to %v\n", w.Word, w.Start, w.End)
		}
	}
	fmt.Println("audio:", audio)

	// Cancelling the context ends the stream.
	ctx, cancel := context.WithCancel(context.Background())
	stream, _ = voice.Synthesize(ctx, "Goodbye.")
	cancel()
	_, err = stream.Recv()
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// Your     0s to 200ms
	// table    300ms to 550ms
	// is       650ms to 750ms
	// booked.  850ms to 1.2s
	// audio: 1.3s
	// true
}
