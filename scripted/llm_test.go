package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/llm"
)

var errBoom = errors.New("boom")

type timedChunk struct {
	at    time.Duration
	chunk llm.Chunk
}

// drainLLM reads s to its end, noting when each chunk arrived.
func drainLLM(t *testing.T, s llm.Stream) ([]timedChunk, time.Duration, error) {
	t.Helper()
	start := time.Now()
	var out []timedChunk
	for {
		c, err := s.Recv()
		if err != nil {
			return out, time.Since(start), err
		}
		out = append(out, timedChunk{time.Since(start), c})
	}
}

func TestLLMTextTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{TTFB: 300 * time.Millisecond, Text: "Hello there,  world."})
		s, err := m.Stream(t.Context(), llm.Request{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		chunks, end, err := drainLLM(t, s)
		if err != io.EOF {
			t.Fatalf("end of stream: %v, want io.EOF", err)
		}
		want := []timedChunk{
			{300 * time.Millisecond, llm.Chunk{Text: "Hello "}},
			{320 * time.Millisecond, llm.Chunk{Text: "there,  "}},
			{340 * time.Millisecond, llm.Chunk{Text: "world."}},
		}
		if !reflect.DeepEqual(chunks, want) {
			t.Fatalf("chunks\n got %+v\nwant %+v", chunks, want)
		}
		if end != 340*time.Millisecond {
			t.Errorf("EOF at %v, want right after the last chunk at 340ms", end)
		}
		if _, err := s.Recv(); err != io.EOF {
			t.Errorf("Recv after EOF: %v", err)
		}
	})
}

func TestLLMRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{Text: "a b c d", TokensPerSecond: 4})
		s, _ := m.Stream(t.Context(), llm.Request{})
		chunks, _, _ := drainLLM(t, s)
		for i, c := range chunks {
			if want := time.Duration(i) * 250 * time.Millisecond; c.at != want {
				t.Errorf("chunk %d at %v, want %v", i, c.at, want)
			}
		}
	})
}

func TestLLMSlowConsumerDoesNotDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{TTFB: 100 * time.Millisecond, Text: "a b c d e"})
		s, _ := m.Stream(t.Context(), llm.Request{})
		start := time.Now()
		time.Sleep(time.Second) // everything is overdue by now
		chunks, _, err := drainLLM(t, s)
		if err != io.EOF || len(chunks) != 5 {
			t.Fatalf("got %d chunks, %v", len(chunks), err)
		}
		if d := time.Since(start); d != time.Second {
			t.Errorf("overdue chunks took until %v, want them at once", d)
		}
	})
}

func TestLLMEmptyResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{TTFB: 50 * time.Millisecond})
		s, _ := m.Stream(t.Context(), llm.Request{})
		chunks, end, err := drainLLM(t, s)
		if err != io.EOF || len(chunks) != 0 || end != 50*time.Millisecond {
			t.Errorf("got %v chunks, %v at %v; want io.EOF at 50ms", len(chunks), err, end)
		}
	})
}

