package stt_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

// lines is a hand-written recogniser, the shape of one for a service
// Holdline does not ship. It stands in for the service with a script: each
// utterance is heard as the next line, a word for every wordTime of loud
// audio, and is final when the session says the speaker stopped.
type lines struct{ script []string }

const wordTime = 200 * time.Millisecond

func (r *lines) Stream(ctx context.Context, sampleRate int) (stt.Stream, error) {
	if err := media.CheckRate(sampleRate); err != nil {
		return nil, err
	}
	// Buffered so that Write never waits for the reader: the session
	// writes from its audio path, and a real recogniser's network would
	// not make it wait either.
	return &lineStream{ctx: ctx, script: r.script, out: make(chan stt.Transcript, 64)}, nil
}

type lineStream struct {
	ctx context.Context
	out chan stt.Transcript

	mu     sync.Mutex
	script []string
	heard  time.Duration // loud audio of the utterance so far
	words  int           // words of it sent as partials
	closed bool
}

// Write reads the frame's samples during the call only: the session reuses
// them.
func (s *lineStream) Write(f media.Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("lines: write after close")
	}
	if len(s.script) == 0 || !loud(f.Samples) {
		return nil
	}
	s.heard += f.Duration()
	words := strings.Fields(s.script[0])
	if n := min(int(s.heard/wordTime), len(words)); n > s.words {
		s.words = n
		return s.send(stt.Transcript{Text: strings.Join(words[:n], " ")})
	}
	return nil
}

// EndOfSpeech finalises the utterance at once, rather than after the
// trailing silence a recogniser would otherwise wait for.
func (s *lineStream) EndOfSpeech() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.heard == 0 {
		return nil
	}
	line := s.script[0]
	s.script, s.heard, s.words = s.script[1:], 0, 0
	return s.send(stt.Transcript{Text: line, Final: true, Confidence: 0.9})
}

// send queues t; s.mu is held, so nothing is sent after Close.
func (s *lineStream) send(t stt.Transcript) error {
	select {
	case s.out <- t:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// Recv delivers every transcript queued before Close, then io.EOF; a
// cancelled context ends it at once.
func (s *lineStream) Recv() (stt.Transcript, error) {
	if err := s.ctx.Err(); err != nil {
		return stt.Transcript{}, fmt.Errorf("lines: %w", err)
	}
	select {
	case t, ok := <-s.out:
		if !ok {
			return stt.Transcript{}, io.EOF
		}
		return t, nil
	case <-s.ctx.Done():
		return stt.Transcript{}, fmt.Errorf("lines: %w", s.ctx.Err())
	}
}

func (s *lineStream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.out)
	}
	return nil
}

func loud(samples []int16) bool {
	for _, v := range samples {
		if v > 1000 || v < -1000 {
			return true
		}
	}
	return false
}

// A Recognizer written by hand, driven as a session drives one: audio is
// written from one goroutine while transcripts are read on another, the
// speaker's stop is signalled with EndOfSpeech, and Recv ends with io.EOF
// once the stream is closed and everything heard has been delivered.
func ExampleRecognizer() {
	var rec stt.Recognizer = &lines{script: []string{"a table for two", "at seven please"}}
	ctx := context.Background()
	stream, err := rec.Stream(ctx, media.Rate16k)
	if err != nil {
		fmt.Println(err)
		return
	}

	go func() {
		defer stream.Close()
		frame := make([]int16, media.SamplesFor(media.Rate16k, 20*time.Millisecond))
		utter := func(d time.Duration) {
			for i := range frame {
				frame[i] = 3000 // loud
			}
			for range d / (20 * time.Millisecond) {
				_ = stream.Write(media.Frame{Samples: frame, SampleRate: media.Rate16k})
			}
			clear(frame) // the silence after it
			_ = stream.Write(media.Frame{Samples: frame, SampleRate: media.Rate16k})
			_ = stream.EndOfSpeech()
		}
		utter(800 * time.Millisecond)
		utter(400 * time.Millisecond) // cut short: the final still has every word
	}()

	for {
		t, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if t.Final {
			fmt.Printf("final:   %s (%.1f)\n", t.Text, t.Confidence)
		} else {
			fmt.Printf("partial: %s\n", t.Text)
		}
	}

	// Cancelling the context ends a stream whatever it is doing.
	ctx, cancel := context.WithCancel(ctx)
	stream, _ = rec.Stream(ctx, media.Rate16k)
	cancel()
	_, err = stream.Recv()
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// partial: a
	// partial: a table
	// partial: a table for
	// partial: a table for two
	// final:   a table for two (0.9)
	// partial: at
	// partial: at seven
	// final:   at seven please (0.9)
	// true
}
