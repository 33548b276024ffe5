package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/holdline/holdline/llm"
)

func sampleContext() llm.ChatContext {
	return llm.ChatContext{Items: []llm.Item{
		{Kind: llm.KindMessage, Role: llm.RoleSystem, Text: "Be brief."},
		{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Weather in Paris?"},
		{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "Let me", Interrupted: true},
		{Kind: llm.KindToolCall, CallID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{Kind: llm.KindToolResult, CallID: "c1", Name: "get_weather", Output: "sunny, 21C"},
		{Kind: llm.KindToolCall, CallID: "c2", Name: "book", Arguments: json.RawMessage(`{}`)},
		{Kind: llm.KindToolResult, CallID: "c2", Name: "book", Output: "no tables", IsError: true},
		{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "It is sunny."},
	}}
}

func TestChatContextString(t *testing.T) {
	want := "system: Be brief.\n" +
		"user: Weather in Paris?\n" +
		"assistant (interrupted): Let me\n" +
		`tool_call get_weather {"city":"Paris"} [c1]` + "\n" +
		"tool_result get_weather: sunny, 21C [c1]\n" +
		"tool_call book {} [c2]\n" +
		"tool_result book (error): no tables [c2]\n" +
		"assistant: It is sunny.\n"
	if got := sampleContext().String(); got != want {
		t.Fatalf("String():\n got:\n%s\n want:\n%s", got, want)
	}
	if got := (llm.ChatContext{}).String(); got != "" {
		t.Fatalf("empty context String() = %q, want empty", got)
	}
}

func TestChatContextCloneSharesNothing(t *testing.T) {
	orig := sampleContext()
	before := orig.String()

	clone := orig.Clone()
	if clone.String() != before {
		t.Fatalf("clone differs:\n%s\nvs\n%s", clone.String(), before)
	}

	// Mutating the clone's argument bytes in place leaves the original alone.
	for i := range clone.Items {
		for j := range clone.Items[i].Arguments {
			clone.Items[i].Arguments[j] = 'X'
		}
	}
	// Growing an argument slice within its capacity must not show through either.
	a := clone.Items[3].Arguments
	_ = append(a[:1], "ZZZ"...)
	// Item fields and the slice itself are independent.
	clone.Items[1].Text = "changed"
	clone.Items[2].Interrupted = false
	clone.Items[6].IsError = false
	clone.Items = append(clone.Items[:2], llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "injected"})

	if got := orig.String(); got != before {
		t.Fatalf("original changed after mutating clone:\n got:\n%s\n want:\n%s", got, before)
	}
	if string(orig.Items[3].Arguments) != `{"city":"Paris"}` {
		t.Fatalf("original arguments changed: %s", orig.Items[3].Arguments)
	}
	if len(orig.Items) != 8 || orig.Items[2].Text != "Let me" {
		t.Fatalf("original items changed: %+v", orig.Items)
	}

	// And the other way round: the original's bytes do not reach the clone.
	clone2 := orig.Clone()
	orig.Items[5].Arguments[0] = '['
	if string(clone2.Items[5].Arguments) != `{}` {
		t.Fatalf("clone arguments changed with original: %s", clone2.Items[5].Arguments)
	}
}

func TestChatContextCloneEmpty(t *testing.T) {
	c := llm.ChatContext{}.Clone()
	if len(c.Items) != 0 {
		t.Fatalf("clone of empty context has %d items", len(c.Items))
	}
	c.Items = append(c.Items, llm.Item{Kind: llm.KindMessage})
}

func TestChatContextJSONFieldNames(t *testing.T) {
	b, err := json.Marshal(llm.ChatContext{Items: []llm.Item{
		{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "hi"},
		{Kind: llm.KindToolCall, CallID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)},
		{Kind: llm.KindToolResult, CallID: "c1", Name: "f", Output: "err", IsError: true},
		{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "cut", Interrupted: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"items":[` +
		`{"kind":"message","role":"user","text":"hi"},` +
		`{"kind":"tool_call","call_id":"c1","name":"f","arguments":{"a":1}},` +
		`{"kind":"tool_result","call_id":"c1","name":"f","output":"err","is_error":true},` +
		`{"kind":"message","role":"assistant","text":"cut","interrupted":true}]}`
	if string(b) != want {
		t.Fatalf("JSON:\n got  %s\n want %s", b, want)
	}
}
