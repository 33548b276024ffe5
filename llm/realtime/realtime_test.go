package realtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/llm/realtime"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/stt"
)

var fast = math.Inf(1)

func say(text string, calls ...scripted.Call) scripted.Response {
	return scripted.Response{Text: text, ToolCalls: calls, TokensPerSecond: fast}
}

func newClient(t *testing.T, srv *openaitest.Server, opts ...realtime.Option) *realtime.Client {
	t.Helper()
	opts = append([]realtime.Option{realtime.WithAPIKey(openaitest.APIKey), realtime.WithBaseURL(srv.URL())}, opts...)
	c, err := realtime.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// answer is what one response streamed.
type answer struct {
	transcript, text string
	audio            time.Duration
	calls            []llm.ToolCall
	err              error
}

func read(t *testing.T, s llm.Stream) answer {
	t.Helper()
	var (
		a   answer
		acc llm.CallAccumulator
	)
	for {
		ch, err := s.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				a.err = err
			}
			break
		}
		a.transcript += ch.Transcript
		a.text += ch.Text
		a.audio += ch.Audio.Duration()
		if ch.ToolCall != nil {
			acc.Add(*ch.ToolCall)
		}
	}
	s.Close()
	a.calls = acc.Calls()
	return a
}

func user(text string) llm.Item {
	return llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: text}
}

func noViolations(t *testing.T, srv *openaitest.Server) {
	t.Helper()
	if v := srv.RealtimeViolations(); len(v) > 0 {
		t.Errorf("protocol violations: %q", v)
	}
}

// eventsOf returns the client events of type typ.
func eventsOf(srv *openaitest.Server, typ string) []map[string]any {
	var out []map[string]any
	for _, e := range srv.RealtimeEvents() {
		if e.Type == typ {
			var m map[string]any
			_ = json.Unmarshal(e.Raw, &m)
			out = append(out, m)
		}
	}
	return out
}

var bookTable = llm.ToolSpec{Name: "book_table", Description: "Books a table.", Parameters: json.RawMessage(`{"type":"object","properties":{"party":{"type":"integer"}}}`)}

// A response speaks (audio and its transcript) and its function call is
// handed over only at response.done; the call's output goes back as one
// function_call_output followed by a separate response.create.
func TestSpeaksThenCallsThenAnswersTheResult(t *testing.T) {
	srv := openaitest.New(scripted.NewLLM(
		say("Let me book that.", scripted.Call{ID: "call_1", Name: "book_table", Args: map[string]any{"party": 2}}),
		say("You're booked."),
	))
	defer srv.Close()
	c := newClient(t, srv)
	ctx := context.Background()
	ctxItems := []llm.Item{user("A table for two.")}
	s, err := c.Stream(ctx, llm.Request{Instructions: "Book tables.", Tools: []llm.ToolSpec{bookTable}, Context: llm.ChatContext{Items: ctxItems}})
	if err != nil {
		t.Fatal(err)
	}
	a := read(t, s)
	if a.err != nil || a.transcript != "Let me book that." || a.audio < 500*time.Millisecond {
		t.Fatalf("answer = %+v; want the spoken transcript with its audio", a)
	}
	if len(a.calls) != 1 || a.calls[0].ID != "call_1" || a.calls[0].Name != "book_table" || string(a.calls[0].Arguments) != `{"party":2}` {
		t.Fatalf("calls = %+v", a.calls)
	}

	ctxItems = append(ctxItems,
		llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "Let me book that."},
		llm.Item{Kind: llm.KindToolCall, CallID: "call_1", Name: "book_table", Arguments: json.RawMessage(`{"party":2}`)},
		llm.Item{Kind: llm.KindToolResult, CallID: "call_1", Name: "book_table", Output: `{"code":"H1"}`},
	)
	s, err = c.Stream(ctx, llm.Request{Instructions: "Book tables.", Tools: []llm.ToolSpec{bookTable}, Context: llm.ChatContext{Items: ctxItems}})
	if err != nil {
		t.Fatal(err)
	}
	if a := read(t, s); a.err != nil || a.transcript != "You're booked." {
		t.Fatalf("follow-up = %+v", a)
	}
	noViolations(t, srv)

	outputs := 0
	var order []string
	for _, e := range srv.RealtimeEvents() {
		if e.Type == "conversation.item.create" && strings.Contains(string(e.Raw), "function_call_output") {
			outputs++
			order = append(order, "output")
		}
		if e.Type == "response.create" {
			order = append(order, "response")
		}
	}
	if outputs != 1 || strings.Join(order, ",") != "response,output,response" {
		t.Errorf("client sent %s; want one function_call_output, then its own response.create", strings.Join(order, ","))
	}
	conv := srv.RealtimeConversation()
	var kinds []string
	for _, it := range conv {
		kinds = append(kinds, it.Type+":"+it.Role)
	}
	if got := strings.Join(kinds, " "); got != "message:user message:assistant function_call: function_call_output: message:assistant" {
		t.Errorf("server conversation = %s", got)
	}
}

