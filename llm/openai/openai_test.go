package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/scripted"
)

// Test retry timing: small enough to keep tests fast, distinct enough to
// recognise in the recorded waits.
const (
	testBase = 10 * time.Millisecond
	testMax  = 50 * time.Millisecond
)

// fast makes a response stream without pacing.
func fast(r scripted.Response) scripted.Response {
	r.TokensPerSecond = math.Inf(1)
	return r
}

// waits records the model's retry waits instead of sleeping them.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// newTest starts a fake server with brain and a model talking to it whose
// retry waits are recorded, not slept.
func newTest(t *testing.T, brain llm.Model, opts ...Option) (*openaitest.Server, *Model, *waits) {
	t.Helper()
	srv := openaitest.New(brain)
	t.Cleanup(srv.Close)
	opts = append([]Option{
		WithBaseURL(srv.URL()),
		WithAPIKey(openaitest.APIKey),
		WithRetries(3, testBase, testMax),
	}, opts...)
	m, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	w := &waits{}
	m.wait = w.wait
	return srv, m, w
}

type result struct {
	chunks []llm.Chunk // without the usage chunk
	usage  *llm.Usage
	text   string
	calls  []llm.ToolCall
	err    error // what ended the stream
}

func drain(t *testing.T, s llm.Stream) result {
	t.Helper()
	var r result
	var acc llm.CallAccumulator
	for {
		c, err := s.Recv()
		if err != nil {
			r.err = err
			break
		}
		if c.Usage != nil {
			if r.usage != nil || c.Text != "" || c.ToolCall != nil {
				t.Errorf("usage %+v reported twice or with the answer", *c.Usage)
			}
			r.usage = c.Usage
			continue
		}
		r.chunks = append(r.chunks, c)
		r.text += c.Text
		if c.ToolCall != nil {
			acc.Add(*c.ToolCall)
		}
	}
	r.calls = acc.Calls()
	if len(r.calls) == 0 {
		r.calls = nil
	}
	return r
}

func run(t *testing.T, m *Model, req llm.Request) result {
	t.Helper()
	s, err := m.Stream(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return drain(t, s)
}

var hello = llm.Request{Context: llm.ChatContext{Items: []llm.Item{{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Hi"}}}}

func TestStreamText(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "Hello there, how can I help?"})))
	r := run(t, m, hello)
	if r.err != io.EOF {
		t.Fatalf("stream ended with %v, want io.EOF", r.err)
	}
	if r.text != "Hello there, how can I help?" {
		t.Errorf("text %q", r.text)
	}
	if len(r.chunks) != 6 {
		t.Errorf("%d chunks, want one a word (6): %+v", len(r.chunks), r.chunks)
	}
	reqs := srv.ChatRequests()
	if len(reqs) != 1 || reqs[0].Model != DefaultModel || !reqs[0].Stream {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestToolCallArgumentsSplitMidJSON(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{
		Text:      "Checking.",
		ToolCalls: []scripted.Call{{ID: "call_1", Name: "check_availability", Args: map[string]any{"party": 2, "time": "19:00"}}},
	})))
	srv.QueueChatFault(openaitest.ChatFault{ArgsFragment: 3})
	r := run(t, m, hello)
	if r.err != io.EOF {
		t.Fatalf("stream ended with %v", r.err)
	}
	var frags []string
	for _, c := range r.chunks {
		if c.ToolCall != nil && c.ToolCall.Arguments != "" {
			frags = append(frags, c.ToolCall.Arguments)
			if len(c.ToolCall.Arguments) > 3 {
				t.Errorf("fragment %q longer than 3 bytes: not passed through as sent", c.ToolCall.Arguments)
			}
		}
	}
	if len(frags) < 5 {
		t.Errorf("fragments %q: want the arguments in many pieces", frags)
	}
	want := []llm.ToolCall{{ID: "call_1", Name: "check_availability", Arguments: json.RawMessage(`{"party":2,"time":"19:00"}`)}}
	if !reflect.DeepEqual(r.calls, want) {
		t.Errorf("calls\n got %+v\nwant %+v", r.calls, want)
	}
	if r.text != "Checking." {
		t.Errorf("text %q", r.text)
	}
}

