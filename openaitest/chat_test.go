package openaitest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
)

func fast(r scripted.Response) scripted.Response {
	r.TokensPerSecond = math.Inf(1)
	return r
}

func post(t *testing.T, ctx context.Context, s *Server, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads an SSE body: the data of each event, and the error that
// ended the body (nil for a clean end).
func events(t *testing.T, body io.Reader) ([]string, error) {
	t.Helper()
	var out []string
	br := bufio.NewReader(body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				return out, nil
			}
			return out, err
		}
		if line == "\n" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not a data line: %q", line)
		}
		out = append(out, strings.TrimSuffix(data, "\n"))
		// Every event ends with a blank line.
		if blank, err := br.ReadString('\n'); err != nil || blank != "\n" {
			t.Fatalf("event %q not followed by a blank line (%q, %v)", data, blank, err)
		}
	}
}

type wireChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string            `json:"role"`
			Content   *string           `json:"content"`
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func decode(t *testing.T, data string) wireChunk {
	t.Helper()
	var c wireChunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("chunk %s: %v", data, err)
	}
	if c.Object != "chat.completion.chunk" || len(c.Choices) != 1 || c.ID == "" {
		t.Fatalf("chunk %s: not a chat.completion.chunk with one choice", data)
	}
	return c
}

const userHi = `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"Hi"}]}`