func TestLLMToolCalls(t *testing.T) {
	calls := []Call{
		{ID: "call_1", Name: "book", Args: map[string]any{"party": 4, "name": "Zoë", "time": "19:30"}},
		{ID: "call_2", Name: "raw", Args: json.RawMessage(`{"a":[1,2,3]}`)},
		{Name: "str", Args: `{"q":"x"}`},
		{ID: "call_4", Name: "none"},
	}
	wantArgs := []string{`{"name":"Zoë","party":4,"time":"19:30"}`, `{"a":[1,2,3]}`, `{"q":"x"}`, `{}`}
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{Text: "One moment.", ToolCalls: calls})
		s, _ := m.Stream(t.Context(), llm.Request{})
		chunks, end, err := drainLLM(t, s)
		if err != io.EOF {
			t.Fatal(err)
		}
		var (
			text strings.Builder
			acc  llm.CallAccumulator
		)
		for i, c := range chunks {
			if want := time.Duration(i) * 20 * time.Millisecond; c.at != want {
				t.Errorf("chunk %d at %v, want %v", i, c.at, want)
			}
			text.WriteString(c.chunk.Text)
			d := c.chunk.ToolCall
			if d == nil {
				continue
			}
			if i < 2 {
				t.Errorf("tool call delta %d before the text", i)
			}
			// Even chunks after the text open a call, odd ones finish it.
			call := calls[d.Index]
			if (i-2)%2 == 0 {
				if d.ID != call.ID || d.Name != call.Name {
					t.Errorf("first fragment of call %d: %+v", d.Index, d)
				}
				if d.Arguments == wantArgs[d.Index] {
					t.Errorf("call %d arguments not split: %q", d.Index, d.Arguments)
				}
			} else if d.ID != "" || d.Name != "" {
				t.Errorf("second fragment of call %d repeats id or name: %+v", d.Index, d)
			}
			acc.Add(*d)
		}
		if len(chunks) != 2+2*len(calls) {
			t.Errorf("%d chunks, want 2 words and 2 per call", len(chunks))
		}
		if end != chunks[len(chunks)-1].at {
			t.Errorf("EOF at %v, after the last chunk at %v", end, chunks[len(chunks)-1].at)
		}
		if text.String() != "One moment." {
			t.Errorf("text %q", text.String())
		}
		got := acc.Calls()
		if len(got) != len(calls) {
			t.Fatalf("%d calls, want %d", len(got), len(calls))
		}
		for i, c := range got {
			if c.ID != calls[i].ID || c.Name != calls[i].Name || string(c.Arguments) != wantArgs[i] {
				t.Errorf("call %d: %s %s %s, want %s %s %s", i, c.ID, c.Name, c.Arguments, calls[i].ID, calls[i].Name, wantArgs[i])
			}
		}
	})
}

func TestLLMBadArgs(t *testing.T) {
	m := NewLLM(Response{ToolCalls: []Call{{Name: "f", Args: func() {}}}})
	if _, err := m.Stream(context.Background(), llm.Request{}); err == nil {
		t.Fatal("unmarshallable arguments accepted")
	}
}

func TestLLMErrorAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{TTFB: 400 * time.Millisecond, Text: "never said", Err: errBoom})
		s, err := m.Stream(t.Context(), llm.Request{})
		if err != nil {
			t.Fatal(err)
		}
		chunks, end, err := drainLLM(t, s)
		if !errors.Is(err, errBoom) || len(chunks) != 0 || end != 400*time.Millisecond {
			t.Fatalf("got %d chunks then %v at %v; want errBoom at 400ms", len(chunks), err, end)
		}
		if _, err := s.Recv(); !errors.Is(err, errBoom) {
			t.Errorf("failure not sticky: %v", err)
		}
	})
}

func TestLLMErrorMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(
			Response{TTFB: 100 * time.Millisecond, Text: "one two three four", Err: errBoom, ErrAfter: 2},
			Response{Text: "short", Err: errBoom, ErrAfter: 5},
		)
		s, _ := m.Stream(t.Context(), llm.Request{})
		chunks, end, err := drainLLM(t, s)
		if !errors.Is(err, errBoom) {
			t.Fatalf("got %v, want errBoom", err)
		}
		if len(chunks) != 2 || chunks[0].chunk.Text != "one " || chunks[1].chunk.Text != "two " {
			t.Errorf("chunks before the failure: %+v", chunks)
		}
		if end != 140*time.Millisecond {
			t.Errorf("failure at %v, want 140ms, when the third chunk was due", end)
		}

		// Fewer chunks than ErrAfter: the failure replaces io.EOF.
		s, _ = m.Stream(t.Context(), llm.Request{})
		chunks, end, err = drainLLM(t, s)
		if !errors.Is(err, errBoom) || len(chunks) != 1 || end != 20*time.Millisecond {
			t.Errorf("got %d chunks then %v at %v; want 1 then errBoom at 20ms", len(chunks), err, end)
		}
	})
}

func TestLLMHangRespectsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{Text: "never", Hang: true})
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		s, _ := m.Stream(ctx, llm.Request{})
		chunks, end, err := drainLLM(t, s)
		if !errors.Is(err, context.DeadlineExceeded) || len(chunks) != 0 || end != 5*time.Second {
			t.Fatalf("got %d chunks then %v at %v; want deadline at 5s", len(chunks), err, end)
		}
	})
}

func TestLLMCloseUnblocksRecv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{Hang: true}, Response{TTFB: time.Hour})
		for range 2 {
			s, _ := m.Stream(t.Context(), llm.Request{})
			go func() {
				time.Sleep(time.Second)
				s.Close()
			}()
			_, end, err := drainLLM(t, s)
			if !errors.Is(err, ErrClosed) || end != time.Second {
				t.Errorf("got %v at %v, want ErrClosed at 1s", err, end)
			}
		}
	})
}

func TestLLMCancelIsPrompt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLM(Response{TTFB: time.Second, Text: "a b c"})
		ctx, cancel := context.WithCancel(t.Context())
		s, _ := m.Stream(ctx, llm.Request{})
		time.AfterFunc(50*time.Millisecond, cancel)
		_, end, err := drainLLM(t, s)
		if !errors.Is(err, context.Canceled) || end != 50*time.Millisecond {
			t.Fatalf("got %v at %v, want context.Canceled at 50ms", err, end)
		}

		// Chunks already due are not handed out once ctx is done.
		m = NewLLM(Response{Text: "a b c"})
		ctx, cancel = context.WithCancel(t.Context())
		s, _ = m.Stream(ctx, llm.Request{})
		time.Sleep(time.Second)
		cancel()
		if _, err := s.Recv(); !errors.Is(err, context.Canceled) {
			t.Errorf("Recv on a cancelled stream: %v", err)
		}
	})
}

func TestLLMScriptExhausted(t *testing.T) {
	m := NewLLM(Response{Text: "only"})
	if _, err := m.Stream(context.Background(), llm.Request{}); err != nil {
		t.Fatal(err)
	}
	_, err := m.Stream(context.Background(), llm.Request{})
	if !errors.Is(err, ErrScriptExhausted) {
		t.Fatalf("got %v, want ErrScriptExhausted", err)
	}
	if n := len(m.Requests()); n != 2 {
		t.Errorf("%d requests recorded, want 2", n)
	}
}

func TestLLMFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewLLMFunc(func(req llm.Request) Response {
			items := req.Context.Items
			return Response{Text: "You said: " + items[len(items)-1].Text}
		})
		for _, said := range []string{"hi", "bye now"} {
			req := llm.Request{Context: llm.ChatContext{Items: []llm.Item{{Kind: llm.KindMessage, Role: llm.RoleUser, Text: said}}}}
			s, err := m.Stream(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			chunks, _, _ := drainLLM(t, s)
			var b strings.Builder
			for _, c := range chunks {
				b.WriteString(c.chunk.Text)
			}
			if b.String() != "You said: "+said {
				t.Errorf("got %q", b.String())
			}
		}
	})
}