// response.function_call_arguments.done also comes for a response that
// ends cancelled: such a call is never handed over, and its item is
// removed from the server's conversation so that no call lacks an output.
func TestArgumentsDoneOnCancelledResponseNeverRuns(t *testing.T) {
	srv := openaitest.New(scripted.NewLLM(
		say("", scripted.Call{ID: "call_x", Name: "book_table", Args: map[string]any{"party": 4}}),
		say("Sorry, go on."),
	))
	defer srv.Close()
	srv.QueueRealtimeFault(openaitest.RealtimeFault{CancelAfterArguments: true})
	c := newClient(t, srv)
	req := llm.Request{Tools: []llm.ToolSpec{bookTable}, Context: llm.ChatContext{Items: []llm.Item{user("Book for four.")}}}
	s, err := c.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if a := read(t, s); len(a.calls) != 0 || a.err != nil {
		t.Fatalf("a cancelled response handed over %+v (err %v)", a.calls, a.err)
	}
	req.Context.Items = append(req.Context.Items, user("Actually wait."))
	s, err = c.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if a := read(t, s); a.transcript != "Sorry, go on." {
		t.Fatalf("next answer = %+v", a)
	}
	noViolations(t, srv)
	for _, it := range srv.RealtimeConversation() {
		if it.Type == "function_call" {
			t.Errorf("the cancelled response's call is still in the conversation: %+v", it)
		}
	}
}

// A cancel asked for before response.created reaches the server by id once
// the id is known (a cancel without it would be ignored), and the next
// response waits for the cancelled one to end: two are never in flight.
func TestCancelRacingResponseCreated(t *testing.T) {
	srv := openaitest.New(scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		if items := req.Context.Items; items[len(items)-1].Text == "Hello?" {
			return say("Yes?")
		}
		return say("A long answer that nobody will hear.")
	}))
	defer srv.Close()
	srv.QueueRealtimeFault(openaitest.RealtimeFault{CreatedDelay: 150 * time.Millisecond, FirstDeltaDelay: time.Second})
	c := newClient(t, srv)
	req := llm.Request{Context: llm.ChatContext{Items: []llm.Item{user("Tell me everything.")}}}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Stream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	cancel() // barge-in before the server has even created the response
	if _, err := s.Recv(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv after cancel = %v; want context.Canceled", err)
	}
	s.Close()

	req.Context.Items = append(req.Context.Items, user("Hello?"))
	s2, err := c.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if a := read(t, s2); a.transcript != "Yes?" || a.err != nil {
		t.Fatalf("next answer = %+v", a)
	}
	noViolations(t, srv)
	cancels := eventsOf(srv, "response.cancel")
	if len(cancels) != 1 || cancels[0]["response_id"] == "" || cancels[0]["response_id"] == nil {
		t.Fatalf("cancels sent: %v; want one naming the response", cancels)
	}
	for _, it := range srv.RealtimeConversation() {
		if strings.Contains(it.Text, "nobody will hear") {
			t.Errorf("the cancelled answer is still in the conversation: %+v", it)
		}
	}
}