var twoCalls = fast(scripted.Response{ToolCalls: []scripted.Call{
	{ID: "call_a", Name: "get_weather", Args: map[string]string{"city": "Paris"}},
	{ID: "call_b", Name: "get_time", Args: map[string]string{"zone": "CET"}},
}})

var twoCallsWant = []llm.ToolCall{
	{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
	{ID: "call_b", Name: "get_time", Arguments: json.RawMessage(`{"zone":"CET"}`)},
}

func TestToolCallIndexFromOne(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(twoCalls))
	srv.QueueChatFault(openaitest.ChatFault{IndexBase: 1, ArgsFragment: 5})
	r := run(t, m, hello)
	if r.err != io.EOF {
		t.Fatalf("stream ended with %v", r.err)
	}
	seen := map[int]bool{}
	for _, c := range r.chunks {
		seen[c.ToolCall.Index] = true
	}
	if !reflect.DeepEqual(seen, map[int]bool{1: true, 2: true}) {
		t.Errorf("indexes %v, want the provider's 1 and 2 passed through", seen)
	}
	if !reflect.DeepEqual(r.calls, twoCallsWant) {
		t.Errorf("calls\n got %+v\nwant %+v", r.calls, twoCallsWant)
	}
}

func TestToolCallIndexMissing(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(twoCalls))
	srv.QueueChatFault(openaitest.ChatFault{OmitIndex: true, ArgsFragment: 4})
	r := run(t, m, hello)
	if r.err != io.EOF {
		t.Fatalf("stream ended with %v", r.err)
	}
	if !reflect.DeepEqual(r.calls, twoCallsWant) {
		t.Errorf("calls\n got %+v\nwant %+v", r.calls, twoCallsWant)
	}
}

func TestErrorMidStream(t *testing.T) {
	for _, fail := range []openaitest.ChatFailure{openaitest.ChatFailEvent, openaitest.ChatFailDrop} {
		t.Run(map[openaitest.ChatFailure]string{openaitest.ChatFailEvent: "event", openaitest.ChatFailDrop: "drop"}[fail], func(t *testing.T) {
			srv, m, w := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "one two three"})))
			srv.QueueChatFault(openaitest.ChatFault{Fail: fail, FailAfter: 1, Message: "The engine overheated."})
			r := run(t, m, hello)
			if r.text != "one " {
				t.Errorf("text %q before the failure, want %q", r.text, "one ")
			}
			if r.err == nil || r.err == io.EOF {
				t.Fatalf("stream ended with %v, want an error", r.err)
			}
			switch fail {
			case openaitest.ChatFailEvent:
				var apiErr *goopenai.APIError
				if !errors.As(r.err, &apiErr) || !strings.Contains(r.err.Error(), "The engine overheated.") {
					t.Errorf("error %v: want the provider's APIError and message", r.err)
				}
			case openaitest.ChatFailDrop:
				if !errors.Is(r.err, io.ErrUnexpectedEOF) {
					t.Errorf("error %v: want io.ErrUnexpectedEOF", r.err)
				}
			}
			if n := len(srv.ChatRequests()); n != 1 {
				t.Errorf("%d requests: a stream that delivered a chunk must not be retried", n)
			}
			if len(w.get()) != 0 {
				t.Errorf("waited %v after a delivered chunk", w.get())
			}
		})
	}
}

