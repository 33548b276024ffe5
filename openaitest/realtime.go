package openaitest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/holdline/holdline/llm"
)

// realtimeRate is the Realtime API's PCM rate, both ways.
const realtimeRate = 24000

// RealtimeFault makes one response of the Realtime API misbehave as the
// real one does. Faults are queued with [Server.QueueRealtimeFault] and
// consumed one per response.create, in order.
type RealtimeFault struct {
	// CreatedDelay holds response.created back. Until it is sent, a
	// response.cancel is ignored with an error, as the real server does.
	CreatedDelay time.Duration
	// FirstDeltaDelay is waited after response.created, before the first
	// output: time to first token.
	FirstDeltaDelay time.Duration
	// CancelAfterArguments streams the response's function calls up to
	// response.function_call_arguments.done and then ends the response
	// cancelled, as when the server's detector hears the caller.
	CancelAfterArguments bool
	// FailMidResponse sends an error event after the first output and
	// ends the response failed.
	FailMidResponse bool
}

// RealtimeEvent is one client event the server received.
type RealtimeEvent struct {
	Type string          // the event's type, e.g. "response.create"
	Raw  json.RawMessage // the whole event as the client sent it
}

// RealtimeItem is one item of a Realtime conversation as the server holds
// it.
type RealtimeItem struct {
	// ID is the item's id; Type is "message", "function_call" or
	// "function_call_output"; Role is a message's role.
	ID, Type, Role string
	// Text is the item's text or transcript; for an assistant answer cut
	// by conversation.item.truncate, the part before the cut.
	Text      string
	AudioMs   int  // assistant audio the item holds
	Truncated bool // cut by conversation.item.truncate
	// CallID and Name are a function call's (or its output's) call id and
	// function name; Arguments are the call's, as JSON text, and Output
	// the output's.
	CallID, Name string
	Arguments    string
	Output       string
	FromAudio    bool // a committed user utterance
}

type realtimeState struct {
	mu          sync.Mutex
	faults      []RealtimeFault
	events      []RealtimeEvent
	violations  []string
	transcriber func(audio []int16, n int) string
	last        *rtSession
	charAudio   time.Duration
	sessions    int
}

// QueueRealtimeFault queues a fault for a coming response.
func (s *Server) QueueRealtimeFault(f RealtimeFault) {
	s.realtime.mu.Lock()
	s.realtime.faults = append(s.realtime.faults, f)
	s.realtime.mu.Unlock()
}

// SetRealtimeTranscriber sets how committed caller audio is transcribed;
// n counts utterances from 1. The default answers "utterance N".
func (s *Server) SetRealtimeTranscriber(f func(audio []int16, n int) string) {
	s.realtime.mu.Lock()
	s.realtime.transcriber = f
	s.realtime.mu.Unlock()
}

// SetRealtimeAudioPerChar sets how much answer audio each character of
// the answer's transcript gets (default 40 ms).
func (s *Server) SetRealtimeAudioPerChar(d time.Duration) {
	s.realtime.mu.Lock()
	s.realtime.charAudio = d
	s.realtime.mu.Unlock()
}

// RealtimeEvents returns the client events handled on every Realtime
// connection, in order. An event is listed once its effect on the
// conversation is visible through RealtimeConversation.
func (s *Server) RealtimeEvents() []RealtimeEvent {
	s.realtime.mu.Lock()
	defer s.realtime.mu.Unlock()
	return append([]RealtimeEvent(nil), s.realtime.events...)
}

// RealtimeViolations returns the protocol rules clients broke: a second
// response.create while one is in flight, a response asked for while a
// function call has no output, two outputs for one call, a cancel without
// the response id.
func (s *Server) RealtimeViolations() []string {
	s.realtime.mu.Lock()
	defer s.realtime.mu.Unlock()
	return append([]string(nil), s.realtime.violations...)
}

