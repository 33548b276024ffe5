package realtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"math"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/llm/realtime"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/scripted"
)

// A Client is an agent's model: one Stream per response, whose chunks are
// the model's own audio and its transcript, and the function calls it
// made. The session plays the audio and runs the calls; here they are
// counted and printed. A fake Realtime server (package openaitest) stands
// in for OpenAI's; in production New reads OPENAI_API_KEY.
func ExampleClient_Stream() {
	srv := openaitest.New(scripted.NewLLM(
		scripted.Response{Text: "Let me book that.", TokensPerSecond: math.Inf(1),
			ToolCalls: []scripted.Call{{ID: "call_1", Name: "book_table", Args: map[string]int{"party": 2}}}},
	))
	defer srv.Close()
	srv.SetRealtimeAudioPerChar(40 * time.Millisecond)

	c, err := realtime.New(realtime.WithBaseURL(srv.URL()), realtime.WithAPIKey(openaitest.APIKey))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("voiced:", c.Voiced())

	s, err := c.Stream(context.Background(), llm.Request{
		Instructions: "You book tables.",
		Context:      llm.ChatContext{Items: []llm.Item{{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "A table for two."}}},
		Tools: []llm.ToolSpec{{Name: "book_table", Description: "Books a table.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"party":{"type":"integer"}}}`)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	answer, err := llm.ReadAll(s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("said %q in %v of audio\n", answer.Transcript, answer.Audio)
	for _, call := range answer.Calls {
		fmt.Println("called", call.ID, call.Name, string(call.Arguments))
	}
	fmt.Println("protocol violations:", len(srv.RealtimeViolations()))
	// Output:
	// voiced: true
	// said "Let me book that." in 680ms of audio
	// called call_1 book_table {"party":2}
	// protocol violations: 0
}