// An unpaced model gives the same answers from the same script, all at
// once, and its requests are the original's.
func TestLLMUnpacedAnswersAtOnceFromTheSameScript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paced := NewLLM(
			Response{TTFB: 300 * time.Millisecond, Text: "one two three", TokensPerSecond: 4},
			Response{TTFB: 300 * time.Millisecond, Text: "four five", ToolCalls: []Call{{Name: "f"}}},
			Response{TTFB: time.Second, Text: "six"},
		)
		fast := paced.Unpaced()
		if fast.Unpaced() != fast {
			t.Error("Unpaced of an unpaced model is a new model")
		}
		for i, want := range []string{"one two three", "four five"} {
			s, err := fast.Stream(t.Context(), llm.Request{Instructions: fmt.Sprint(i)})
			if err != nil {
				t.Fatal(err)
			}
			chunks, end, err := drainLLM(t, s)
			if err != io.EOF || end != 0 {
				t.Errorf("answer %d ended with %v after %v; want io.EOF at once", i, err, end)
			}
			var b strings.Builder
			for _, c := range chunks {
				b.WriteString(c.chunk.Text)
			}
			if b.String() != want {
				t.Errorf("answer %d: %q, want %q", i, b.String(), want)
			}
		}
		// The script is shared: the original goes on with the third
		// answer, at its own pace.
		s, err := paced.Stream(t.Context(), llm.Request{Instructions: "2"})
		if err != nil {
			t.Fatal(err)
		}
		chunks, _, _ := drainLLM(t, s)
		if len(chunks) != 1 || chunks[0].chunk.Text != "six" || chunks[0].at != time.Second {
			t.Errorf("the original's next answer: %+v; want \"six\" after its TTFB of 1s", chunks)
		}
		reqs := fast.Requests()
		if len(reqs) != 3 || reqs[0].Instructions != "0" || reqs[2].Instructions != "2" || len(paced.Requests()) != 3 {
			t.Errorf("requests %+v: want the three, on both", reqs)
		}
	})
}

func TestLLMRequestsAreCopies(t *testing.T) {
	m := NewLLM(Response{}, Response{})
	req := llm.Request{
		Instructions: "be brief",
		Context: llm.ChatContext{Items: []llm.Item{
			{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "hello"},
			{Kind: llm.KindToolCall, Name: "f", Arguments: json.RawMessage(`{"x":1}`)},
		}},
		Tools: []llm.ToolSpec{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	if _, err := m.Stream(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	// The caller reuses its request...
	req.Context.Items[0].Text = "changed"
	req.Context.Items[1].Arguments[5] = '9'
	req.Tools[0].Parameters[2] = 'X'
	// ...and a test scribbles on what it was given.
	got := m.Requests()
	got[0].Context.Items[0].Text = "scribbled"
	got[0].Tools[0].Name = "g"

	r := m.Requests()[0]
	if r.Context.Items[0].Text != "hello" || string(r.Context.Items[1].Arguments) != `{"x":1}` ||
		string(r.Tools[0].Parameters) != `{"type":"object"}` || r.Tools[0].Name != "f" {
		t.Errorf("recorded request was changed: %+v", r)
	}
}

func TestLLMConcurrent(t *testing.T) {
	const n = 20
	rs := make([]Response, n)
	for i := range rs {
		rs[i] = Response{Text: "x y", TokensPerSecond: 1e6}
	}
	m := NewLLM(rs...)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			s, err := m.Stream(context.Background(), llm.Request{Instructions: "i"})
			if err != nil {
				t.Error(err)
				return
			}
			for {
				if _, err := s.Recv(); err != nil {
					break
				}
			}
			_ = m.Requests()
		})
	}
	wg.Wait()
	if got := len(m.Requests()); got != n {
		t.Errorf("%d requests, want %d", got, n)
	}
}

func TestSplitWords(t *testing.T) {
	for _, s := range []string{"", " ", "a", "  lead", "trail  ", "a b\tc\n\nd", "日本 語"} {
		parts := splitWords(s)
		if strings.Join(parts, "") != s {
			t.Errorf("%q split into %q", s, parts)
		}
		for i, p := range parts {
			if strings.TrimSpace(p) == "" && len(parts) > 1 {
				t.Errorf("%q: blank part %d in %q", s, i, parts)
			}
		}
		if len(parts) > 0 && len(parts) != max(len(strings.Fields(s)), 1) {
			t.Errorf("%q: %d parts for %d words", s, len(parts), len(strings.Fields(s)))
		}
	}
}
