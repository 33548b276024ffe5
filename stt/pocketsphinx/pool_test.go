package pocketsphinx

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
)

// TestCallsShareDecodersWhileSpeaking checks that a stream decoding as
// the caller speaks (with partials) holds a decoder only while its
// utterance is open, that the next utterance of any stream reuses it, and
// that decoders idle past the idle time are freed.
func TestCallsShareDecodersWhileSpeaking(t *testing.T) {
	sp, err := speech(t, callerVoice, media.Rate16k, "Yes, please.")
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		r := newRecognizer(t, WithPhrases(booking.Phrases...), WithIdleDecoder(10*time.Second), WithPartials(200*time.Millisecond))
		want := func(what string, inUse, idle int) {
			t.Helper()
			synctest.Wait()
			if u, i := r.Decoders(); u != inUse || i != idle {
				t.Errorf("%s: %d decoders in use and %d idle, want %d and %d", what, u, i, inUse, idle)
			}
		}
		var streams []*Stream
		for range 3 {
			s, err := r.Stream(context.Background(), media.Rate16k)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			streams = append(streams, s.(*Stream))
		}
		want("three calls, nobody speaking", 0, 1)

		for _, s := range streams[:2] {
			if err := s.StartOfSpeech(); err != nil {
				t.Fatal(err)
			}
		}
		want("two callers speaking", 2, 0)

		say := func(s *Stream) string {
			t.Helper()
			for i := 0; i < len(sp); i += 320 {
				if err := s.Write(media.Frame{Samples: sp[i:min(i+320, len(sp))], SampleRate: media.Rate16k}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.EndOfSpeech(); err != nil {
				t.Fatal(err)
			}
			for {
				tr, err := s.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if tr.Final {
					return tr.Text
				}
			}
		}
		for _, s := range streams[:2] {
			if got := say(s); got != "yes please" {
				t.Errorf("heard %q, want %q", got, "yes please")
			}
		}
		want("both finished", 0, 2)

		if err := streams[2].StartOfSpeech(); err != nil {
			t.Fatal(err)
		}
		want("the third caller speaks on a decoder the others used", 1, 1)
		if got := say(streams[2]); got != "yes please" {
			t.Errorf("on a reused decoder: heard %q, want %q", got, "yes please")
		}
		want("the third finished", 0, 2)

		time.Sleep(10*time.Second + time.Millisecond)
		want("idle for the idle time", 0, 0)
	})
}

// TestCallersBeyondTheDecodersAreHeardWhole checks that with more callers
// speaking at once than decoders, the utterances that find none are kept
// and decoded whole when they end, with the same words, and that the
// decoders never exceed the bound.
func TestCallersBeyondTheDecodersAreHeardWhole(t *testing.T) {
	sp, err := speech(t, callerVoice, media.Rate16k, "Book a table for two at seven.")
	if err != nil {
		t.Fatal(err)
	}
	// With partials utterances are decoded as they come, where a decoder
	// is spare.
	r := newRecognizer(t, WithPhrases(booking.Phrases...), WithMaxDecoders(2), WithPartials(200*time.Millisecond))
	const callers = 4
	var streams []*Stream
	for range callers {
		s, err := r.Stream(context.Background(), media.Rate16k)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		streams = append(streams, s.(*Stream))
		if err := s.(*Stream).StartOfSpeech(); err != nil {
			t.Fatal(err)
		}
	}
	most := 0
	for i := 0; i < len(sp); i += 320 {
		for _, s := range streams {
			if err := s.Write(media.Frame{Samples: sp[i:min(i+320, len(sp))], SampleRate: media.Rate16k}); err != nil {
				t.Fatal(err)
			}
		}
		inUse, idle := r.Decoders()
		most = max(most, inUse+idle)
	}
	for _, s := range streams {
		if err := s.EndOfSpeech(); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range streams {
		tr, err := s.Recv()
		for err == nil && !tr.Final {
			tr, err = s.Recv()
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := "book a table for two at seven"; tr.Text != want || !tr.Final {
			t.Errorf("caller %d: %+v, want the final %q", i, tr, want)
		}
		inUse, idle := r.Decoders()
		most = max(most, inUse+idle)
	}
	if most > 2 {
		t.Errorf("%d decoders at once; the bound is 2", most)
	}
}

// TestShortSoundsAreHeardAsTheyComeAndSentencesWhole checks that an
// utterance is decoded as it is spoken on a spare decoder, given back when
// it ends, and that a sentence's final (decoded again, whole) and a short
// sound's (as it came) both hold the words said.
func TestShortSoundsAreHeardAsTheyComeAndSentencesWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecognizer(t, WithPhrases(booking.Phrases...), WithIdleDecoder(10*time.Second))
		s, err := r.Stream(context.Background(), media.Rate16k)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st := s.(*Stream)
		for _, say := range []string{"Yes, please.", "Book a table for two at seven."} {
			sp, err := speech(t, callerVoice, media.Rate16k, say)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.StartOfSpeech(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(sp); i += 320 {
				if err := st.Write(media.Frame{Samples: sp[i:min(i+320, len(sp))], SampleRate: media.Rate16k}); err != nil {
					t.Fatal(err)
				}
			}
			synctest.Wait()
			if inUse, _ := r.Decoders(); inUse != 1 {
				t.Errorf("%q: %d decoders in use while it is spoken; want 1", say, inUse)
			}
			if err := st.EndOfSpeech(); err != nil {
				t.Fatal(err)
			}
			tr, err := st.Recv()
			if want := strings.Join(Normalise(say), " "); err != nil || tr.Text != want || !tr.Final {
				t.Errorf("final %+v, %v; want %q", tr, err, want)
			}
			synctest.Wait()
			if inUse, _ := r.Decoders(); inUse != 0 {
				t.Errorf("%q: %d decoders in use after its final; want 0", say, inUse)
			}
		}
	})
}
