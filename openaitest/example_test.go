package openaitest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/llm/openai"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/scripted"
)

// A test of an OpenAI client against a provider on a bad day: the first
// request is refused with 429, and the retry's answer splits the tool
// call's arguments mid-JSON and numbers the call from 1. The client under
// test, llm/openai, retries and puts the call back together.
func Example() {
	// The brain answers every request; scripted.LLM plays one answer per
	// request the brain is asked (a refused request does not reach it).
	brain := scripted.NewLLM(scripted.Response{
		Text:            "Booking a table for two.",
		ToolCalls:       []scripted.Call{{ID: "call_1", Name: "book_table", Args: map[string]int{"party": 2}}},
		TokensPerSecond: math.Inf(1),
	})
	srv := openaitest.New(brain)
	defer srv.Close()
	srv.QueueChatFault(
		openaitest.ChatFault{Status: 429},
		openaitest.ChatFault{ArgsFragment: 3, IndexBase: 1},
	)

	// Point the client at the server: its URL and its key.
	m, err := openai.New(openai.WithBaseURL(srv.URL()), openai.WithAPIKey(openaitest.APIKey),
		openai.WithRetries(2, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	s, err := m.Stream(context.Background(), llm.Request{
		Context: llm.ChatContext{Items: []llm.Item{{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "A table for two, please."}}},
		Tools:   []llm.ToolSpec{{Name: "book_table", Parameters: []byte(`{"type":"object","properties":{"party":{"type":"integer"}}}`)}},
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
		} else if err != nil {
			log.Fatal(err)
		}
		fmt.Print(c.Text)
		if c.ToolCall != nil {
			calls.Add(*c.ToolCall)
		}
	}
	fmt.Println()
	for _, c := range calls.Calls() {
		fmt.Println(c.ID, c.Name, string(c.Arguments))
	}

	// What the server saw: both requests, as the client sent them.
	for _, r := range srv.ChatRequests() {
		fmt.Println(r.Model, r.Stream, r.Messages[0].Role, r.Messages[0].Content)
	}
	// Output:
	// Booking a table for two.
	// call_1 book_table {"party":2}
	// gpt-4o-mini true user A table for two, please.
	// gpt-4o-mini true user A table for two, please.
}

// A stream that fails after its first words: the client delivers what came
// and then an error, and does not retry, since a voice agent may already
// have spoken those words.
func ExampleServer_QueueChatFault() {
	srv := openaitest.New(scripted.NewLLM(scripted.Response{
		Text:            "Your table is booked for seven.",
		TokensPerSecond: math.Inf(1),
	}))
	defer srv.Close()
	srv.QueueChatFault(openaitest.ChatFault{
		Fail:      openaitest.ChatFailEvent,
		FailAfter: 2,
		Message:   "The server had an error while processing your request.",
	})

	m, err := openai.New(openai.WithBaseURL(srv.URL()), openai.WithAPIKey(openaitest.APIKey))
	if err != nil {
		log.Fatal(err)
	}
	s, err := m.Stream(context.Background(), llm.Request{
		Context: llm.ChatContext{Items: []llm.Item{{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Is my table booked?"}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	var text string
	for {
		c, err := s.Recv()
		if err != nil {
			fmt.Printf("delivered %q\n", text)
			fmt.Printf("then: %v (EOF: %v)\n", err, errors.Is(err, io.EOF))
			break
		}
		text += c.Text
	}
	fmt.Println(len(srv.ChatRequests()), "request")
	// Output:
	// delivered "Your table "
	// then: openai: chat completion stream: error, The server had an error while processing your request. (EOF: false)
	// 1 request
}
