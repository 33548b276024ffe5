package pocketsphinx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/tts/espeak"
)

// absent ends a test whose engine is missing: a failure when
// HOLDLINE_REQUIRE_MODELS=1 (as under "make test", which installs
// pocketsphinx, pocketsphinx-en-us and espeak-ng), else a skip.
func absent(t testing.TB, err error) {
	t.Helper()
	need.Missing(t, err)
}

// newRecognizer returns a Recognizer closed when the test ends, or ends the
// test with absent if pocketsphinx or its model is missing.
func newRecognizer(t testing.TB, opts ...Option) *Recognizer {
	t.Helper()
	r, err := New(opts...)
	if errors.Is(err, ErrMissingLibrary) || errors.Is(err, ErrMissingModel) {
		absent(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// callerVoice is the espeak-ng voice callers speak with in the tests:
// vad/corpus's caller ("user") voice, a male variant with lowered pitch.
// How well pocketsphinx's en-us model recognises espeak-ng depends very
// much on the voice; this one does better than most (see the package
// documentation for others).
var callerVoice = voice{"en-us+edward", 35, 175}

// voice is an espeak-ng voice: name, pitch and words per minute.
type voice struct {
	name       string
	pitch, wpm int
}

var (
	synthMu sync.Mutex
	synths  = map[string]*espeak.Synthesizer{}
)

// speech synthesises text with espeak-ng through package tts/espeak, in
// voice v at rate, or ends the test with absent if espeak-ng is missing.
func speech(t testing.TB, v voice, rate int, text string) ([]int16, error) {
	synthMu.Lock()
	key := fmt.Sprint(v, rate)
	s, ok := synths[key]
	if !ok {
		var err error
		s, err = espeak.New(espeak.WithVoice(v.name), espeak.WithPitch(v.pitch),
			espeak.WithWordsPerMinute(v.wpm), espeak.WithSampleRate(rate))
		if errors.Is(err, espeak.ErrMissingBinary) {
			synthMu.Unlock()
			absent(t, err)
		}
		if err != nil {
			synthMu.Unlock()
			return nil, err
		}
		synths[key] = s
	}
	synthMu.Unlock()
	st, err := s.Synthesize(context.Background(), text)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var out []int16
	for {
		c, err := st.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c.Audio.Samples...)
	}
}

// silence returns d of digital silence at rate.
func silence(rate int, d time.Duration) []int16 {
	return make([]int16, media.SamplesFor(rate, d))
}

// recognise runs one utterance through s as a session would:
// StartOfSpeech, the audio in 20 ms frames, EndOfSpeech; it returns the
// final transcript.
func recognise(s stt.Stream, rate int, audio []int16) (string, error) {
	n := media.SamplesFor(rate, 20*time.Millisecond)
	if ss, ok := s.(stt.SpeechStarter); ok {
		if err := ss.StartOfSpeech(); err != nil {
			return "", err
		}
	}
	for i := 0; i < len(audio); i += n {
		if err := s.Write(media.Frame{Samples: audio[i:min(i+n, len(audio))], SampleRate: rate}); err != nil {
			return "", err
		}
	}
	if err := s.EndOfSpeech(); err != nil {
		return "", err
	}
	for {
		tr, err := s.Recv()
		if err != nil {
			return "", err
		}
		if tr.Final {
			return tr.Text, nil
		}
	}
}

// wordErrors is the word edit distance between ref and hyp.
func wordErrors(ref, hyp []string) int {
	prev := make([]int, len(hyp)+1)
	cur := make([]int, len(hyp)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ref); i++ {
		cur[0] = i
		for j := 1; j <= len(hyp); j++ {
			sub := prev[j-1]
			if ref[i-1] != hyp[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(hyp)]
}

// words splits a transcript, treating "forty-five" and "forty five" alike.
func words(s string) []string {
	return strings.Fields(strings.ReplaceAll(s, "-", " "))
}
