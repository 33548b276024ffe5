package openai_test

import (
	"context"
	"fmt"
	"log"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/stt/openai"
)

func Example() {
	// A fake OpenAI server stands in for api.openai.com; in production
	// the key and URL come from OPENAI_API_KEY and OPENAI_BASE_URL.
	srv := openaitest.New(nil)
	defer srv.Close()
	srv.SetTranscriber(func(audio []int16, rate int) string { return " A table for two." })

	rec, err := openai.New(openai.WithBaseURL(srv.URL()), openai.WithAPIKey(openaitest.APIKey))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	in, err := rec.Stream(ctx, media.Rate16k)
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()

	frame := media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k} // 20 ms
	say := func(d int) {
		for range d / 20 {
			in.Write(frame)
		}
	}
	say(500) // background before the caller speaks
	// The session's voice detector hears the caller start...
	in.(stt.SpeechStarter).StartOfSpeech()
	say(1000)
	// ...and stop: the utterance is uploaded.
	in.EndOfSpeech()

	tr, err := in.Recv()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q final=%v\n", tr.Text, tr.Final)
	up := srv.Transcriptions()[0]
	fmt.Printf("uploaded %v at %d Hz to %s\n", media.Frame{Samples: up.Audio, SampleRate: up.SampleRate}.Duration(), up.SampleRate, up.Model)
	// Output:
	// "A table for two." final=true
	// uploaded 1.3s at 16000 Hz to gpt-4o-mini-transcribe
}