func TestDropBeforeFirstTokenIsRetried(t *testing.T) {
	srv, m, w := newTest(t, scripted.NewLLM(
		fast(scripted.Response{Text: "lost"}),
		fast(scripted.Response{Text: "second try"}),
	))
	srv.QueueChatFault(openaitest.ChatFault{Fail: openaitest.ChatFailDrop, FailAfter: 0})
	r := run(t, m, hello)
	if r.err != io.EOF || r.text != "second try" {
		t.Fatalf("got %q, %v; want the retried answer", r.text, r.err)
	}
	if n := len(srv.ChatRequests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	if got := w.get(); len(got) != 1 {
		t.Errorf("waits %v, want one backoff", got)
	}
}

func TestErrorEventBeforeFirstTokenIsNotRetried(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "never"})))
	srv.QueueChatFault(openaitest.ChatFault{Fail: openaitest.ChatFailEvent, FailAfter: 0, Message: "Invalid prompt."})
	r := run(t, m, hello)
	if r.err == nil || r.err == io.EOF || !strings.Contains(r.err.Error(), "Invalid prompt.") || r.text != "" {
		t.Fatalf("got %q, %v; want the provider's error", r.text, r.err)
	}
	if n := len(srv.ChatRequests()); n != 1 {
		t.Errorf("%d requests: an error the provider sent is an answer, not a broken connection", n)
	}
}

func TestRateLimitedThenSuccess(t *testing.T) {
	srv, m, w := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "ok"})))
	// The server asks for 1 s; the cap (testMax) bounds it.
	srv.QueueChatFault(openaitest.ChatFault{Status: 429, RetryAfter: "1"})
	r := run(t, m, hello)
	if r.err != io.EOF || r.text != "ok" {
		t.Fatalf("got %q, %v", r.text, r.err)
	}
	if got := w.get(); !reflect.DeepEqual(got, []time.Duration{testMax}) {
		t.Errorf("waits %v, want Retry-After capped at %v", got, testMax)
	}
	if n := len(srv.ChatRequests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestRetryAfterShorterThanCapIsHonoured(t *testing.T) {
	srv, m, w := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "ok"})))
	srv.QueueChatFault(openaitest.ChatFault{Status: 429, RetryAfter: "0.03"})
	if r := run(t, m, hello); r.err != io.EOF {
		t.Fatal(r.err)
	}
	if got := w.get(); !reflect.DeepEqual(got, []time.Duration{30 * time.Millisecond}) {
		t.Errorf("waits %v, want the server's 30ms", got)
	}
}

func TestRateLimitedExhausted(t *testing.T) {
	srv, m, w := newTest(t, scripted.NewLLM())
	f := openaitest.ChatFault{Status: 429, Message: "Rate limit reached for gpt-4o-mini."}
	srv.QueueChatFault(f, f, f, f, f)
	r := run(t, m, hello)
	if !errors.Is(r.err, ErrRateLimited) || errors.Is(r.err, ErrServer) {
		t.Fatalf("error %v, want ErrRateLimited", r.err)
	}
	var apiErr *goopenai.APIError
	if !errors.As(r.err, &apiErr) || apiErr.HTTPStatusCode != 429 {
		t.Errorf("error %v: want the *APIError with status 429", r.err)
	}
	for _, s := range []string{"429", "Rate limit reached for gpt-4o-mini.", "attempts: 4"} {
		if !strings.Contains(r.err.Error(), s) {
			t.Errorf("error %q does not mention %q", r.err, s)
		}
	}
	if n := len(srv.ChatRequests()); n != 4 {
		t.Errorf("%d requests, want 1 + 3 retries", n)
	}
	got := w.get()
	if len(got) != 3 {
		t.Fatalf("waits %v, want 3", got)
	}
	for i, d := range got {
		hi := min(testBase<<i, testMax)
		if d < hi/2 || d > hi {
			t.Errorf("wait %d is %v, want in [%v, %v]", i, d, hi/2, hi)
		}
	}
}

func TestServerErrorTwiceThenSuccess(t *testing.T) {
	srv, m, w := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "ok"})))
	srv.QueueChatFault(openaitest.ChatFault{Status: 500}, openaitest.ChatFault{Status: 503})
	r := run(t, m, hello)
	if r.err != io.EOF || r.text != "ok" {
		t.Fatalf("got %q, %v", r.text, r.err)
	}
	if n := len(srv.ChatRequests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	got := w.get()
	if len(got) != 2 || got[0] < testBase/2 || got[0] > testBase || got[1] < testBase || got[1] > 2*testBase {
		t.Errorf("waits %v, want ~%v then ~%v (exponential, jittered)", got, testBase, 2*testBase)
	}
}