// An answer cut short is truncated on the server to the integer number of
// milliseconds the caller heard, never more than the audio it had.
func TestInterruptedAnswerIsTruncatedToWhatWasPlayed(t *testing.T) {
	srv := openaitest.New(scripted.NewLLM(say("one two three four five six seven eight"), say("Sure.")))
	defer srv.Close()
	c := newClient(t, srv)
	items := []llm.Item{user("Count.")}
	s, err := c.Stream(context.Background(), llm.Request{Context: llm.ChatContext{Items: items}})
	if err != nil {
		t.Fatal(err)
	}
	a := read(t, s)
	items = append(items,
		llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "one two three", Interrupted: true, Played: 700*time.Millisecond + 400*time.Microsecond},
		user("Stop."))
	s, err = c.Stream(context.Background(), llm.Request{Context: llm.ChatContext{Items: items}})
	if err != nil {
		t.Fatal(err)
	}
	read(t, s)
	tr := eventsOf(srv, "conversation.item.truncate")
	if len(tr) != 1 {
		t.Fatalf("truncates = %v; want one", tr)
	}
	if ms, ok := tr[0]["audio_end_ms"].(float64); !ok || ms != 700 {
		t.Errorf("audio_end_ms = %v; want the integer 700", tr[0]["audio_end_ms"])
	}
	if !strings.Contains(string(srv.RealtimeEvents()[0].Raw), "") || a.audio == 0 {
		t.Fatal("no audio")
	}
	conv := srv.RealtimeConversation()
	if len(conv) < 2 || !conv[1].Truncated || conv[1].AudioMs != 700 {
		t.Errorf("server's answer = %+v; want truncated at 700 ms", conv[1])
	}
	noViolations(t, srv)
}

// Played beyond the audio the server sent (the clocks differ by a frame)
// is clamped: the server refuses an audio_end_ms past the audio.
func TestTruncateNeverPassesTheAudio(t *testing.T) {
	srv := openaitest.New(scripted.NewLLM(say("Hi."), say("Yes.")))
	defer srv.Close()
	srv.SetRealtimeAudioPerChar(10 * time.Millisecond) // "Hi." is 30 ms
	c := newClient(t, srv)
	items := []llm.Item{user("Hey.")}
	s, _ := c.Stream(context.Background(), llm.Request{Context: llm.ChatContext{Items: items}})
	read(t, s)
	items = append(items, llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "Hi.", Interrupted: true, Played: 45 * time.Millisecond}, user("Hm."))
	s, _ = c.Stream(context.Background(), llm.Request{Context: llm.ChatContext{Items: items}})
	read(t, s)
	tr := eventsOf(srv, "conversation.item.truncate")
	if len(tr) != 1 || tr[0]["audio_end_ms"].(float64) != 30 {
		t.Errorf("truncates = %v; want audio_end_ms 30", tr)
	}
	noViolations(t, srv)
}

