package runtime_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
)

type WeatherArgs struct {
	City string `json:"city" jsonschema:"the city to look up"`
}

func weather(ctx context.Context, a WeatherArgs) (string, error) {
	return "sunny and 21 degrees in " + a.City, nil
}

// model stands in for a language model, offline: llm/openai's is a real
// one.
func model(req llm.Request) scripted.Response {
	last := req.Context.Items[len(req.Context.Items)-1]
	switch {
	case last.Kind == llm.KindToolResult: // Output is what get_weather returned
		return scripted.Response{Text: "It's " + last.Output + "."}
	case strings.Contains(strings.ToLower(last.Text), "weather"):
		return scripted.Response{Text: "Let me look.", ToolCalls: []scripted.Call{{Name: "get_weather", Args: WeatherArgs{City: "Paris"}}}}
	}
	return scripted.Response{Text: "Ask me about the weather in Paris."}
}

func newAgent(ctx context.Context) (*runtime.Agent, func(), error) {
	return &runtime.Agent{
		Name:         "weather",
		Instructions: "You tell callers the weather. Be brief.",
		Tools:        []*tools.Tool{tools.MustNew("get_weather", "Current weather for a city.", weather, tools.WithEffect(tools.Read))},
		Model:        scripted.NewLLMFunc(model),
		Phrases:      []string{"what's the weather in paris", "thank you"}, // what the local recogniser listens for
	}, nil, nil
}

// The agent of the README's "Your own agent in Go": a tool, and a model
// that stands in for a real one. cli.Main(map[string]runtime.AgentFunc{
// "weather": newAgent}) gives a main every command for it (console, serve,
// phone calls, the simulator); here a session runs it with no transport,
// and Ask talks to it turn by turn. With no voice (TTS) the agent is heard
// as it writes.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent, _, err := newAgent(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := runtime.New(agent)
	if err != nil {
		fmt.Println(err)
		return
	}
	go s.Run(ctx)

	for _, text := range []string{"Hello?", "What's the weather in Paris?"} {
		// Ask returns once the agent is idle again: its tool call and the
		// answer that follows it.
		reply, err := s.Ask(ctx, text)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("caller:", text)
		fmt.Println("agent: ", reply.Heard)
		for _, c := range reply.Calls {
			fmt.Println("  call:", c.Tool, string(c.Args), c.State, c.Output)
		}
	}
	// Output:
	// caller: Hello?
	// agent:  Ask me about the weather in Paris.
	// caller: What's the weather in Paris?
	// agent:  Let me look. It's sunny and 21 degrees in Paris.
	//   call: get_weather {"city":"Paris"} succeeded sunny and 21 degrees in Paris
}
