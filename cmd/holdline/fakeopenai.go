package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/internal/openaitest"
)

// fakeOpenAICmd serves an in-process OpenAI-compatible API (chat
// completions, transcription, speech and Realtime) answered by the demo
// model, so the OpenAI providers can be tried with no key and no network:
//
//	holdline fake-openai &
//	OPENAI_BASE_URL=... OPENAI_API_KEY=... holdline console --llm openai
func fakeOpenAICmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fake-openai", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	srv := openaitest.New(booking.NewDemoModel())
	defer srv.Close()
	fmt.Fprintf(stdout, "export OPENAI_BASE_URL=%s OPENAI_API_KEY=%s\n", srv.URL(), openaitest.APIKey)
	<-ctx.Done()
	return nil
}
