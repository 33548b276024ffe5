package cli

import (
	"context"
	"fmt"

	"github.com/holdline/holdline/openaitest"
)

// fakeOpenAICmd serves an in-process OpenAI-compatible API (chat
// completions, transcription, speech and Realtime; with --chat-only chat
// completions alone) answered by an agent's own model (the example agents' offline demo model), so the OpenAI providers
// can be tried with no key and no network:
//
//	holdline fake-openai &
//	OPENAI_BASE_URL=... OPENAI_API_KEY=... holdline console --llm openai
func (c *cli) fakeOpenAICmd(ctx context.Context, args []string) error {
	stdout := c.stdout
	fs := c.flagSet("fake-openai")
	name := c.agentFlag(fs)
	chatOnly := fs.Bool("chat-only", false, "serve chat completions only, as many compatible servers do: the audio and Realtime endpoints answer 404")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var opts []openaitest.Option
	if *chatOnly {
		opts = append(opts, openaitest.WithChatOnly())
	}
	fn, err := c.agent(*name)
	if err != nil {
		return err
	}
	agent, release, err := fn(ctx)
	if err != nil {
		return err
	}
	if release != nil {
		defer release()
	}
	if agent == nil || agent.Model == nil {
		return fmt.Errorf("agent %q has no model of its own to answer with", *name)
	}
	srv := openaitest.New(agent.Model, opts...)
	defer srv.Close()
	fmt.Fprintf(stdout, "export OPENAI_BASE_URL=%s OPENAI_API_KEY=%s\n", srv.URL(), openaitest.APIKey)
	<-ctx.Done()
	return nil
}
