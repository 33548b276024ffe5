package openai_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/tts/openai"
)

func Example() {
	// A fake OpenAI server stands in for api.openai.com; in production
	// the key and URL come from OPENAI_API_KEY and OPENAI_BASE_URL.
	srv := openaitest.New(nil)
	defer srv.Close()

	voice, err := openai.New(
		openai.WithBaseURL(srv.URL()),
		openai.WithAPIKey(openaitest.APIKey),
		openai.WithVoice("coral"),
		openai.WithSampleRate(media.Rate16k), // the pipeline's rate
	)
	if err != nil {
		log.Fatal(err)
	}
	stream, err := voice.Synthesize(context.Background(), "Hello there")
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()

	var played time.Duration
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		} else if err != nil {
			log.Fatal(err)
		}
		// A player would queue chunk.Audio here, as it arrives.
		played += chunk.Audio.Duration()
		for _, w := range chunk.Words {
			fmt.Printf("%-6s %v to %v\n", w.Word, w.Start, w.End)
		}
	}
	fmt.Println("audio:", played)
	// Output:
	// Hello  0s to 330ms
	// there  330ms to 660ms
	// audio: 660ms
}