// The recogniser sends only utterances (with pre-roll), commits each as
// one user item and returns the server's transcript; a scrap shorter than
// the server accepts is cleared, not committed.
func TestRecognizerCommitsUtterances(t *testing.T) {
	srv := openaitest.New(scripted.NewLLM(say("Hello.")))
	defer srv.Close()
	heard := make(chan int, 4)
	srv.SetRealtimeTranscriber(func(audio []int16, n int) string {
		heard <- len(audio)
		return "book a table for two"
	})
	c := newClient(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rs, err := c.Recognizer().Stream(ctx, media.Rate16k)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	frame := media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k}
	write := func(d time.Duration) {
		for at := time.Duration(0); at < d; at += 20 * time.Millisecond {
			if err := rs.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
	}
	starter := rs.(stt.SpeechStarter)
	write(time.Second) // silence before: only the last 300 ms go
	starter.StartOfSpeech()
	write(500 * time.Millisecond)
	rs.EndOfSpeech()
	tr, err := rs.Recv()
	for err == nil && !tr.Final {
		tr, err = rs.Recv()
	}
	if err != nil || tr.Text != "book a table for two" {
		t.Fatalf("transcript = %+v, %v", tr, err)
	}
	if n := <-heard; n != 800*realtime.Rate/1000 {
		t.Errorf("committed %d samples; want 800 ms (300 ms pre-roll + 500 ms speech) at 24 kHz", n)
	}
	starter.StartOfSpeech()
	rs.EndOfSpeech() // nothing but pre-roll of nothing
	write(40 * time.Millisecond)
	starter.StartOfSpeech()
	write(40 * time.Millisecond)
	rs.EndOfSpeech()
	// The server handles a connection's events in order and lists each
	// once handled: once it lists the scrap's clear, it has listed every
	// commit before it.
	for deadline := time.Now().Add(5 * time.Second); len(eventsOf(srv, "input_audio_buffer.clear")) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the short scrap was never cleared")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := len(eventsOf(srv, "input_audio_buffer.commit")); got != 1 {
		t.Errorf("commits = %d; want 1 (the short scrap cleared)", got)
	}
	// A transcript the session ignored (echo) leaves the utterance unmatched:
	// the next response's sync deletes it.
	s, err := c.Stream(ctx, llm.Request{Context: llm.ChatContext{Items: []llm.Item{user("Hi, typed.")}}})
	if err != nil {
		t.Fatal(err)
	}
	read(t, s)
	for _, it := range srv.RealtimeConversation() {
		if it.FromAudio {
			t.Errorf("an utterance the session never took is still in the conversation: %+v", it)
		}
	}
	noViolations(t, srv)
}

// A response that fails mid-stream returns the server's error from Recv.
func TestFailedResponseIsAnError(t *testing.T) {
	srv := openaitest.New(scripted.NewLLM(say("I will now fail."), say("Better.")))
	defer srv.Close()
	srv.QueueRealtimeFault(openaitest.RealtimeFault{FailMidResponse: true})
	c := newClient(t, srv)
	req := llm.Request{Context: llm.ChatContext{Items: []llm.Item{user("Go.")}}}
	s, _ := c.Stream(context.Background(), req)
	if a := read(t, s); a.err == nil {
		t.Fatal("a failed response ended without an error")
	}
	s, _ = c.Stream(context.Background(), req)
	if a := read(t, s); a.err != nil || a.transcript != "Better." {
		t.Errorf("after a failure: %+v", a)
	}
	noViolations(t, srv)
}

// A lost connection fails the response under way; the next response
// reconnects and sends the whole context again.
func TestReconnectsWithTheWholeContext(t *testing.T) {
	brain := scripted.NewLLM(say("First."), say("Second."))
	srv := openaitest.New(brain)
	c := newClient(t, srv)
	items := []llm.Item{user("One.")}
	s, _ := c.Stream(context.Background(), llm.Request{Context: llm.ChatContext{Items: items}})
	read(t, s)
	srv.Close()
	srv2 := openaitest.New(brain)
	defer srv2.Close()
	c2 := newClient(t, srv2)
	items = append(items, llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "First."}, user("Two."))
	s, err := c2.Stream(context.Background(), llm.Request{Context: llm.ChatContext{Items: items}})
	if err != nil {
		t.Fatal(err)
	}
	if a := read(t, s); a.transcript != "Second." {
		t.Fatalf("answer = %+v", a)
	}
	var texts []string
	for _, it := range srv2.RealtimeConversation() {
		texts = append(texts, it.Text)
	}
	if got := strings.Join(texts, "|"); got != "One.|First.|Two.|Second." {
		t.Errorf("new conversation = %s", got)
	}
}

func TestNoKeyIsAnError(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	if _, err := realtime.New(); !errors.Is(err, realtime.ErrNoAPIKey) {
		t.Errorf("New without a key = %v; want ErrNoAPIKey", err)
	}
}