func TestServerErrorExhausted(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(), WithRetries(1, testBase, testMax))
	srv.QueueChatFault(openaitest.ChatFault{Status: 502}, openaitest.ChatFault{Status: 500, Message: "Boiler room on fire."})
	r := run(t, m, hello)
	if !errors.Is(r.err, ErrServer) || !strings.Contains(r.err.Error(), "Boiler room on fire.") || !strings.Contains(r.err.Error(), "500") {
		t.Fatalf("error %v, want ErrServer with the last status and message", r.err)
	}
	if n := len(srv.ChatRequests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestBadRequestIsNotRetried(t *testing.T) {
	srv, m, w := newTest(t, scripted.NewLLM())
	srv.QueueChatFault(openaitest.ChatFault{Status: 400, Message: "Invalid schema for function 'x'."})
	r := run(t, m, hello)
	if r.err == nil || errors.Is(r.err, ErrRateLimited) || errors.Is(r.err, ErrServer) {
		t.Fatalf("error %v", r.err)
	}
	var apiErr *goopenai.APIError
	if !errors.As(r.err, &apiErr) || apiErr.HTTPStatusCode != 400 || !strings.Contains(r.err.Error(), "Invalid schema for function 'x'.") {
		t.Errorf("error %v: want the 400 APIError and its message", r.err)
	}
	if n := len(srv.ChatRequests()); n != 1 || len(w.get()) != 0 {
		t.Errorf("%d requests, waits %v: a 400 must not be retried", n, w.get())
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	m, err := New(WithBaseURL(url+"/v1"), WithAPIKey("sk-x"), WithRetries(2, testBase, testMax))
	if err != nil {
		t.Fatal(err)
	}
	w := &waits{}
	m.wait = w.wait
	r := run(t, m, hello)
	if r.err == nil || r.err == io.EOF || !strings.Contains(r.err.Error(), "attempts: 3") {
		t.Fatalf("error %v, want a connection failure after 3 attempts", r.err)
	}
	if len(w.get()) != 2 {
		t.Errorf("waits %v, want 2", w.get())
	}
}

// recvTimed calls Recv in the background so a test can bound how long it
// takes, and fails the test rather than hang if it never returns.
func recvTimed(t *testing.T, s llm.Stream, act func()) (error, time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := s.Recv()
		done <- err
	}()
	act()
	start := time.Now()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(4 * time.Second):
		t.Fatal("Recv still blocked 4s after the stream was ended")
		return nil, 0
	}
}

func TestCancelWhileWaitingForFirstToken(t *testing.T) {
	for _, fault := range []struct {
		name string
		f    openaitest.ChatFault
	}{
		{"headers sent", openaitest.ChatFault{FirstTokenDelay: 5 * time.Second}},
		{"no headers yet", openaitest.ChatFault{HeaderDelay: 5 * time.Second}},
	} {
		t.Run(fault.name, func(t *testing.T) {
			srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "too late"})))
			srv.QueueChatFault(fault.f)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			start := time.Now()
			s, err := m.Stream(ctx, hello)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Errorf("Stream took %v: it must return at once", d)
			}
			err, took := recvTimed(t, s, func() {
				time.Sleep(50 * time.Millisecond)
				cancel()
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Recv: %v, want an error wrapping context.Canceled", err)
			}
			// Not a timing benchmark: anything near the 5 s delay means
			// the cancel did not reach the blocked read.
			if took > 500*time.Millisecond {
				t.Errorf("Recv returned %v after cancel", took)
			}
			if _, err := s.Recv(); !errors.Is(err, context.Canceled) {
				t.Errorf("second Recv: %v", err)
			}
		})
	}
}

