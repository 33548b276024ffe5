//go:build cgo

// The examples need pocketsphinx, its US English model and espeak-ng
// installed (apt-get install pocketsphinx pocketsphinx-en-us espeak-ng),
// and cgo to load pocketsphinx.

package pocketsphinx_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/stt"
	"github.com/holdline/holdline/stt/pocketsphinx"
	"github.com/holdline/holdline/tts/espeak"
)

// A recogniser for the booking agent's callers, on a caller played by
// espeak-ng.
func Example() {
	rec, err := pocketsphinx.New(pocketsphinx.WithPhrases(booking.Phrases...))
	if err != nil {
		log.Fatal(err) // apt-get install pocketsphinx pocketsphinx-en-us
	}
	defer rec.Close()
	stream, err := rec.Stream(context.Background(), media.Rate16k)
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()

	caller, err := espeak.New(espeak.WithVoice("en-us+edward"), espeak.WithPitch(35),
		espeak.WithSampleRate(media.Rate16k))
	if err != nil {
		log.Fatal(err) // apt-get install espeak-ng
	}
	speech, err := caller.Synthesize(context.Background(), "Do you have a table for four at 7:30?")
	if err != nil {
		log.Fatal(err)
	}
	defer speech.Close()

	// As a session does: StartOfSpeech when its voice activity detector
	// hears the caller, every frame, EndOfSpeech when the caller stops.
	stream.(stt.SpeechStarter).StartOfSpeech()
	for {
		chunk, err := speech.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		if len(chunk.Audio.Samples) == 0 {
			continue // the word timings
		}
		if err := stream.Write(chunk.Audio); err != nil {
			log.Fatal(err)
		}
	}
	stream.EndOfSpeech()
	tr, err := stream.Recv()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q final=%v\n", tr.Text, tr.Final)
	// Output: "do you have a table for four at seven thirty" final=true
}

func ExampleGrammar() {
	g, err := pocketsphinx.Grammar([]string{"Table for two at 7:30.", "Yes, please."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(g)
	// Output:
	// #JSGF V1.0;
	//
	// grammar holdline;
	//
	// public <utterance> = <phrase> | <free>;
	//
	// <phrase> =
	// 	  table for <count> at <hour> [<minutes>]
	// 	| yes please
	// 	| uh-huh
	// 	| mhm
	// 	| hmm
	// 	| mm
	// 	| yeah
	// 	| yep
	// 	| okay
	// 	| right
	// 	| sure
	// 	| alright;
	//
	// <count> = one | two | three | four | five | six | seven | eight | nine | ten | eleven | twelve;
	//
	// <hour> = six | seven | eight;
	//
	// <minutes> = fifteen | thirty | forty-five;
	//
	// <free> = <word>+;
	//
	// <word> =
	// 	  /1e-15/ at
	// 	| /1e-15/ eight
	// 	| /1e-15/ eleven
	// 	| /1e-15/ fifteen
	// 	| /1e-15/ five
	// 	| /1e-15/ for
	// 	| /1e-15/ forty-five
	// 	| /1e-15/ four
	// 	| /1e-15/ nine
	// 	| /1e-15/ one
	// 	| /1e-15/ please
	// 	| /1e-15/ seven
	// 	| /1e-15/ six
	// 	| /1e-15/ table
	// 	| /1e-15/ ten
	// 	| /1e-15/ thirty
	// 	| /1e-15/ three
	// 	| /1e-15/ twelve
	// 	| /1e-15/ two
	// 	| /1e-15/ yes;
}
