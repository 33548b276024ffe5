package openaitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/holdline/holdline/llm"
)

// maxChatBody bounds a chat request body; the real API's limit is larger,
// but a test that sends more than this has a bug.
const maxChatBody = 8 << 20

// ChatFault makes one chat-completion request misbehave the way real
// providers do. The zero value is a well-behaved answer. Faults are queued
// with [Server.QueueChatFault] and consumed one per request, in order.
type ChatFault struct {
	// Status, if non-zero, answers with this HTTP status and an OpenAI
	// error body instead of a completion; the brain is not asked.
	Status int
	// RetryAfter, if set, is sent as the Retry-After header with Status
	// ("1" for one second, as OpenAI sends on 429).
	RetryAfter string
	// Message, Type and Code fill the error body of Status or of a
	// ChatFailEvent; empty ones get defaults that follow the status.
	Message, Type, Code string

	// HeaderDelay holds the response headers back, as a provider that is
	// slow to accept the request. It ends early if the client goes away.
	HeaderDelay time.Duration
	// FirstTokenDelay is waited after the 200 headers are flushed and
	// before the first chunk: time to first token on an open stream. It
	// ends early if the client goes away.
	FirstTokenDelay time.Duration

	// ArgsFragment, if positive, streams tool-call arguments in fragments
	// of at most this many bytes (cut on rune boundaries, so mid-JSON but
	// never mid-character). Zero sends the arguments in one fragment after
	// the delta that names the call.
	ArgsFragment int
	// IndexBase is added to every tool-call index (1 reproduces providers
	// whose indexes start at 1).
	IndexBase int
	// OmitIndex leaves the index out of every tool-call delta.
	OmitIndex bool

	// Fail, if set, ends the stream abnormally once FailAfter chunks
	// carrying content or tool-call deltas have been sent (the opening
	// role-only chunk does not count). If the answer has fewer chunks, the
	// failure comes in place of the final chunk.
	Fail      ChatFailure
	FailAfter int
}

// ChatFailure is how a chat stream fails mid-way.
type ChatFailure int

// Ways a stream can fail.
const (
	// ChatFailNone: no failure.
	ChatFailNone ChatFailure = iota
	// ChatFailEvent sends `data: {"error":{...}}` and ends the response,
	// as OpenAI does when a generation fails after the headers.
	ChatFailEvent
	// ChatFailDrop cuts the connection without ending the response.
	ChatFailDrop
)

// ChatRequest is one chat-completion request as the server parsed it.
type ChatRequest struct {
	// Model and Stream are the request's fields of those names.
	Model  string
	Stream bool
	// Messages are the request's messages, in order.
	Messages []ChatMessage
	// Tools are the request's function tools.
	Tools []llm.ToolSpec
	// LLM is the request as the brain was (or would have been) asked.
	LLM llm.Request

	// Received is when the request arrived.
	Received time.Time
	// FirstToken is when the answer's first token (text or a tool call)
	// was sent; zero if none was. It is filled in, with Answer, when the
	// answer has ended.
	FirstToken time.Time
	// Answer is what the server sent back, as far as it went: the
	// assistant's text and tool calls (Role "assistant"; empty for an
	// error answer).
	Answer ChatMessage
}

// ChatMessage is one message of a chat-completion request. Content holds
// the text; a content array has its text parts joined.
type ChatMessage struct {
	Role       string         `json:"role"`                   // system, developer, user, assistant or tool
	Content    string         `json:"content,omitempty"`      // the text
	Name       string         `json:"name,omitempty"`         // the participant's name, if given
	ToolCalls  []ChatToolCall `json:"tool_calls,omitempty"`   // an assistant message's calls
	ToolCallID string         `json:"tool_call_id,omitempty"` // a tool message's call
}

// ChatToolCall is a tool call of an assistant message.
type ChatToolCall struct {
	ID       string           `json:"id"`       // the call's id, which its tool message names
	Type     string           `json:"type"`     // "function"
	Function ChatFunctionCall `json:"function"` // the function and its arguments
}