func TestDeadlineWhileWaitingForFirstToken(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "too late"})))
	srv.QueueChatFault(openaitest.ChatFault{FirstTokenDelay: 5 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := func() result {
		s, err := m.Stream(ctx, hello)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return drain(t, s)
	}()
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("error %v, want DeadlineExceeded", r.err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v with a 50ms deadline", d)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(), WithRetries(3, 5*time.Second, 5*time.Second))
	m.wait = sleep // the real wait, which must give way to the context
	srv.QueueChatFault(openaitest.ChatFault{Status: 503})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, err := m.Stream(ctx, hello)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err, took := recvTimed(t, s, func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	})
	if !errors.Is(err, context.Canceled) || took > 500*time.Millisecond {
		t.Errorf("Recv: %v after %v, want context.Canceled at once", err, took)
	}
}

func TestBackoffReallyWaits(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "ok"})), WithRetries(1, time.Millisecond, 80*time.Millisecond))
	m.wait = sleep
	srv.QueueChatFault(openaitest.ChatFault{Status: 429, RetryAfter: "5"})
	start := time.Now()
	r := run(t, m, hello)
	took := time.Since(start)
	if r.err != io.EOF {
		t.Fatal(r.err)
	}
	if took < 80*time.Millisecond || took > 3*time.Second {
		t.Errorf("took %v, want the 80ms cap on a 5s Retry-After", took)
	}
}

func TestCloseUnblocksRecv(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "too late"})))
	srv.QueueChatFault(openaitest.ChatFault{FirstTokenDelay: 5 * time.Second})
	s, err := m.Stream(t.Context(), hello)
	if err != nil {
		t.Fatal(err)
	}
	err, took := recvTimed(t, s, func() {
		time.Sleep(50 * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if !errors.Is(err, ErrClosed) || took > 500*time.Millisecond {
		t.Errorf("Recv: %v after %v, want ErrClosed at once", err, took)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Recv(); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv after Close: %v", err)
	}
}

func TestCloseBeforeRecvAndMidStream(t *testing.T) {
	_, m, _ := newTest(t, scripted.NewLLM(
		fast(scripted.Response{Text: "a b c"}),
		fast(scripted.Response{Text: "a b c"}),
	))
	s, err := m.Stream(t.Context(), hello)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Recv(); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv after an immediate Close: %v", err)
	}
	s, err = m.Stream(t.Context(), hello)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Recv(); err != nil || c.Text != "a " {
		t.Fatalf("first Recv: %+v, %v", c, err)
	}
	s.Close()
	s.Close()
	if _, err := s.Recv(); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv after Close mid-stream: %v", err)
	}
}

