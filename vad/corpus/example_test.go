package corpus_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/holdline/holdline/vad/corpus"
)

func ExampleVocabulary() {
	clips := []corpus.Clip{
		{AgentText: "I can book a table for four.", UserText: "No, six people!"},
	}
	fmt.Println(corpus.Vocabulary(clips))
	// Output: [a book can for four i mm-hmm no okay people right six table uh-huh yeah]
}

// Generate needs espeak-ng and sox, Transcribe pocketsphinx: this example
// is compiled but not run.
func ExampleGenerate() {
	ctx := context.Background()
	clips, err := corpus.Generate(ctx, corpus.Options{Rate: 8000, Seed: 1})
	if errors.Is(err, corpus.ErrTools) {
		fmt.Println(err) // says what to apt-get install
		return
	}
	if err != nil {
		log.Fatal(err)
	}

	// Listen to the first barge-in.
	for _, c := range clips {
		if c.Kind == corpus.BargeIn {
			fmt.Printf("%s: %q over %q at %v\n", c.Name, c.UserText, c.AgentText, c.UserOnset)
			if err := c.WriteWAV(os.TempDir()); err != nil {
				log.Fatal(err)
			}
			break
		}
	}

	// What does a recogniser hear in the caller's audio?
	var near [][]int16
	for _, c := range clips {
		near = append(near, c.Near)
	}
	words, err := corpus.Transcribe(ctx, 8000, near, corpus.Vocabulary(clips))
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range words[0] {
		fmt.Println(w.Text, w.Start, w.End)
	}
}