// ChatFunctionCall names a function and carries its JSON arguments.
type ChatFunctionCall struct {
	Name      string `json:"name"`      // the function called
	Arguments string `json:"arguments"` // its arguments, a JSON object as text
}

type chatState struct {
	mu       sync.Mutex
	faults   []ChatFault
	requests []ChatRequest
	serial   int // numbers completions and generated call ids
	inflight int // handlers running, so tests can see them end
}

// QueueChatFault queues faults for the next chat requests, one per request
// in order; requests after the queue runs dry behave.
func (s *Server) QueueChatFault(faults ...ChatFault) {
	s.chat.mu.Lock()
	s.chat.faults = append(s.chat.faults, faults...)
	s.chat.mu.Unlock()
}

// ChatRequests returns the chat requests received so far, in order,
// including rejected ones that were valid JSON.
func (s *Server) ChatRequests() []ChatRequest {
	s.chat.mu.Lock()
	defer s.chat.mu.Unlock()
	out := make([]ChatRequest, len(s.chat.requests))
	for i, r := range s.chat.requests {
		r.Messages = append([]ChatMessage(nil), r.Messages...)
		r.Tools = append([]llm.ToolSpec(nil), r.Tools...)
		r.LLM.Context = r.LLM.Context.Clone()
		r.Answer.ToolCalls = append([]ChatToolCall(nil), r.Answer.ToolCalls...)
		out[i] = r
	}
	return out
}

func (s *Server) routeChat(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
}

// begin pops the request's fault and numbers it.
func (c *chatState) begin() (ChatFault, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var f ChatFault
	if len(c.faults) > 0 {
		f = c.faults[0]
		c.faults = c.faults[1:]
	}
	c.serial++
	c.inflight++
	return f, c.serial
}

func (c *chatState) end() {
	c.mu.Lock()
	c.inflight--
	c.mu.Unlock()
}

func (c *chatState) running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight
}