func TestStreamEndingWithoutFinishIsAnError(t *testing.T) {
	// A provider whose stream stops cleanly but early: no finish_reason,
	// no [DONE].
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Half"}}]}`+"\n\n")
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	m, err := New(WithBaseURL(srv.URL), WithAPIKey("sk-x"), WithRetries(0, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, m, hello)
	if r.text != "Half" || !errors.Is(r.err, io.ErrUnexpectedEOF) {
		t.Errorf("got %q, %v; want the text then io.ErrUnexpectedEOF", r.text, r.err)
	}
}

func TestRequestMapping(t *testing.T) {
	brain := scripted.NewLLM(fast(scripted.Response{Text: "Booked."}))
	srv, m, _ := newTest(t, brain, WithModel("gpt-test"), WithTemperature(0.25))
	params := json.RawMessage(`{"type":"object","properties":{"party":{"type":"integer"}},"required":["party"]}`)
	req := llm.Request{
		Instructions: "You book tables.",
		Tools: []llm.ToolSpec{
			{Name: "check", Description: "Check availability.", Parameters: params},
			{Name: "book", Description: "Book.", Parameters: params},
		},
		Context: llm.ChatContext{Items: []llm.Item{
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Two at seven?"},
			{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "Checking."},
			{Kind: llm.KindToolCall, CallID: "call_1", Name: "check", Arguments: json.RawMessage(`{"party":2}`)},
			{Kind: llm.KindToolCall, CallID: "call_2", Name: "book", Arguments: json.RawMessage(`{"party":2}`)},
			{Kind: llm.KindToolResult, CallID: "call_1", Name: "check", Output: `{"available":true}`},
			{Kind: llm.KindToolResult, CallID: "call_2", Name: "book", Output: "error: no card", IsError: true},
			{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "It's free but"},
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "Book it anyway."},
		}},
	}
	if r := run(t, m, req); r.err != io.EOF || r.text != "Booked." {
		t.Fatalf("got %q, %v", r.text, r.err)
	}
	reqs := srv.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	got := reqs[0]
	call := func(id, name string) openaitest.ChatToolCall {
		return openaitest.ChatToolCall{ID: id, Type: "function", Function: openaitest.ChatFunctionCall{Name: name, Arguments: `{"party":2}`}}
	}
	wantMsgs := []openaitest.ChatMessage{
		{Role: "system", Content: "You book tables."},
		{Role: "user", Content: "Two at seven?"},
		{Role: "assistant", Content: "Checking.", ToolCalls: []openaitest.ChatToolCall{call("call_1", "check"), call("call_2", "book")}},
		{Role: "tool", ToolCallID: "call_1", Content: `{"available":true}`},
		{Role: "tool", ToolCallID: "call_2", Content: "error: no card"},
		{Role: "assistant", Content: "It's free but"},
		{Role: "user", Content: "Book it anyway."},
	}
	if !reflect.DeepEqual(got.Messages, wantMsgs) {
		t.Errorf("messages on the wire\n got %+v\nwant %+v", got.Messages, wantMsgs)
	}
	if got.Model != "gpt-test" {
		t.Errorf("model %q", got.Model)
	}
	body := string(srv.Requests()[0].Body)
	if !strings.Contains(body, `"temperature":0.25`) {
		t.Errorf("body %s: want the temperature", body)
	}
	// Round trip: what the brain saw is what we asked, less IsError,
	// which the wire cannot carry (the output says it).
	want := req
	want.Context = req.Context.Clone()
	want.Context.Items[5].IsError = false
	seen := brain.Requests()[0]
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("request after the round trip\n got %+v\nwant %+v", seen, want)
	}
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	const key = "sk-proj-SECRET-0123456789abcdef"
	srv := openaitest.New(scripted.NewLLM(fast(scripted.Response{Text: "a b"})), openaitest.WithAPIKey(key))
	defer srv.Close()
	m, err := New(WithBaseURL(srv.URL()), WithAPIKey(key), WithRetries(1, time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Providers echo keys back (OpenAI shows a part of a wrong one).
	echo := "Incorrect API key provided: " + key + "."
	cases := []struct {
		name   string
		faults []openaitest.ChatFault
		is     error
	}{
		{"401", []openaitest.ChatFault{{Status: 401, Message: echo, Type: "invalid_request_error", Code: "invalid_api_key"}}, nil},
		{"429", []openaitest.ChatFault{{Status: 429, Message: echo}, {Status: 429, Message: echo}}, ErrRateLimited},
		{"mid-stream", []openaitest.ChatFault{{Fail: openaitest.ChatFailEvent, FailAfter: 1, Message: echo}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv.QueueChatFault(c.faults...)
			r := run(t, m, hello)
			if r.err == nil || r.err == io.EOF {
				t.Fatalf("no error: %v", r.err)
			}
			if strings.Contains(r.err.Error(), key) {
				t.Errorf("error %q contains the API key", r.err)
			}
			if !strings.Contains(r.err.Error(), "Incorrect API key provided: [redacted].") {
				t.Errorf("error %q lost the provider's message", r.err)
			}
			var apiErr *goopenai.APIError
			if !errors.As(r.err, &apiErr) {
				t.Errorf("error %v no longer wraps the *APIError", r.err)
			}
			if c.is != nil && !errors.Is(r.err, c.is) {
				t.Errorf("error %v does not wrap %v", r.err, c.is)
			}
		})
	}
	// A wrong key: the server's own 401.
	m2, err := New(WithBaseURL(srv.URL()), WithAPIKey("sk-wrong-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, m2, hello)
	var apiErr *goopenai.APIError
	if !errors.As(r.err, &apiErr) || apiErr.HTTPStatusCode != 401 || strings.Contains(r.err.Error(), "sk-wrong-0123456789") {
		t.Errorf("wrong key: %v", r.err)
	}
}

func TestNewDefaults(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	if _, err := New(); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("New without a key: %v, want ErrNoAPIKey", err)
	}
	srv := openaitest.New(scripted.NewLLM(fast(scripted.Response{Text: "from env"})))
	defer srv.Close()
	t.Setenv("OPENAI_API_KEY", openaitest.APIKey)
	t.Setenv("OPENAI_BASE_URL", srv.URL())
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "gpt-4o-mini" {
		t.Errorf("Name() = %q", m.Name())
	}
	if r := run(t, m, hello); r.err != io.EOF || r.text != "from env" {
		t.Errorf("via the environment: %q, %v", r.text, r.err)
	}
	if _, err := New(WithRetries(-1, 0, 0)); err == nil {
		t.Error("negative retries accepted")
	}
	t.Setenv("OPENAI_BASE_URL", "")
	m, err = New()
	if err != nil {
		t.Fatal(err)
	}
	if m.cfg.baseURL != DefaultBaseURL {
		t.Errorf("base URL %q", m.cfg.baseURL)
	}
	tr, ok := m.cfg.httpClient.Transport.(*http.Transport)
	if !ok || tr.ResponseHeaderTimeout == 0 || m.cfg.httpClient.Timeout != 0 {
		t.Errorf("default client: want a header timeout and no overall timeout")
	}
}

func TestConcurrentStreams(t *testing.T) {
	_, m, _ := newTest(t, scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		return fast(scripted.Response{Text: "echo " + req.Context.Items[0].Text})
	}))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			q := strings.Repeat("x", i+1)
			r := run(t, m, llm.Request{Context: llm.ChatContext{Items: []llm.Item{{Kind: llm.KindMessage, Role: llm.RoleUser, Text: q}}}})
			if r.err != io.EOF || r.text != "echo "+q {
				t.Errorf("stream %d: %q, %v", i, r.text, r.err)
			}
		})
	}
	wg.Wait()
}

