package openai_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"math"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/llm/openai"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/scripted"
)

func Example() {
	// A fake OpenAI server whose answers come from a scripted model; in
	// production, New reads OPENAI_API_KEY and talks to api.openai.com.
	brain := scripted.NewLLM(scripted.Response{
		Text:            "Let me check the weather in Paris.",
		ToolCalls:       []scripted.Call{{ID: "call_1", Name: "get_weather", Args: map[string]string{"city": "Paris"}}},
		TokensPerSecond: math.Inf(1),
	})
	srv := openaitest.New(brain)
	defer srv.Close()

	m, err := openai.New(openai.WithBaseURL(srv.URL()), openai.WithAPIKey(openaitest.APIKey))
	if err != nil {
		log.Fatal(err)
	}
	s, err := m.Stream(context.Background(), llm.Request{
		Instructions: "You are a weather assistant.",
		Context: llm.ChatContext{Items: []llm.Item{
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Is it raining in Paris?"},
		}},
		Tools: []llm.ToolSpec{{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	var calls llm.CallAccumulator
	for {
		c, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(c.Text) // text arrives word by word
		if c.ToolCall != nil {
			calls.Add(*c.ToolCall) // arguments arrive in fragments
		}
	}
	fmt.Println()
	for _, c := range calls.Calls() {
		fmt.Println(c.ID, c.Name, string(c.Arguments))
	}
	// Output:
	// Let me check the weather in Paris.
	// call_1 get_weather {"city":"Paris"}
}