// The request as sent on the wire; content may be a string, null or an
// array of parts.
type wireChatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []wireMessage `json:"messages"`
	Tools    []wireTool    `json:"tools"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []ChatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// badRequest is a 400 the real API would send.
type badRequest struct{ param, msg string }

func (e *badRequest) Error() string { return e.msg }

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	received := time.Now()
	latency := s.currentLatency()
	fault, serial := s.chat.begin()
	defer s.chat.end()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxChatBody))
	s.record(Request{Method: r.Method, Path: r.URL.Path, Body: body})
	if err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "could not read the request body: "+err.Error())
		return
	}
	var wire wireChatRequest
	if err := json.Unmarshal(body, &wire); err != nil {
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request. ("+err.Error()+")")
		return
	}
	cr, err := parseChat(wire)
	cr.Received = received
	s.chat.mu.Lock()
	s.chat.requests = append(s.chat.requests, cr)
	index := len(s.chat.requests) - 1
	s.chat.mu.Unlock()
	if err != nil {
		var bad *badRequest
		if errors.As(err, &bad) {
			writeParamError(w, bad.param, bad.msg)
		} else {
			WriteError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		}
		return
	}

	ctx := r.Context()
	if !sleepCtx(ctx, fault.HeaderDelay) {
		return
	}
	if fault.Status != 0 {
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		typ, code, msg := fault.errorBody(fault.Status)
		WriteError(w, fault.Status, typ, code, msg)
		return
	}

	stream, err := s.brain.Stream(ctx, cr.LLM)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "server_error", "", "The model failed: "+err.Error())
		return
	}
	defer stream.Close()

	a := &answer{
		w:       w,
		ctx:     ctx,
		fault:   fault,
		id:      "chatcmpl-openaitest" + strconv.Itoa(serial),
		model:   wire.Model,
		serial:  serial,
		latency: latency,
		// A fault's delays come on top of the latency.
		origin: received.Add(fault.HeaderDelay + fault.FirstTokenDelay),
		// Counted as OpenAI's tokenizer roughly would: four bytes a token.
		promptTokens: max(len(body)/4, 1),
		usage:        wire.StreamOptions != nil && wire.StreamOptions.IncludeUsage,
	}
	defer s.recordAnswer(index, a)
	if !wire.Stream {
		a.complete(stream)
		return
	}
	a.stream(stream)
}

// recordAnswer fills in what a's answer sent on request i's record.
func (s *Server) recordAnswer(i int, a *answer) {
	s.chat.mu.Lock()
	defer s.chat.mu.Unlock()
	r := &s.chat.requests[i]
	r.FirstToken = a.first
	r.Answer = ChatMessage{Role: "assistant", Content: a.text.String(), ToolCalls: a.calls}
}

// parseChat converts a wire request into what the brain is asked, checking
// what the real API checks about messages.
func parseChat(wire wireChatRequest) (ChatRequest, error) {
	cr := ChatRequest{Model: wire.Model, Stream: wire.Stream}
	for _, t := range wire.Tools {
		cr.Tools = append(cr.Tools, llm.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	cr.LLM.Tools = cr.Tools
	var firstErr error
	fail := func(param, msg string) {
		if firstErr == nil {
			firstErr = &badRequest{param, msg}
		}
	}
	if wire.Model == "" {
		fail("model", "you must provide a model parameter")
	}
	if len(wire.Messages) == 0 {
		fail("messages", "[] is too short - 'messages'")
	}
	// The tool calls of the latest assistant message, while tool messages
	// follow it: id -> function name.
	var run map[string]string
	var unanswered []string // ids of run not answered yet
	unansweredAt := 0
	for i, wm := range wire.Messages {
		text, err := contentText(wm.Content)
		if err != nil {
			fail(fmt.Sprintf("messages.[%d].content", i), err.Error())
		}
		m := ChatMessage{Role: wm.Role, Content: text, Name: wm.Name, ToolCalls: wm.ToolCalls, ToolCallID: wm.ToolCallID}
		cr.Messages = append(cr.Messages, m)
		null := len(wm.Content) == 0 || string(wm.Content) == "null"
		if wm.Role != "tool" {
			if len(unanswered) > 0 {
				fail(fmt.Sprintf("messages.[%d].role", unansweredAt),
					"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(unanswered, ", "))
			}
			run, unanswered = nil, nil
		}
		items := &cr.LLM.Context.Items
		switch wm.Role {
		case "system", "developer":
			if null {
				fail(fmt.Sprintf("messages.[%d].content", i), "Invalid value for 'content': expected a string, got null.")
			}
			if i == 0 {
				cr.LLM.Instructions = text
				continue
			}
			*items = append(*items, llm.Item{Kind: llm.KindMessage, Role: llm.RoleSystem, Text: text})
		case "user":
			if null {
				fail(fmt.Sprintf("messages.[%d].content", i), "Invalid value for 'content': expected a string, got null.")
			}
			*items = append(*items, llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: text})
		case "assistant":
			if null && len(wm.ToolCalls) == 0 {
				fail(fmt.Sprintf("messages.[%d].content", i), "Invalid value for 'content': expected a string, got null.")
			}
			if text != "" {
				*items = append(*items, llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: text})
			}
			if len(wm.ToolCalls) > 0 {
				run, unansweredAt = map[string]string{}, i
			}
			for j, tc := range wm.ToolCalls {
				if tc.ID == "" {
					fail(fmt.Sprintf("messages.[%d].tool_calls.[%d].id", i, j), fmt.Sprintf("Missing required parameter: 'messages.[%d].tool_calls.[%d].id'.", i, j))
				}
				run[tc.ID] = tc.Function.Name
				unanswered = append(unanswered, tc.ID)
				*items = append(*items, llm.Item{Kind: llm.KindToolCall, CallID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
			}
		case "tool":
			name, ok := run[wm.ToolCallID]
			switch {
			case wm.ToolCallID == "":
				fail(fmt.Sprintf("messages.[%d].tool_call_id", i), "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.")
			case run == nil:
				fail(fmt.Sprintf("messages.[%d].role", i), "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			case !ok:
				fail(fmt.Sprintf("messages.[%d].tool_call_id", i), fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", wm.ToolCallID))
			}
			for j, id := range unanswered {
				if id == wm.ToolCallID {
					unanswered = append(unanswered[:j:j], unanswered[j+1:]...)
					break
				}
			}
			*items = append(*items, llm.Item{Kind: llm.KindToolResult, CallID: wm.ToolCallID, Name: name, Output: text})
		default:
			fail(fmt.Sprintf("messages.[%d].role", i), fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", wm.Role))
		}
	}
	if len(unanswered) > 0 {
		fail(fmt.Sprintf("messages.[%d].role", unansweredAt),
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(unanswered, ", "))
	}
	return cr, firstErr
}

// contentText reads a message content: a string, null, or an array of
// parts whose text parts are joined.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("Invalid type for 'content': expected one of a string or array of objects.")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

func writeParamError(w http.ResponseWriter, param, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(`{"error":{"message":` + quote(msg) + `,"type":"invalid_request_error","param":` + quote(param) + `,"code":null}}`))
}

// errorBody fills the defaults of an error body for status.
func (f ChatFault) errorBody(status int) (typ, code, msg string) {
	typ, code, msg = f.Type, f.Code, f.Message
	switch {
	case status == http.StatusTooManyRequests:
		typ = orDefault(typ, "requests")
		code = orDefault(code, "rate_limit_exceeded")
		msg = orDefault(msg, "Rate limit reached for requests. Please try again in 1s.")
	case status >= 500 || status == 0:
		typ = orDefault(typ, "server_error")
		msg = orDefault(msg, "The server had an error while processing your request. Sorry about that!")
	default:
		typ = orDefault(typ, "invalid_request_error")
		msg = orDefault(msg, http.StatusText(status))
	}
	return typ, code, msg
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// sleepCtx waits d and reports whether the client is still there.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// answer writes one completion from the brain's stream.
type answer struct {
	w      http.ResponseWriter
	ctx    context.Context
	fault  ChatFault
	id     string
	model  string
	serial int

	// latency paces the tokens, from origin: when the request arrived,
	// plus the fault's delays.
	latency Latency
	origin  time.Time

	created int64
	sent    int  // content and tool-call chunks sent
	opened  bool // role chunk sent

	// usage: the request asked for the token counts
	// (stream_options.include_usage); they go in a last chunk of their
	// own, with no choices, as OpenAI sends them.
	usage        bool
	promptTokens int

	// What was sent, for the request's record.
	first time.Time
	text  strings.Builder
	calls []ChatToolCall
}

// paced reports whether the answer is cut into tokens sent one at a time.
func (a *answer) paced() bool { return a.latency.ChatTokenInterval > 0 }

// due is when the answer's token i (from 0) may leave.
func (a *answer) due(i int) time.Time {
	return a.origin.Add(a.latency.ChatFirstToken + time.Duration(i)*a.latency.ChatTokenInterval)
}

// Wire shapes of a streamed chunk.
type (
	chunkJSON struct {
		ID                string        `json:"id"`
		Object            string        `json:"object"`
		Created           int64         `json:"created"`
		Model             string        `json:"model"`
		SystemFingerprint string        `json:"system_fingerprint"`
		Choices           []chunkChoice `json:"choices"`
		Usage             *usageJSON    `json:"usage,omitempty"`
	}
	usageJSON struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	chunkChoice struct {
		Index        int        `json:"index"`
		Delta        chunkDelta `json:"delta"`
		Logprobs     any        `json:"logprobs"`
		FinishReason *string    `json:"finish_reason"`
	}
	chunkDelta struct {
		Role      string          `json:"role,omitempty"`
		Content   *string         `json:"content,omitempty"`
		ToolCalls []toolCallDelta `json:"tool_calls,omitempty"`
	}
	toolCallDelta struct {
		Index    *int          `json:"index,omitempty"`
		ID       string        `json:"id,omitempty"`
		Type     string        `json:"type,omitempty"`
		Function functionDelta `json:"function"`
	}
	functionDelta struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
)

// errStop ends an answer whose client is gone or whose fault fired.
var errStop = errors.New("openaitest: stream stopped")

// collect reads the brain's stream: text goes to onText as it comes, tool
// calls are assembled, as a provider does before it streams them out.
func (a *answer) collect(stream llm.Stream, onText func(string) error) ([]llm.ToolCall, error) {
	var acc llm.CallAccumulator
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if c.Text != "" {
			if err := onText(c.Text); err != nil {
				return nil, err
			}
		}
		if c.ToolCall != nil {
			acc.Add(*c.ToolCall)
		}
	}
	calls := acc.Calls()
	for i := range calls {
		if calls[i].ID == "" {
			// OpenAI always names its calls; so does the fake.
			calls[i].ID = fmt.Sprintf("call_openaitest%d_%d", a.serial, i)
		}
	}
	return calls, nil
}

func (a *answer) stream(stream llm.Stream) {
	a.created = time.Now().Unix()
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
	if a.flush() != nil {
		return
	}
	if !sleepCtx(a.ctx, a.fault.FirstTokenDelay) {
		return
	}
	var tok tokenizer
	calls, err := a.collect(stream, func(text string) error {
		if !a.paced() {
			return a.content(text)
		}
		for _, t := range tok.push(text) {
			if err := a.content(t); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, t := range tok.flush() {
			if err = a.content(t); err != nil {
				break
			}
		}
	}
	if err != nil {
		if !errors.Is(err, errStop) && a.ctx.Err() == nil {
			// The brain failed mid-answer: tell the client as OpenAI does.
			f := a.fault
			f.Message = orDefault(f.Message, "The model failed: "+err.Error())
			a.fail(ChatFailEvent, f)
		}
		return
	}
	for i, c := range calls {
		if err := a.emitCall(i, c); err != nil {
			return
		}
	}
	if a.fault.Fail != ChatFailNone {
		// Fewer chunks than FailAfter: fail in place of the end.
		a.fail(a.fault.Fail, a.fault)
		return
	}
	reason := "stop"
	if len(calls) > 0 {
		reason = "tool_calls"
	}
	if a.write(a.chunk(chunkDelta{}, &reason)) != nil {
		return
	}
	if a.usage {
		c := a.chunk(chunkDelta{}, nil)
		c.Choices = []chunkChoice{}
		c.Usage = &usageJSON{PromptTokens: a.promptTokens, CompletionTokens: a.sent, TotalTokens: a.promptTokens + a.sent}
		if a.write(c) != nil {
			return
		}
	}
	_, _ = io.WriteString(a.w, "data: [DONE]\n\n")
	_ = a.flush()
}

// content sends one piece of the answer's text.
func (a *answer) content(text string) error {
	if err := a.event(chunkDelta{Content: &text}); err != nil {
		return err
	}
	a.text.WriteString(text)
	return nil
}

// argsPiece is the size of the pieces a call's arguments are sent in (0:
// whole).
func (a *answer) argsPiece() int {
	if a.fault.ArgsFragment == 0 && a.paced() {
		return ChatArgsTokenBytes
	}
	return a.fault.ArgsFragment
}

// emitCall streams one call: a delta naming it, then its arguments.
func (a *answer) emitCall(i int, c llm.ToolCall) error {
	idx := i + a.fault.IndexBase
	index := &idx
	if a.fault.OmitIndex {
		index = nil
	}
	head := toolCallDelta{Index: index, ID: c.ID, Type: "function", Function: functionDelta{Name: c.Name}}
	if err := a.event(chunkDelta{ToolCalls: []toolCallDelta{head}}); err != nil {
		return err
	}
	for _, frag := range fragments(string(c.Arguments), a.argsPiece()) {
		d := toolCallDelta{Index: index, Function: functionDelta{Arguments: frag}}
		if err := a.event(chunkDelta{ToolCalls: []toolCallDelta{d}}); err != nil {
			return err
		}
	}
	a.calls = append(a.calls, ChatToolCall{ID: c.ID, Type: "function", Function: ChatFunctionCall{Name: c.Name, Arguments: string(c.Arguments)}})
	return nil
}

// fragments cuts s into pieces of at most n bytes on rune boundaries (at
// least one rune each); n <= 0 keeps s whole.
func fragments(s string, n int) []string {
	if n <= 0 || len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > 0 {
		cut := min(n, len(s))
		for cut < len(s) && cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			_, cut = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

// event sends one content or tool-call chunk, failing first if the fault
// says this is where the stream breaks.
func (a *answer) event(d chunkDelta) error {
	if a.fault.Fail != ChatFailNone && a.sent == a.fault.FailAfter {
		a.fail(a.fault.Fail, a.fault)
		return errStop
	}
	if !sleepCtx(a.ctx, time.Until(a.due(a.sent))) {
		return errStop
	}
	if !a.opened {
		a.opened = true
		empty := ""
		if err := a.write(a.chunk(chunkDelta{Role: "assistant", Content: &empty}, nil)); err != nil {
			return err
		}
	}
	a.sent++
	if err := a.write(a.chunk(d, nil)); err != nil {
		return err
	}
	if a.first.IsZero() {
		a.first = time.Now()
	}
	return nil
}

func (a *answer) chunk(d chunkDelta, finish *string) chunkJSON {
	return chunkJSON{
		ID:                a.id,
		Object:            "chat.completion.chunk",
		Created:           a.created,
		Model:             a.model,
		SystemFingerprint: "fp_openaitest",
		Choices:           []chunkChoice{{Delta: d, FinishReason: finish}},
	}
}

// fail breaks the stream the way the fault says.
func (a *answer) fail(how ChatFailure, f ChatFault) {
	switch how {
	case ChatFailDrop:
		_ = a.flush()
		// Abort the handler: the server closes the connection without
		// ending the chunked body, so the client sees a truncated stream.
		panic(http.ErrAbortHandler)
	default:
		typ, code, msg := f.errorBody(0)
		var codeJSON any
		if code != "" {
			codeJSON = code
		}
		ev := map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": codeJSON}}
		_ = a.write(ev)
	}
}

// write sends one SSE data event and flushes it.
func (a *answer) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if _, err := a.w.Write(buf); err != nil {
		return errStop
	}
	return a.flush()
}

func (a *answer) flush() error {
	if err := http.NewResponseController(a.w).Flush(); err != nil {
		return errStop
	}
	return nil
}

// complete answers a request with "stream": false: one chat.completion
// object. Delays and Fail apply; fragment and index faults have no meaning.
func (a *answer) complete(stream llm.Stream) {
	if !sleepCtx(a.ctx, a.fault.FirstTokenDelay) {
		return
	}
	var text strings.Builder
	calls, err := a.collect(stream, func(t string) error {
		text.WriteString(t)
		return nil
	})
	if err == nil && a.fault.Fail != ChatFailNone {
		err = errors.New("generation failed")
	}
	if err == nil {
		// The whole answer, when its last token would have been sent.
		n := len(ChatTokens(text.String()))
		for _, c := range calls {
			n += 1 + len(fragments(string(c.Arguments), ChatArgsTokenBytes))
		}
		if !a.paced() {
			n = 1
		}
		if !sleepCtx(a.ctx, time.Until(a.due(max(n-1, 0)))) {
			return
		}
	}
	if err != nil {
		if a.ctx.Err() == nil {
			typ, code, msg := a.fault.errorBody(http.StatusInternalServerError)
			if a.fault.Message == "" {
				msg = "The model failed: " + err.Error()
			}
			WriteError(a.w, http.StatusInternalServerError, typ, code, msg)
		}
		return
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if text.Len() > 0 {
		msg["content"] = text.String()
	}
	reason := "stop"
	if len(calls) > 0 {
		reason = "tool_calls"
		tcs := make([]ChatToolCall, len(calls))
		for i, c := range calls {
			tcs[i] = ChatToolCall{ID: c.ID, Type: "function", Function: ChatFunctionCall{Name: c.Name, Arguments: string(c.Arguments)}}
		}
		msg["tool_calls"] = tcs
	}
	resp := map[string]any{
		"id":      a.id,
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   a.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": reason}},
		"usage":   map[string]int{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
	}
	a.w.Header().Set("Content-Type", "application/json")
	if json.NewEncoder(a.w).Encode(resp) == nil {
		a.first = time.Now()
		a.text.WriteString(text.String())
		if calls, ok := msg["tool_calls"].([]ChatToolCall); ok {
			a.calls = calls
		}
	}
}
