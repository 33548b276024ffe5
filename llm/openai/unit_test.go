package openai

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/holdline/holdline/llm"
)

func ptr(i int) *int { return &i }

func TestIndexMapper(t *testing.T) {
	type delta struct {
		index *int
		id    string
	}
	tests := []struct {
		name   string
		deltas []delta
		want   []int
	}{
		{"given indexes pass through", []delta{{ptr(0), "a"}, {ptr(0), ""}, {ptr(1), "b"}, {ptr(1), ""}}, []int{0, 0, 1, 1}},
		{"indexes from 1 pass through", []delta{{ptr(1), "a"}, {ptr(1), ""}, {ptr(2), "b"}, {ptr(2), ""}}, []int{1, 1, 2, 2}},
		{"interleaved indexes", []delta{{ptr(0), "a"}, {ptr(1), "b"}, {ptr(0), ""}, {ptr(1), ""}}, []int{0, 1, 0, 1}},
		{"missing: new id starts a call", []delta{{nil, "a"}, {nil, ""}, {nil, ""}, {nil, "b"}, {nil, ""}}, []int{0, 0, 0, 1, 1}},
		{"missing: repeated id continues", []delta{{nil, "a"}, {nil, "a"}, {nil, "b"}, {nil, "b"}, {nil, "a"}}, []int{0, 0, 1, 1, 0}},
		{"missing: no id at all is one call", []delta{{nil, ""}, {nil, ""}}, []int{0, 0}},
		{"missing after given: next after highest", []delta{{ptr(3), "a"}, {nil, ""}, {nil, "b"}, {nil, ""}}, []int{3, 3, 4, 4}},
		{"missing from 1 then new id", []delta{{ptr(1), "a"}, {nil, "b"}}, []int{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m indexMapper
			m.reset()
			var got []int
			for _, d := range tt.deltas {
				got = append(got, m.index(d.index, d.id))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("indexes %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTakeWithoutIndex feeds provider chunks without indexes through the
// stream's decoding and checks the calls assemble.
func TestTakeWithoutIndex(t *testing.T) {
	s := &stream{}
	s.index.reset()
	chunk := func(tcs ...goopenai.ToolCall) goopenai.ChatCompletionStreamResponse {
		return goopenai.ChatCompletionStreamResponse{Choices: []goopenai.ChatCompletionStreamChoice{{Delta: goopenai.ChatCompletionStreamChoiceDelta{ToolCalls: tcs}}}}
	}
	fn := func(name, args string) goopenai.FunctionCall {
		return goopenai.FunctionCall{Name: name, Arguments: args}
	}
	s.take(chunk(goopenai.ToolCall{ID: "call_a", Function: fn("get_weather", `{"ci`)}))
	s.take(chunk(goopenai.ToolCall{Function: fn("", `ty":"Paris"}`)}))
	// Two calls in one chunk, as some providers send whole calls.
	s.take(chunk(goopenai.ToolCall{ID: "call_b", Function: fn("get_time", `{}`)}, goopenai.ToolCall{ID: "call_c", Function: fn("book", `{"n":`)}))
	s.take(chunk(goopenai.ToolCall{Function: fn("", `2}`)}))
	var acc llm.CallAccumulator
	for _, c := range s.pending {
		acc.Add(*c.ToolCall)
	}
	want := []llm.ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "call_b", Name: "get_time", Arguments: json.RawMessage(`{}`)},
		{ID: "call_c", Name: "book", Arguments: json.RawMessage(`{"n":2}`)},
	}
	if got := acc.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls\n got %+v\nwant %+v", got, want)
	}
}

func TestMessages(t *testing.T) {
	req := llm.Request{
		Instructions: "Be brief.",
		Context: llm.ChatContext{Items: []llm.Item{
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Table for two at 7?"},
			{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "Let me check."},
			{Kind: llm.KindToolCall, CallID: "c1", Name: "check", Arguments: json.RawMessage(`{"party":2}`)},
			{Kind: llm.KindToolCall, CallID: "c2", Name: "menu"},
			{Kind: llm.KindToolResult, CallID: "c1", Name: "check", Output: `{"free":true}`},
			{Kind: llm.KindToolResult, CallID: "c2", Name: "menu", Output: "error: down", IsError: true},
			{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "", Interrupted: true},
			{Kind: llm.KindToolCall, CallID: "c3", Name: "hold"},
			{Kind: llm.KindToolResult, CallID: "c3", Output: "ok"},
			{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "It's free.", Interrupted: true},
			{Kind: llm.KindMessage, Role: llm.RoleSystem, Text: "Note."},
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Book it."},
		}},
	}
	call := func(id, name, args string) goopenai.ToolCall {
		return goopenai.ToolCall{ID: id, Type: goopenai.ToolTypeFunction, Function: goopenai.FunctionCall{Name: name, Arguments: args}}
	}
	want := []goopenai.ChatCompletionMessage{
		{Role: "system", Content: "Be brief."},
		{Role: "user", Content: "Table for two at 7?"},
		{Role: "assistant", Content: "Let me check.", ToolCalls: []goopenai.ToolCall{call("c1", "check", `{"party":2}`), call("c2", "menu", `{}`)}},
		{Role: "tool", ToolCallID: "c1", Content: `{"free":true}`},
		{Role: "tool", ToolCallID: "c2", Content: "error: down"},
		// The empty interrupted message is dropped; its call stands alone.
		{Role: "assistant", ToolCalls: []goopenai.ToolCall{call("c3", "hold", `{}`)}},
		{Role: "tool", ToolCallID: "c3", Content: "ok"},
		{Role: "assistant", Content: "It's free."},
		{Role: "system", Content: "Note."},
		{Role: "user", Content: "Book it."},
	}
	if got := messages(req); !reflect.DeepEqual(got, want) {
		t.Errorf("messages\n got %+v\nwant %+v", got, want)
	}
}

func TestMessagesToolCallAfterToolResultIsNewMessage(t *testing.T) {
	req := llm.Request{Context: llm.ChatContext{Items: []llm.Item{
		{Kind: llm.KindToolCall, CallID: "a", Name: "f"},
		{Kind: llm.KindToolResult, CallID: "a", Output: "1"},
		{Kind: llm.KindToolCall, CallID: "b", Name: "f"},
	}}}
	got := messages(req)
	if len(got) != 3 || len(got[0].ToolCalls) != 1 || got[1].Role != "tool" || len(got[2].ToolCalls) != 1 || got[2].ToolCalls[0].ID != "b" {
		t.Errorf("messages %+v: want call, result, call", got)
	}
}

func TestTools(t *testing.T) {
	got := tools([]llm.ToolSpec{
		{Name: "check", Description: "Check a table.", Parameters: json.RawMessage(`{"type":"object","properties":{"party":{"type":"integer"}}}`)},
		{Name: "noargs"},
	})
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"function":{"name":"check","description":"Check a table.","parameters":{"type":"object","properties":{"party":{"type":"integer"}}}},"type":"function"},` +
		`{"function":{"name":"noargs","parameters":{"type":"object","properties":{}}},"type":"function"}]`
	if string(b) != want {
		t.Errorf("tools\n got %s\nwant %s", b, want)
	}
	if tools(nil) != nil {
		t.Error("no tools must send no tools field")
	}
}

func TestBackoff(t *testing.T) {
	m := &Model{cfg: config{retryBase: 100 * time.Millisecond, retryMax: time.Second}}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for range 50 {
			d := m.backoff(n, 0)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
	if d := m.backoff(0, 3*time.Second); d != time.Second {
		t.Errorf("Retry-After 3s gives %v, want the 1s cap", d)
	}
	if d := m.backoff(2, 250*time.Millisecond); d != 250*time.Millisecond {
		t.Errorf("Retry-After 250ms gives %v, want it exactly", d)
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"-1"}}, 0},
		{http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"150"}}, 150 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.h); got != tt.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
	date := http.Header{"Retry-After": {time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)}}
	if got := retryAfter(date); got < 8*time.Second || got > 10*time.Second {
		t.Errorf("Retry-After as a date 10s ahead gives %v", got)
	}
}
