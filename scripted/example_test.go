package scripted_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/scripted"
)

func Example() {
	ctx := context.Background()

	// The caller says one thing...
	rec := scripted.NewSTT(scripted.WithLatency(0))
	rec.Say("a table for two")
	in, err := rec.Stream(ctx, media.Rate16k)
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	in.Write(media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k})
	in.EndOfSpeech()
	for {
		tr, err := in.Recv()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("heard %q (final %v)\n", tr.Text, tr.Final)
		if tr.Final {
			break
		}
	}

	// ...the model answers and calls a tool...
	model := scripted.NewLLM(scripted.Response{
		Text:            "Booking it now.",
		ToolCalls:       []scripted.Call{{ID: "c1", Name: "book", Args: map[string]int{"party": 2}}},
		TokensPerSecond: 1000,
	})
	out, err := model.Stream(ctx, llm.Request{})
	if err != nil {
		log.Fatal(err)
	}
	defer out.Close()
	var calls llm.CallAccumulator
	for {
		c, err := out.Recv()
		if err == io.EOF {
			break
		} else if err != nil {
			log.Fatal(err)
		}
		if c.Text != "" {
			fmt.Printf("text %q\n", c.Text)
		}
		if c.ToolCall != nil {
			calls.Add(*c.ToolCall)
		}
	}
	for _, c := range calls.Calls() {
		fmt.Printf("call %s %s\n", c.Name, c.Arguments)
	}

	// ...and the answer is spoken.
	voice, err := scripted.NewTTS(scripted.WithWordsPerSecond(4))
	if err != nil {
		log.Fatal(err)
	}
	speech, err := voice.Synthesize(ctx, "Booking it now.")
	if err != nil {
		log.Fatal(err)
	}
	defer speech.Close()
	var audio int
	for {
		c, err := speech.Recv()
		if err == io.EOF {
			break
		} else if err != nil {
			log.Fatal(err)
		}
		audio += len(c.Audio.Samples)
		for _, w := range c.Words {
			fmt.Printf("word %q %v-%v\n", w.Word, w.Start, w.End)
		}
	}
	fmt.Println("samples", audio)

	// Output:
	// heard "a" (final false)
	// heard "a table for two" (final true)
	// text "Booking "
	// text "it "
	// text "now."
	// call book {"party":2}
	// word "Booking" 0s-250ms
	// word "it" 250ms-500ms
	// word "now." 500ms-750ms
	// samples 12000
}