func TestChatStreamWireFormat(t *testing.T) {
	s := New(scripted.NewLLM(fast(scripted.Response{Text: "Hello there."})))
	defer s.Close()
	resp := post(t, t.Context(), s, userHi)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs, err := events(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 || evs[4] != "[DONE]" {
		t.Fatalf("events %q: want role, 2 words, finish, [DONE]", evs)
	}
	first := decode(t, evs[0])
	if d := first.Choices[0].Delta; d.Role != "assistant" || d.Content == nil || *d.Content != "" {
		t.Errorf("first chunk %s: want the role and empty content", evs[0])
	}
	var text string
	for _, e := range evs[1:3] {
		c := decode(t, e)
		if c.Choices[0].FinishReason != nil || c.Choices[0].Delta.Content == nil || c.Model != "gpt-x" {
			t.Errorf("content chunk %s", e)
		}
		text += *c.Choices[0].Delta.Content
	}
	if text != "Hello there." {
		t.Errorf("text %q", text)
	}
	last := decode(t, evs[3])
	if fr := last.Choices[0].FinishReason; fr == nil || *fr != "stop" {
		t.Errorf("final chunk %s: want finish_reason stop", evs[3])
	}
	if got := s.ChatRequests(); len(got) != 1 || got[0].Model != "gpt-x" || !got[0].Stream {
		t.Errorf("recorded %+v", got)
	}
	if got := s.Requests(); len(got) != 1 || got[0].Path != "/v1/chat/completions" || string(got[0].Body) != userHi {
		t.Errorf("recorded HTTP requests %+v", got)
	}
}

type toolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string  `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

func toolDeltas(t *testing.T, evs []string) (deltas []toolDelta, raw []string, finish string) {
	t.Helper()
	for _, e := range evs {
		if e == "[DONE]" {
			continue
		}
		c := decode(t, e)
		for _, tc := range c.Choices[0].Delta.ToolCalls {
			var d toolDelta
			if err := json.Unmarshal(tc, &d); err != nil {
				t.Fatal(err)
			}
			deltas = append(deltas, d)
			raw = append(raw, string(tc))
		}
		if fr := c.Choices[0].FinishReason; fr != nil {
			finish = *fr
		}
	}
	return deltas, raw, finish
}

var twoCalls = fast(scripted.Response{ToolCalls: []scripted.Call{
	{ID: "call_a", Name: "get_weather", Args: map[string]string{"city": "Zürich"}},
	{Name: "get_time", Args: map[string]string{"zone": "CET"}},
}})

func TestChatToolCallDeltas(t *testing.T) {
	s := New(scripted.NewLLM(twoCalls))
	defer s.Close()
	resp := post(t, t.Context(), s, userHi)
	evs, err := events(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	deltas, _, finish := toolDeltas(t, evs)
	if finish != "tool_calls" {
		t.Errorf("finish_reason %q", finish)
	}
	if len(deltas) != 4 {
		t.Fatalf("%d deltas, want a head and the arguments for each call", len(deltas))
	}
	h := deltas[0]
	if *h.Index != 0 || h.ID != "call_a" || h.Type != "function" || h.Function.Name != "get_weather" || h.Function.Arguments == nil || *h.Function.Arguments != "" {
		t.Errorf("head delta %+v", h)
	}
	if a := deltas[1]; *a.Index != 0 || a.ID != "" || a.Function.Name != "" || *a.Function.Arguments != `{"city":"Zürich"}` {
		t.Errorf("arguments delta %+v", a)
	}
	if h := deltas[2]; *h.Index != 1 || !strings.HasPrefix(h.ID, "call_") || h.Function.Name != "get_time" {
		t.Errorf("second call's head %+v: want index 1 and a generated id", h)
	}
}

func TestChatToolCallFaults(t *testing.T) {
	s := New(scripted.NewLLM(twoCalls, twoCalls))
	defer s.Close()
	s.QueueChatFault(ChatFault{ArgsFragment: 4, IndexBase: 1}, ChatFault{OmitIndex: true})

	evs, err := events(t, post(t, t.Context(), s, userHi).Body)
	if err != nil {
		t.Fatal(err)
	}
	deltas, _, _ := toolDeltas(t, evs)
	args := map[int]string{}
	for _, d := range deltas {
		if d.Index == nil {
			t.Fatalf("delta without index")
		}
		if a := *d.Function.Arguments; len(a) > 4 {
			t.Errorf("fragment %q longer than 4 bytes", a)
		}
		args[*d.Index] += *d.Function.Arguments
	}
	if !reflect.DeepEqual(args, map[int]string{1: `{"city":"Zürich"}`, 2: `{"zone":"CET"}`}) {
		t.Errorf("arguments by index %v", args)
	}

	evs, err = events(t, post(t, t.Context(), s, userHi).Body)
	if err != nil {
		t.Fatal(err)
	}
	_, raw, _ := toolDeltas(t, evs)
	for _, r := range raw {
		if strings.Contains(r, `"index"`) {
			t.Errorf("delta %s has an index", r)
		}
	}
}

func TestFragments(t *testing.T) {
	got := fragments(`{"a":"ü"}`, 6)
	if strings.Join(got, "") != `{"a":"ü"}` {
		t.Fatalf("fragments %q lose bytes", got)
	}
	for _, f := range got {
		if !json.Valid([]byte(`"`+strings.ReplaceAll(f, `"`, `\"`)+`"`)) || len(f) > 6 {
			t.Errorf("fragment %q cuts a character or is too long", f)
		}
	}
	if got := fragments("ab", 0); !reflect.DeepEqual(got, []string{"ab"}) {
		t.Errorf("fragments(n=0) %q", got)
	}
	if got := fragments("üü", 1); !reflect.DeepEqual(got, []string{"ü", "ü"}) {
		t.Errorf("fragments(n=1) %q: want whole runes", got)
	}
}

func TestChatRequestConversion(t *testing.T) {
	brain := scripted.NewLLM(fast(scripted.Response{Text: "ok"}))
	s := New(brain)
	defer s.Close()
	body := `{"model":"m","stream":true,
	  "tools":[{"type":"function","function":{"name":"check","description":"Check.","parameters":{"type":"object"}}}],
	  "messages":[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":[{"type":"text","text":"Two "},{"type":"text","text":"at 7?"}]},
		{"role":"assistant","content":"Checking.","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"check","arguments":"{\"party\":2}"}},
			{"id":"c2","type":"function","function":{"name":"check","arguments":"{\"party\":3}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"free"},
		{"role":"tool","tool_call_id":"c2","content":"full"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c3","type":"function","function":{"name":"check","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c3","content":"ok"},
		{"role":"system","content":"Later note."},
		{"role":"user","content":"Thanks"}]}`
	resp := post(t, t.Context(), s, body)
	if _, err := events(t, resp.Body); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	want := llm.Request{
		Instructions: "Be brief.",
		Tools:        []llm.ToolSpec{{Name: "check", Description: "Check.", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Context: llm.ChatContext{Items: []llm.Item{
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Two at 7?"},
			{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "Checking."},
			{Kind: llm.KindToolCall, CallID: "c1", Name: "check", Arguments: json.RawMessage(`{"party":2}`)},
			{Kind: llm.KindToolCall, CallID: "c2", Name: "check", Arguments: json.RawMessage(`{"party":3}`)},
			{Kind: llm.KindToolResult, CallID: "c1", Name: "check", Output: "free"},
			{Kind: llm.KindToolResult, CallID: "c2", Name: "check", Output: "full"},
			{Kind: llm.KindToolCall, CallID: "c3", Name: "check", Arguments: json.RawMessage(`{}`)},
			{Kind: llm.KindToolResult, CallID: "c3", Name: "check", Output: "ok"},
			{Kind: llm.KindMessage, Role: llm.RoleSystem, Text: "Later note."},
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Thanks"},
		}},
	}
	got := brain.Requests()
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("brain asked\n%+v\nwant\n%+v", got, want)
	}
	cr := s.ChatRequests()
	if len(cr) != 1 || len(cr[0].Messages) != 9 || cr[0].Messages[1].Content != "Two at 7?" || len(cr[0].Messages[2].ToolCalls) != 2 {
		t.Errorf("recorded messages %+v", cr)
	}
}

func TestChatRejectsWhatOpenAIRejects(t *testing.T) {
	s := New(scripted.NewLLM())
	defer s.Close()
	tests := []struct{ name, messages, param string }{
		{"orphan tool message", `[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c1","content":"r"}]`, "messages.[1].role"},
		{"unanswered call", `[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"x"}]`, "messages.[0].role"},
		{"unanswered call at the end", `[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`, "messages.[0].role"},
		{"wrong tool_call_id", `[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c9","content":"r"}]`, "messages.[1].tool_call_id"},
		{"assistant without content", `[{"role":"assistant"}]`, "messages.[0].content"},
		{"no messages", `[]`, "messages"},
		{"bad role", `[{"role":"robot","content":"x"}]`, "messages.[0].role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, t.Context(), s, `{"model":"m","stream":true,"messages":`+tt.messages+`}`)
			var body struct {
				Error struct {
					Type, Message string
					Param         *string
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 400 || body.Error.Type != "invalid_request_error" || body.Error.Param == nil || *body.Error.Param != tt.param {
				t.Errorf("status %d, error %+v (param %v), want 400 on %s", resp.StatusCode, body.Error, body.Error.Param, tt.param)
			}
		})
	}
	if n := len(s.ChatRequests()); n != len(tests) {
		t.Errorf("%d recorded, want every parsed request", n)
	}
}

func TestChatStatusFaults(t *testing.T) {
	s := New(scripted.NewLLM(fast(scripted.Response{Text: "ok"})))
	defer s.Close()
	s.QueueChatFault(ChatFault{Status: 429, RetryAfter: "2"}, ChatFault{Status: 500, Message: "boom"})
	resp := post(t, t.Context(), s, userHi)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(string(b), `"code":"rate_limit_exceeded"`) {
		t.Errorf("first: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	resp = post(t, t.Context(), s, userHi)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.Contains(string(b), `"message":"boom"`) || !strings.Contains(string(b), `"type":"server_error"`) {
		t.Errorf("second: %d %s", resp.StatusCode, b)
	}
	resp = post(t, t.Context(), s, userHi)
	if evs, err := events(t, resp.Body); resp.StatusCode != 200 || err != nil || evs[len(evs)-1] != "[DONE]" {
		t.Errorf("third: %d %v %q: the queue is used up, so it behaves", resp.StatusCode, err, evs)
	}
}

func TestChatFailMidStream(t *testing.T) {
	s := New(scripted.NewLLM(fast(scripted.Response{Text: "a b c"}), fast(scripted.Response{Text: "a b c"}), fast(scripted.Response{Text: "a"})))
	defer s.Close()
	s.QueueChatFault(
		ChatFault{Fail: ChatFailEvent, FailAfter: 2, Message: "overloaded"},
		ChatFault{Fail: ChatFailDrop, FailAfter: 1},
		ChatFault{Fail: ChatFailEvent, FailAfter: 5}, // more than the answer has
	)
	evs, err := events(t, post(t, t.Context(), s, userHi).Body)
	if err != nil || len(evs) != 4 || !strings.HasPrefix(evs[3], `{"error":{`) || !strings.Contains(evs[3], "overloaded") {
		t.Errorf("event failure: %q, %v; want role, 2 chunks, error event", evs, err)
	}
	evs, err = events(t, post(t, t.Context(), s, userHi).Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(evs) != 2 {
		t.Errorf("drop: %q, %v; want role, 1 chunk, then a truncated body", evs, err)
	}
	evs, err = events(t, post(t, t.Context(), s, userHi).Body)
	if err != nil || len(evs) != 3 || !strings.HasPrefix(evs[2], `{"error":`) {
		t.Errorf("late failure: %q, %v; want the error in place of the end", evs, err)
	}
}

func TestChatDelaysEndWhenClientLeaves(t *testing.T) {
	for _, f := range []ChatFault{{FirstTokenDelay: 5 * time.Second}, {HeaderDelay: 5 * time.Second}} {
		s := New(scripted.NewLLM(fast(scripted.Response{Text: "late"})))
		s.QueueChatFault(f)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(userHi))
			req.Header.Set("Authorization", "Bearer "+APIKey)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		deadline := time.Now().Add(2 * time.Second)
		for s.chat.running() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
		for s.chat.running() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := s.chat.running(); n != 0 {
			t.Errorf("%+v: handler still running after the client left", f)
		}
		s.Close()
	}
}

func TestChatNonStreaming(t *testing.T) {
	s := New(scripted.NewLLM(fast(scripted.Response{Text: "Sure.", ToolCalls: []scripted.Call{{ID: "c1", Name: "f", Args: map[string]int{"n": 1}}}})))
	defer s.Close()
	resp := post(t, t.Context(), s, `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`)
	var body struct {
		Object  string
		Choices []struct {
			Message struct {
				Role, Content string
				ToolCalls     []ChatToolCall `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Object != "chat.completion" || len(body.Choices) != 1 {
		t.Fatalf("%+v", body)
	}
	c := body.Choices[0]
	want := []ChatToolCall{{ID: "c1", Type: "function", Function: ChatFunctionCall{Name: "f", Arguments: `{"n":1}`}}}
	if c.Message.Content != "Sure." || c.FinishReason != "tool_calls" || !reflect.DeepEqual(c.Message.ToolCalls, want) {
		t.Errorf("%+v", c)
	}
}

func TestChatBrainFailure(t *testing.T) {
	s := New(scripted.NewLLM(fast(scripted.Response{Text: "a b", Err: errors.New("brain hurts"), ErrAfter: 1})))
	defer s.Close()
	evs, err := events(t, post(t, t.Context(), s, userHi).Body)
	if err != nil || len(evs) != 3 || !strings.Contains(evs[2], "brain hurts") {
		t.Errorf("%q, %v: want the brain's error as an error event", evs, err)
	}
	// Exhausted script: the brain refuses to start.
	resp := post(t, t.Context(), s, userHi)
	if resp.StatusCode != 500 {
		t.Errorf("status %d", resp.StatusCode)
	}
}
