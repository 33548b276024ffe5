package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/openaitest"
)

// fakeOpenAICmd serves an in-process OpenAI-compatible API (chat
// completions, transcription, speech and Realtime; with --chat-only chat
// completions alone) answered by the demo model, so the OpenAI providers
// can be tried with no key and no network:
//
//	holdline fake-openai &
//	OPENAI_BASE_URL=... OPENAI_API_KEY=... holdline console --llm openai
func fakeOpenAICmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fake-openai", flag.ContinueOnError)
	fs.SetOutput(stderr)
	chatOnly := fs.Bool("chat-only", false, "serve chat completions only, as many compatible servers do: the audio and Realtime endpoints answer 404")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var opts []openaitest.Option
	if *chatOnly {
		opts = append(opts, openaitest.WithChatOnly())
	}
	srv := openaitest.New(booking.NewDemoModel(), opts...)
	defer srv.Close()
	fmt.Fprintf(stdout, "export OPENAI_BASE_URL=%s OPENAI_API_KEY=%s\n", srv.URL(), openaitest.APIKey)
	<-ctx.Done()
	return nil
}
