package pocketsphinx

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
)

func TestMissingModel(t *testing.T) {
	if _, err := loadLib(); err != nil {
		absent(t, err)
	}
	_, err := New(WithPhrases("yes"), WithModelDir(t.TempDir()))
	if !errors.Is(err, ErrMissingModel) || !strings.Contains(err.Error(), "install the Debian package pocketsphinx-en-us") {
		t.Errorf("empty model directory: %v", err)
	}
	_, err = New(WithPhrases("yes"), WithDictionary(filepath.Join(t.TempDir(), "none.dict")))
	if !errors.Is(err, ErrMissingModel) {
		t.Errorf("missing dictionary: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	for name, opts := range map[string][]Option{
		"no grammar":     nil,
		"both":           {WithPhrases("yes"), WithGrammar("#JSGF V1.0; grammar g; public <a> = yes;")},
		"short max":      {WithPhrases("yes"), WithMaxUtterance(time.Millisecond)},
		"loud floor":     {WithPhrases("yes"), WithNoiseFloor(-6)},
		"odd args":       {WithPhrases("yes"), WithDecoderArgs("-beam")},
		"reserved arg":   {WithPhrases("yes"), WithDecoderArgs("-dict", "/tmp/x")},
		"unknown arg":    {WithPhrases("yes"), WithDecoderArgs("-no-such-option", "1")},
		"bad grammar":    {WithGrammar("#JSGF V1.0; grammar g; public <a> = yes | <undefined>;")},
		"unknown word":   {WithPhrases("yes", "pleeease")},
		"negative queue": {WithPhrases("yes"), WithQueue(-time.Second, 0)},
	} {
		r, err := New(opts...)
		if errors.Is(err, ErrMissingLibrary) || errors.Is(err, ErrMissingModel) {
			absent(t, err)
		}
		if err == nil {
			r.Close()
			t.Errorf("%s: New succeeded", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestGrammarFilesRemoved checks that streams opened before Close go on
// working, and that the recogniser's temporary files are removed once the
// last of them has closed.
func TestGrammarFilesRemoved(t *testing.T) {
	r := newRecognizer(t, WithPhrases("yes please", "no thanks"))
	dir := r.pool.dir
	if _, err := os.Stat(filepath.Join(dir, "grammar.gram")); err != nil {
		t.Fatal(err)
	}
	s1, err := r.Stream(context.Background(), media.Rate16k) // New's decoder
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := r.Stream(context.Background(), media.Rate16k) // a new one
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	r.Close()
	if _, err := r.Stream(context.Background(), media.Rate16k); !errors.Is(err, ErrClosed) {
		t.Errorf("Stream after Close: %v, want ErrClosed", err)
	}
	sp, err := speech(t, callerVoice, media.Rate16k, "Yes, please.")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []stt.Stream{s1, s2} {
		text, err := recognise(s, media.Rate16k, append(sp, silence(media.Rate16k, padding)...))
		if err != nil || text != "yes please" {
			t.Errorf("after the recogniser's Close: %q, %v", text, err)
		}
	}
	s1.Close()
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("%s gone while a stream is open: %v", dir, err)
	}
	s2.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Close and the last stream's: %v", dir, err)
	}
}

func TestStreamLifecycle(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...))
	s, err := r.Stream(context.Background(), media.Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stream(context.Background(), 11025); !errors.Is(err, media.ErrUnsupportedRate) {
		t.Errorf("11025 Hz: %v", err)
	}
	if err := s.Write(media.Frame{Samples: make([]int16, 160), SampleRate: media.Rate8k}); err == nil {
		t.Error("Write accepted a frame at another rate")
	}
	// An EndOfSpeech with nothing open yields nothing: the first
	// transcript below is the phrase's.
	if err := s.EndOfSpeech(); err != nil {
		t.Fatal(err)
	}
	sp, err := speech(t, callerVoice, media.Rate16k, "Book a table for two at seven.")
	if err != nil {
		t.Fatal(err)
	}
	audio := append(append(silence(media.Rate16k, padding), sp...), silence(media.Rate16k, padding)...)
	if err := s.(*Stream).StartOfSpeech(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(audio); i += 320 {
		if err := s.Write(media.Frame{Samples: audio[i:min(i+320, len(audio))], SampleRate: media.Rate16k}); err != nil {
			t.Fatal(err)
		}
	}
	// EndOfSpeech then Close at once: the final still comes, then io.EOF.
	if err := s.EndOfSpeech(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Recv()
	if err != nil || !tr.Final || tr.Text != "book a table for two at seven" {
		t.Errorf("Recv after Close: %+v, %v", tr, err)
	}
	for range 2 {
		if _, err := s.Recv(); err != io.EOF {
			t.Errorf("Recv: %v, want io.EOF", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Write(media.Frame{Samples: audio[:320], SampleRate: media.Rate16k}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := s.EndOfSpeech(); !errors.Is(err, ErrClosed) {
		t.Errorf("EndOfSpeech after Close: %v", err)
	}
}

func TestContextCancel(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...))
	ctx, cancel := context.WithCancel(context.Background())
	s, err := r.Stream(ctx, media.Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Recv()
		errc <- err
	}()
	if err := s.Write(media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k}); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Recv: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Recv not ended by the cancellation")
	}
	if err := s.Write(media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k}); !errors.Is(err, context.Canceled) {
		t.Errorf("Write: %v, want context.Canceled", err)
	}
	<-s.(*Stream).done // the goroutine ends, and frees the decoder
	if _, err := r.Stream(ctx, media.Rate16k); !errors.Is(err, context.Canceled) {
		t.Errorf("Stream with a cancelled context: %v", err)
	}
}

// TestWithoutStartOfSpeech feeds a stream as the session does today: every
// frame, EndOfSpeech at each end of speech, StartOfSpeech never. Each
// utterance then runs from the end of the last one, silence and all. The
// bar is the word accuracy target's.
func TestWithoutStartOfSpeech(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...))
	phrases := []string{"Book a table for two at seven.", "Yes, please.", "Do you have a table for four at 8:30?", "Thank you."}
	for _, rate := range []int{media.Rate16k, media.Rate8k} {
		s, err := r.Stream(context.Background(), rate)
		if err != nil {
			t.Fatal(err)
		}
		n := media.SamplesFor(rate, 20*time.Millisecond)
		var results []result
		for i, p := range phrases {
			sp, err := speech(t, callerVoice, rate, p)
			if err != nil {
				t.Fatal(err)
			}
			lead := time.Duration(i+1) * 700 * time.Millisecond
			audio := append(append(silence(rate, lead), sp...), silence(rate, padding)...)
			for j := 0; j < len(audio); j += n {
				if err := s.Write(media.Frame{Samples: audio[j:min(j+n, len(audio))], SampleRate: rate}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.EndOfSpeech(); err != nil {
				t.Fatal(err)
			}
			tr, err := s.Recv()
			if err != nil || !tr.Final {
				t.Fatalf("%d Hz, %q: %+v, %v", rate, p, tr, err)
			}
			ref := words(strings.Join(Normalise(p), " "))
			hyp := words(tr.Text)
			results = append(results, result{ref, hyp, wordErrors(ref, hyp)})
		}
		s.Close()
		acc, table := score(results)
		t.Logf("%d Hz: word accuracy %.1f%%\n%s", rate, 100*acc, table)
		if acc < minWordAccuracy {
			t.Errorf("%d Hz: word accuracy %.1f%%, want at least %.0f%%", rate, 100*acc, 100*minWordAccuracy)
		}
	}
}

// TestPreRoll calls StartOfSpeech 250 ms into the speech, as a voice
// activity detector does: the pre-roll brings back the start.
func TestPreRoll(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...))
	s, err := r.Stream(context.Background(), media.Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp, err := speech(t, callerVoice, media.Rate16k, "Do you have a table for four at eight?")
	if err != nil {
		t.Fatal(err)
	}
	// The speech starts at 0.5 s; the detector notices at 0.75 s.
	audio := append(append(silence(media.Rate16k, 500*time.Millisecond), sp...), silence(media.Rate16k, padding)...)
	at := media.SamplesFor(media.Rate16k, 750*time.Millisecond)
	write := func(x []int16) {
		for i := 0; i < len(x); i += 320 {
			if err := s.Write(media.Frame{Samples: x[i:min(i+320, len(x))], SampleRate: media.Rate16k}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(audio[:at])
	if err := s.(*Stream).StartOfSpeech(); err != nil {
		t.Fatal(err)
	}
	write(audio[at:])
	if err := s.EndOfSpeech(); err != nil {
		t.Fatal(err)
	}
	tr, err := s.Recv()
	if want := "do you have a table for four at eight"; err != nil || tr.Text != want {
		t.Errorf("got %+v, %v; want %q", tr, err, want)
	}
}

// TestFirstStartOfSpeechDropsWhatCameBefore: on a call, the audio before
// the caller first speaks is the line during the greeting, its echo
// included. The first StartOfSpeech reopens the utterance the first Write
// opened, at the pre-roll, so none of that becomes the caller's words, and
// the sentence is decoded whole like every later one.
func TestFirstStartOfSpeechDropsWhatCameBefore(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...))
	for _, rate := range []int{media.Rate16k, media.Rate8k} {
		s, err := r.Stream(context.Background(), rate)
		if err != nil {
			t.Fatal(err)
		}
		echo, err := speech(t, callerVoice, rate, "Goodbye.")
		if err != nil {
			t.Fatal(err)
		}
		said, err := speech(t, callerVoice, rate, "Book a table for two at seven.")
		if err != nil {
			t.Fatal(err)
		}
		n := media.SamplesFor(rate, 20*time.Millisecond)
		before := append(echo, silence(rate, 2*time.Second)...)
		for j := 0; j < len(before); j += n {
			if err := s.Write(media.Frame{Samples: before[j:min(j+n, len(before))], SampleRate: rate}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := recognise(s, rate, append(said, silence(rate, padding)...))
		s.Close()
		if want := "book a table for two at seven"; err != nil || got != want {
			t.Errorf("%d Hz: got %q, %v; want %q", rate, got, err, want)
		}
	}
}

func TestPartials(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...), WithPartials(200*time.Millisecond))
	s, err := r.Stream(context.Background(), media.Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp, err := speech(t, callerVoice, media.Rate16k, "I'd like to book a table for four at 8:30.")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		s.(*Stream).StartOfSpeech()
		for i := 0; i < len(sp); i += 320 {
			s.Write(media.Frame{Samples: sp[i:min(i+320, len(sp))], SampleRate: media.Rate16k})
		}
		s.EndOfSpeech()
	}()
	var partials []string
	for {
		tr, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if tr.Final {
			if tr.Text != "i'd like to book a table for four at eight thirty" {
				t.Errorf("final %q", tr.Text)
			}
			break
		}
		partials = append(partials, tr.Text)
	}
	if len(partials) < 2 {
		t.Errorf("partials %q", partials)
	}
	t.Logf("partials %q", partials)
}

// TestMaxUtterance feeds one utterance three times as long as the limit:
// it is cut into three, each with its final.
func TestMaxUtterance(t *testing.T) {
	// The audio is written at once, far faster than it is spoken; an
	// utterance is decoded whole at its end, which takes longer than the
	// default write timeout: wait for room instead.
	r := newRecognizer(t, WithPhrases(booking.Phrases...), WithMaxUtterance(3*time.Second), WithQueue(DefaultQueue, 10*time.Second))
	s, err := r.Stream(context.Background(), media.Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := speech(t, callerVoice, media.Rate16k, "Yes, please.")
	if err != nil {
		t.Fatal(err)
	}
	// "yes please" and silence, to 3 s and twice more.
	sp = append(sp, silence(media.Rate16k, 3*time.Second-media.Frame{Samples: sp, SampleRate: media.Rate16k}.Duration())...)
	audio := append(append(append([]int16(nil), sp...), sp...), sp...)
	if err := s.(*Stream).StartOfSpeech(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(audio); i += 320 {
		if err := s.Write(media.Frame{Samples: audio[i:min(i+320, len(audio))], SampleRate: media.Rate16k}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.EndOfSpeech(); err != nil {
		t.Fatal(err)
	}
	s.Close() // decodes what is queued first
	var finals []string
	for {
		tr, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !tr.Final {
			t.Errorf("partial %q", tr.Text)
		}
		finals = append(finals, tr.Text)
	}
	// The last cut comes with the last sample, so EndOfSpeech finds an
	// utterance with nothing in it.
	want := []string{"yes please", "yes please", "yes please", ""}
	if strings.Join(finals, "|") != strings.Join(want, "|") {
		t.Errorf("finals %q, want %q", finals, want)
	}
}

// TestOverrun writes far faster than real time into a short queue that
// Write does not wait on: some frames are dropped with ErrOverrun, and the
// stream goes on.
func TestOverrun(t *testing.T) {
	r := newRecognizer(t, WithPhrases(booking.Phrases...), WithQueue(100*time.Millisecond, 0))
	s, err := r.Stream(context.Background(), media.Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp, err := speech(t, callerVoice, media.Rate16k, "Book a table for two at seven.")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.(*Stream).StartOfSpeech(); err != nil {
		t.Fatal(err)
	}
	overruns := 0
	for range 5 {
		for i := 0; i < len(sp); i += 160 {
			err := s.Write(media.Frame{Samples: sp[i:min(i+160, len(sp))], SampleRate: media.Rate16k})
			switch {
			case errors.Is(err, ErrOverrun):
				overruns++
			case err != nil:
				t.Fatal(err)
			}
		}
	}
	if overruns == 0 {
		t.Fatal("no ErrOverrun")
	}
	t.Logf("%d of %d frames dropped", overruns, 5*(len(sp)+159)/160)
	// Still working: once the queue has room, the utterance ends.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.EndOfSpeech()
		if err == nil {
			break
		}
		if !errors.Is(err, ErrOverrun) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tr, err := s.Recv(); err != nil || !tr.Final {
		t.Errorf("after overruns: %+v, %v", tr, err)
	}
}
