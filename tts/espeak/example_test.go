package espeak_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/holdline/holdline/tts/espeak"
)

func Example() {
	synth, err := espeak.New(espeak.WithVoice("en-us"), espeak.WithWordsPerMinute(175),
		espeak.WithSampleRate(16000))
	if err != nil {
		log.Fatal(err) // apt-get install espeak-ng
	}
	stream, err := synth.Synthesize(context.Background(), "A table for two at seven is free.")
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	var samples int
	var words []string
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		samples += len(chunk.Audio.Samples)
		for _, w := range chunk.Words {
			words = append(words, w.Word)
		}
	}
	fmt.Println("audio:", samples > 16000, "words:", words)
	// Output: audio: true words: [A table for two at seven is free.]
}