func TestInsufficientQuotaIsNotRetried(t *testing.T) {
	srv, m, w := newTest(t, scripted.NewLLM())
	srv.QueueChatFault(openaitest.ChatFault{Status: 429, Code: "insufficient_quota", Message: "You exceeded your current quota."})
	r := run(t, m, hello)
	if !errors.Is(r.err, ErrRateLimited) || !strings.Contains(r.err.Error(), "You exceeded your current quota.") {
		t.Fatalf("error %v", r.err)
	}
	if n := len(srv.ChatRequests()); n != 1 || len(w.get()) != 0 {
		t.Errorf("%d requests, waits %v: an empty quota does not refill in seconds", n, w.get())
	}
}

func TestRequestBody(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "ok"})))
	if r := run(t, m, llm.Request{Instructions: "Be brief.", Context: hello.Context}); r.err != io.EOF {
		t.Fatal(r.err)
	}
	got := string(srv.Requests()[0].Body)
	want := `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`
	if got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
}

// The answer's token counts, which OpenAI sends in a last chunk of their
// own when asked, reach the caller as a Usage chunk after the answer.
func TestUsageReportedAfterTheAnswer(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "Two words."})))
	r := run(t, m, hello)
	if r.err != io.EOF {
		t.Fatal(r.err)
	}
	if r.usage == nil {
		t.Fatal("no usage reported")
	}
	if r.usage.InputTokens <= 0 || r.usage.OutputTokens != len(r.chunks) {
		t.Errorf("usage %+v, want the prompt counted and %d answer tokens", *r.usage, len(r.chunks))
	}
	if !strings.Contains(string(srv.Requests()[0].Body), `"include_usage":true`) {
		t.Error("the request did not ask for usage")
	}
}

// WithoutUsage leaves the option out, for servers that refuse it.
func TestWithoutUsageDoesNotAskForIt(t *testing.T) {
	srv, m, _ := newTest(t, scripted.NewLLM(fast(scripted.Response{Text: "ok"})), WithoutUsage())
	r := run(t, m, hello)
	if r.err != io.EOF || r.usage != nil {
		t.Fatalf("err %v usage %v, want EOF and none", r.err, r.usage)
	}
	if strings.Contains(string(srv.Requests()[0].Body), "stream_options") {
		t.Errorf("body %s asks for usage", srv.Requests()[0].Body)
	}
}