// RealtimeConversation returns the conversation of the latest Realtime
// connection.
func (s *Server) RealtimeConversation() []RealtimeItem {
	s.realtime.mu.Lock()
	rs := s.realtime.last
	s.realtime.mu.Unlock()
	if rs == nil {
		return nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]RealtimeItem, len(rs.items))
	for i, it := range rs.items {
		out[i] = *it
	}
	return out
}

func (s *Server) violate(format string, args ...any) {
	s.realtime.mu.Lock()
	s.realtime.violations = append(s.realtime.violations, fmt.Sprintf(format, args...))
	s.realtime.mu.Unlock()
}

func (s *Server) routeRealtime(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/realtime", s.serveRealtime)
}

// rtSession is one Realtime connection's state.
type rtSession struct {
	srv *Server
	ws  *websocket.Conn
	ctx context.Context

	mu           sync.Mutex
	instructions string
	tools        []llm.ToolSpec
	textOnly     bool
	input        []int16
	items        []*RealtimeItem
	active       *rtResponse
	seq          int
	utterances   int
	wg           sync.WaitGroup
}

type rtResponse struct {
	id      string
	created bool
	cancel  context.CancelFunc
}

func (s *Server) serveRealtime(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("model") == "" {
		WriteError(w, http.StatusBadRequest, "invalid_request_error", "missing_model", "Missing required parameter: 'model'.")
		return
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(32 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	rs := &rtSession{srv: s, ws: ws, ctx: ctx}
	s.realtime.mu.Lock()
	s.realtime.last = rs
	s.realtime.sessions++
	n := s.realtime.sessions
	s.realtime.mu.Unlock()
	defer func() {
		cancel()
		rs.wg.Wait()
		ws.CloseNow()
	}()
	rs.send(map[string]any{"type": "session.created", "session": map[string]any{"id": fmt.Sprintf("sess_%d", n), "type": "realtime"}})
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var head struct {
			Type    string `json:"type"`
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(b, &head) != nil || head.Type == "" {
			rs.fail("", "invalid_request_error", "invalid_json", "The server could not parse the event.")
			continue
		}
		rs.dispatch(head.Type, head.EventID, b)
		// Recorded once handled, so a test that sees an event also sees
		// what it did to the conversation.
		s.realtime.mu.Lock()
		s.realtime.events = append(s.realtime.events, RealtimeEvent{Type: head.Type, Raw: append(json.RawMessage(nil), b...)})
		s.realtime.mu.Unlock()
	}
}

func (rs *rtSession) send(ev map[string]any) {
	rs.mu.Lock()
	rs.seq++
	ev["event_id"] = fmt.Sprintf("event_%d", rs.seq)
	rs.mu.Unlock()
	b, _ := json.Marshal(ev)
	wctx, cancel := context.WithTimeout(rs.ctx, 10*time.Second)
	defer cancel()
	_ = rs.ws.Write(wctx, websocket.MessageText, b)
}

func (rs *rtSession) fail(eventID, typ, code, msg string) {
	rs.send(map[string]any{"type": "error", "error": map[string]any{"type": typ, "code": code, "message": msg, "event_id": eventID}})
}

// index is the position of item id, or -1. Called with rs.mu held.
func (rs *rtSession) index(id string) int {
	for i, it := range rs.items {
		if it.ID == id {
			return i
		}
	}
	return -1
}

// insert puts it after previous ("" appends, "root" goes first) and
// returns the id of the item before it. Called with rs.mu held.
func (rs *rtSession) insert(it *RealtimeItem, previous string) (string, error) {
	at := len(rs.items)
	switch previous {
	case "":
	case "root":
		at = 0
	default:
		i := rs.index(previous)
		if i < 0 {
			return "", fmt.Errorf("previous_item_id %q does not exist", previous)
		}
		at = i + 1
	}
	rs.items = append(rs.items[:at], append([]*RealtimeItem{it}, rs.items[at:]...)...)
	if at == 0 {
		return "", nil
	}
	return rs.items[at-1].ID, nil
}

func wireItemOf(it *RealtimeItem) map[string]any {
	m := map[string]any{"id": it.ID, "type": it.Type, "status": "completed"}
	switch it.Type {
	case "message":
		m["role"] = it.Role
		ct := "input_text"
		switch {
		case it.FromAudio:
			ct = "input_audio"
		case it.Role == "assistant" && it.AudioMs > 0:
			ct = "output_audio"
		case it.Role == "assistant":
			ct = "output_text"
		}
		c := map[string]any{"type": ct}
		if ct == "input_audio" || ct == "output_audio" {
			c["transcript"] = it.Text
		} else {
			c["text"] = it.Text
		}
		m["content"] = []any{c}
	case "function_call":
		m["call_id"], m["name"], m["arguments"] = it.CallID, it.Name, it.Arguments
	case "function_call_output":
		m["call_id"], m["output"] = it.CallID, it.Output
	}
	return m
}

func (rs *rtSession) dispatch(typ, eventID string, b []byte) {
	bad := func(msg string) { rs.fail(eventID, "invalid_request_error", "invalid_value", msg) }
	switch typ {
	case "session.update":
		var ev struct {
			Session struct {
				Type             string   `json:"type"`
				Instructions     *string  `json:"instructions"`
				OutputModalities []string `json:"output_modalities"`
				Tools            []struct {
					Type        string          `json:"type"`
					Name        string          `json:"name"`
					Description string          `json:"description"`
					Parameters  json.RawMessage `json:"parameters"`
				} `json:"tools"`
				Audio struct {
					Input struct {
						TurnDetection *struct {
							CreateResponse *bool `json:"create_response"`
						} `json:"turn_detection"`
					} `json:"input"`
				} `json:"audio"`
			} `json:"session"`
		}
		if err := json.Unmarshal(b, &ev); err != nil || ev.Session.Type != "realtime" {
			bad("session.type must be 'realtime'.")
			return
		}
		if td := ev.Session.Audio.Input.TurnDetection; td != nil && (td.CreateResponse == nil || *td.CreateResponse) {
			rs.srv.violate("server VAD left to create responses on its own")
		}
		rs.mu.Lock()
		if ev.Session.Instructions != nil {
			rs.instructions = *ev.Session.Instructions
		}
		if ev.Session.Tools != nil {
			rs.tools = rs.tools[:0]
			for _, t := range ev.Session.Tools {
				rs.tools = append(rs.tools, llm.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
			}
		}
		if len(ev.Session.OutputModalities) > 0 {
			rs.textOnly = ev.Session.OutputModalities[0] == "text"
		}
		rs.mu.Unlock()
		rs.send(map[string]any{"type": "session.updated", "session": map[string]any{"type": "realtime"}})

	case "input_audio_buffer.append":
		var ev struct {
			Audio string `json:"audio"`
		}
		raw, err := base64.StdEncoding.DecodeString(func() string { _ = json.Unmarshal(b, &ev); return ev.Audio }())
		if err != nil || len(raw)%2 != 0 {
			bad("audio must be base64 PCM16.")
			return
		}
		rs.mu.Lock()
		for i := 0; i+1 < len(raw); i += 2 {
			rs.input = append(rs.input, int16(binary.LittleEndian.Uint16(raw[i:])))
		}
		rs.mu.Unlock()

	case "input_audio_buffer.clear":
		rs.mu.Lock()
		rs.input = nil
		rs.mu.Unlock()
		rs.send(map[string]any{"type": "input_audio_buffer.cleared"})

	case "input_audio_buffer.commit":
		rs.mu.Lock()
		audio := rs.input
		if len(audio) < realtimeRate/10 {
			rs.mu.Unlock()
			rs.fail(eventID, "invalid_request_error", "input_audio_buffer_commit_empty",
				fmt.Sprintf("Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has %.2fms of audio.", float64(len(audio))*1000/realtimeRate))
			return
		}
		rs.input = nil
		rs.utterances++
		n := rs.utterances
		rs.seq++
		it := &RealtimeItem{ID: fmt.Sprintf("item_audio_%d", rs.seq), Type: "message", Role: "user", FromAudio: true}
		prev, _ := rs.insert(it, "")
		rs.mu.Unlock()
		rs.send(map[string]any{"type": "input_audio_buffer.committed", "item_id": it.ID, "previous_item_id": nullable(prev)})
		rs.send(map[string]any{"type": "conversation.item.added", "item": wireItemOf(it), "previous_item_id": nullable(prev)})
		rs.srv.realtime.mu.Lock()
		tr := rs.srv.realtime.transcriber
		rs.srv.realtime.mu.Unlock()
		text := fmt.Sprintf("utterance %d", n)
		if tr != nil {
			text = tr(audio, n)
		}
		rs.mu.Lock()
		it.Text = text
		rs.mu.Unlock()
		rs.send(map[string]any{"type": "conversation.item.input_audio_transcription.delta", "item_id": it.ID, "content_index": 0, "delta": text})
		rs.send(map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": it.ID, "content_index": 0, "transcript": text})

	case "conversation.item.create":
		var ev struct {
			PreviousItemID string `json:"previous_item_id"`
			Item           struct {
				ID        string  `json:"id"`
				Type      string  `json:"type"`
				Role      string  `json:"role"`
				CallID    string  `json:"call_id"`
				Name      string  `json:"name"`
				Arguments string  `json:"arguments"`
				Output    *string `json:"output"`
				Content   []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"item"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			bad("invalid item")
			return
		}
		in := ev.Item
		it := &RealtimeItem{ID: in.ID, Type: in.Type, Role: in.Role, CallID: in.CallID, Name: in.Name, Arguments: in.Arguments}
		rs.mu.Lock()
		if it.ID == "" {
			rs.seq++
			it.ID = fmt.Sprintf("item_%d", rs.seq)
		} else if rs.index(it.ID) >= 0 {
			rs.mu.Unlock()
			rs.fail(eventID, "invalid_request_error", "item_id_exists", fmt.Sprintf("Item with id '%s' already exists.", it.ID))
			return
		}
		var problem string
		switch in.Type {
		case "message":
			want := "input_text"
			if in.Role == "assistant" {
				want = "output_text"
			}
			if len(in.Content) != 1 || (in.Content[0].Type != want && !(in.Role == "assistant" && in.Content[0].Type == "text")) {
				problem = fmt.Sprintf("a %s message needs one %s content part", in.Role, want)
			} else {
				it.Text = in.Content[0].Text
			}
		case "function_call":
			if in.CallID == "" || in.Name == "" {
				problem = "function_call needs call_id and name"
			}
		case "function_call_output":
			if in.Output == nil {
				problem = "function_call_output needs output"
				break
			}
			it.Output = *in.Output
			found, answered := false, false
			for _, x := range rs.items {
				found = found || (x.Type == "function_call" && x.CallID == in.CallID)
				answered = answered || (x.Type == "function_call_output" && x.CallID == in.CallID)
			}
			if !found {
				problem = fmt.Sprintf("No tool call found for function call output with call_id %s.", in.CallID)
			} else if answered {
				rs.srv.violate("two outputs for call %s", in.CallID)
			}
		default:
			problem = "unknown item type " + in.Type
		}
		if problem != "" {
			rs.mu.Unlock()
			bad(problem)
			return
		}
		prev, err := rs.insert(it, ev.PreviousItemID)
		wire := wireItemOf(it)
		rs.mu.Unlock()
		if err != nil {
			rs.fail(eventID, "invalid_request_error", "item_not_found", err.Error())
			return
		}
		rs.send(map[string]any{"type": "conversation.item.added", "item": wire, "previous_item_id": nullable(prev)})

	case "conversation.item.delete":
		var ev struct {
			ItemID string `json:"item_id"`
		}
		_ = json.Unmarshal(b, &ev)
		rs.mu.Lock()
		i := rs.index(ev.ItemID)
		if i >= 0 {
			rs.items = append(rs.items[:i], rs.items[i+1:]...)
		}
		rs.mu.Unlock()
		if i < 0 {
			rs.fail(eventID, "invalid_request_error", "item_not_found", fmt.Sprintf("Item with item_id '%s' not found.", ev.ItemID))
			return
		}
		rs.send(map[string]any{"type": "conversation.item.deleted", "item_id": ev.ItemID})

	case "conversation.item.truncate":
		var ev struct {
			ItemID       string          `json:"item_id"`
			ContentIndex int             `json:"content_index"`
			AudioEndMs   json.RawMessage `json:"audio_end_ms"`
		}
		_ = json.Unmarshal(b, &ev)
		var ms int
		if err := json.Unmarshal(ev.AudioEndMs, &ms); err != nil || ms < 0 {
			bad(fmt.Sprintf("Invalid type for 'audio_end_ms': expected an integer, but got %s.", string(ev.AudioEndMs)))
			return
		}
		rs.mu.Lock()
		i := rs.index(ev.ItemID)
		var it *RealtimeItem
		if i >= 0 {
			it = rs.items[i]
		}
		switch {
		case it == nil:
			rs.mu.Unlock()
			rs.fail(eventID, "invalid_request_error", "item_not_found", "Item not found.")
			return
		case it.Role != "assistant" || it.AudioMs == 0:
			rs.mu.Unlock()
			bad("Only assistant messages with audio can be truncated.")
			return
		case ms > it.AudioMs:
			rs.mu.Unlock()
			bad(fmt.Sprintf("Audio content of %dms is shorter than %dms.", it.AudioMs, ms))
			return
		}
		// The transcript keeps the words spoken by the cut, in proportion.
		words := strings.Fields(it.Text)
		keep := int(math.Floor(float64(len(words)) * float64(ms) / float64(it.AudioMs)))
		it.Text = strings.Join(words[:keep], " ")
		it.AudioMs, it.Truncated = ms, true
		rs.mu.Unlock()
		rs.send(map[string]any{"type": "conversation.item.truncated", "item_id": ev.ItemID, "content_index": ev.ContentIndex, "audio_end_ms": ms})

	case "response.create":
		rs.mu.Lock()
		if rs.active != nil {
			rs.mu.Unlock()
			rs.srv.violate("response.create while response %s is in flight", rs.active.id)
			rs.fail(eventID, "invalid_request_error", "conversation_already_has_active_response", "Conversation already has an active response in progress.")
			return
		}
		answered := map[string]bool{}
		for _, x := range rs.items {
			if x.Type == "function_call_output" {
				answered[x.CallID] = true
			}
		}
		for _, x := range rs.items {
			if x.Type == "function_call" && !answered[x.CallID] {
				rs.srv.violate("response.create while call %s has no output", x.CallID)
			}
		}
		rs.seq++
		ctx, cancel := context.WithCancel(rs.ctx)
		resp := &rtResponse{id: fmt.Sprintf("resp_%d", rs.seq), cancel: cancel}
		rs.active = resp
		rs.mu.Unlock()
		rs.srv.realtime.mu.Lock()
		var fault RealtimeFault
		if len(rs.srv.realtime.faults) > 0 {
			fault = rs.srv.realtime.faults[0]
			rs.srv.realtime.faults = rs.srv.realtime.faults[1:]
		}
		rs.srv.realtime.mu.Unlock()
		rs.wg.Go(func() { rs.respond(ctx, resp, fault) })

	case "response.cancel":
		var ev struct {
			ResponseID string `json:"response_id"`
		}
		_ = json.Unmarshal(b, &ev)
		rs.mu.Lock()
		resp := rs.active
		ok := resp != nil && resp.created && (ev.ResponseID == "" || ev.ResponseID == resp.id)
		rs.mu.Unlock()
		if ev.ResponseID == "" {
			rs.srv.violate("response.cancel without a response_id")
		}
		if !ok {
			rs.fail(eventID, "invalid_request_error", "response_cancel_not_active", "Cancellation failed: no active response found.")
			return
		}
		resp.cancel()

	default:
		rs.fail(eventID, "invalid_request_error", "unknown_event", fmt.Sprintf("Invalid value: '%s'.", typ))
	}
}

func nullable(id string) any {
	if id == "" {
		return nil
	}
	return id
}

// request is what the brain is asked: the conversation as a chat
// context. Called with rs.mu held.
func (rs *rtSession) request() llm.Request {
	req := llm.Request{Instructions: rs.instructions, Tools: append([]llm.ToolSpec(nil), rs.tools...)}
	for _, it := range rs.items {
		switch it.Type {
		case "message":
			req.Context.Items = append(req.Context.Items, llm.Item{Kind: llm.KindMessage, Role: llm.Role(it.Role), Text: it.Text, Interrupted: it.Truncated})
		case "function_call":
			req.Context.Items = append(req.Context.Items, llm.Item{Kind: llm.KindToolCall, CallID: it.CallID, Name: it.Name, Arguments: json.RawMessage(it.Arguments)})
		case "function_call_output":
			name := ""
			for _, c := range rs.items {
				if c.Type == "function_call" && c.CallID == it.CallID {
					name = c.Name
				}
			}
			req.Context.Items = append(req.Context.Items, llm.Item{Kind: llm.KindToolResult, CallID: it.CallID, Name: name, Output: it.Output})
		}
	}
	return req
}

// respond streams one response from the brain.
func (rs *rtSession) respond(ctx context.Context, resp *rtResponse, fault RealtimeFault) {
	status := "completed"
	var output []any
	defer func() {
		rs.mu.Lock()
		rs.active = nil
		rs.mu.Unlock()
		resp.cancel()
		rs.send(map[string]any{"type": "response.done", "response": map[string]any{"id": resp.id, "object": "realtime.response", "status": status, "output": output}})
	}()
	wait := func(d time.Duration) bool {
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
	cancelled := func() bool {
		if ctx.Err() != nil {
			status = "cancelled"
			return true
		}
		return false
	}
	// Until response.created, a cancel is ignored (the response is not
	// active yet): the delay is waited out whatever the client sends.
	if fault.CreatedDelay > 0 {
		t := time.NewTimer(fault.CreatedDelay)
		select {
		case <-t.C:
		case <-rs.ctx.Done():
		}
		t.Stop()
	}
	rs.mu.Lock()
	resp.created = true
	req := rs.request()
	textOnly := rs.textOnly
	rs.mu.Unlock()
	rs.send(map[string]any{"type": "response.created", "response": map[string]any{"id": resp.id, "object": "realtime.response", "status": "in_progress"}})
	if !wait(fault.FirstDeltaDelay) {
		cancelled()
		return
	}
	brain := rs.srv.brain
	if brain == nil {
		status = "failed"
		return
	}
	stream, err := brain.Stream(ctx, req)
	if err != nil {
		if cancelled() {
			return
		}
		status = "failed"
		rs.fail("", "server_error", "brain", err.Error())
		return
	}
	defer stream.Close()
	rs.srv.realtime.mu.Lock()
	perChar := rs.srv.realtime.charAudio
	rs.srv.realtime.mu.Unlock()
	if perChar <= 0 {
		perChar = 40 * time.Millisecond
	}
	var (
		msg   *RealtimeItem
		calls llm.CallAccumulator
		first = true
	)
	for {
		ch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if cancelled() {
				return
			}
			status = "failed"
			rs.fail("", "server_error", "brain", err.Error())
			return
		}
		if cancelled() {
			return
		}
		if ch.ToolCall != nil {
			calls.Add(*ch.ToolCall)
		}
		if ch.Text == "" {
			continue
		}
		if msg == nil {
			rs.mu.Lock()
			rs.seq++
			msg = &RealtimeItem{ID: fmt.Sprintf("item_out_%d", rs.seq), Type: "message", Role: "assistant"}
			prev, _ := rs.insert(msg, "")
			wire := wireItemOf(msg)
			rs.mu.Unlock()
			output = append(output, wire)
			rs.send(map[string]any{"type": "response.output_item.added", "response_id": resp.id, "output_index": 0, "item": wire})
			rs.send(map[string]any{"type": "conversation.item.added", "item": wire, "previous_item_id": nullable(prev)})
		}
		rs.mu.Lock()
		msg.Text += ch.Text
		rs.mu.Unlock()
		if textOnly {
			rs.send(map[string]any{"type": "response.output_text.delta", "response_id": resp.id, "item_id": msg.ID, "output_index": 0, "content_index": 0, "delta": ch.Text})
		} else {
			rs.send(map[string]any{"type": "response.output_audio_transcript.delta", "response_id": resp.id, "item_id": msg.ID, "output_index": 0, "content_index": 0, "delta": ch.Text})
			pcm := tone(time.Duration(len(ch.Text)) * perChar)
			rs.mu.Lock()
			msg.AudioMs += len(pcm) / 2 * 1000 / realtimeRate
			rs.mu.Unlock()
			rs.send(map[string]any{"type": "response.output_audio.delta", "response_id": resp.id, "item_id": msg.ID, "output_index": 0, "content_index": 0, "delta": base64.StdEncoding.EncodeToString(pcm)})
		}
		if first && fault.FailMidResponse {
			status = "failed"
			rs.fail("", "server_error", "server_error", "The server had an error while processing your request.")
			return
		}
		first = false
	}
	for i, call := range calls.Calls() {
		if call.ID == "" {
			call.ID = fmt.Sprintf("call_%s_%d", resp.id, i)
		}
		rs.mu.Lock()
		rs.seq++
		it := &RealtimeItem{ID: fmt.Sprintf("item_fc_%d", rs.seq), Type: "function_call", CallID: call.ID, Name: call.Name}
		prev, _ := rs.insert(it, "")
		rs.mu.Unlock()
		args := string(call.Arguments)
		added := wireItemOf(it)
		added["status"], added["arguments"] = "in_progress", ""
		rs.send(map[string]any{"type": "response.output_item.added", "response_id": resp.id, "output_index": i + 1, "item": added})
		rs.send(map[string]any{"type": "conversation.item.added", "item": added, "previous_item_id": nullable(prev)})
		half := len(args) / 2
		for _, part := range []string{args[:half], args[half:]} {
			rs.send(map[string]any{"type": "response.function_call_arguments.delta", "response_id": resp.id, "item_id": it.ID, "call_id": call.ID, "delta": part})
		}
		rs.mu.Lock()
		it.Arguments = args
		rs.mu.Unlock()
		rs.send(map[string]any{"type": "response.function_call_arguments.done", "response_id": resp.id, "item_id": it.ID, "call_id": call.ID, "name": call.Name, "arguments": args})
		if fault.CancelAfterArguments {
			status = "cancelled"
			return
		}
		if cancelled() {
			return
		}
		done := wireItemOf(it)
		output = append(output, done)
		rs.send(map[string]any{"type": "response.output_item.done", "response_id": resp.id, "output_index": i + 1, "item": done})
	}
	cancelled()
}

// tone is d of a quiet 300 Hz tone as PCM16LE at the Realtime rate.
func tone(d time.Duration) []byte {
	n := int(d.Seconds() * realtimeRate)
	b := make([]byte, 2*n)
	for i := range n {
		v := int16(3000 * math.Sin(2*math.Pi*300*float64(i)/realtimeRate))
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return b
}
