package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// nopEdges accepts every command and does nothing, so a benchmark measures
// the conductor alone.
type nopEdges struct{}

func (nopEdges) StartGeneration(uint64, llm.Request) {}
func (nopEdges) CancelGeneration(uint64)             {}
func (nopEdges) FlushOutput(uint64)                  {}
func (nopEdges) Played(uint64) time.Duration         { return time.Hour }
func (nopEdges) RunTool(ToolRun)                     {}
func (nopEdges) CancelTool(string)                   {}
func (nopEdges) Reconcile(ToolRun)                   {}

// BenchmarkConductorEvents measures how many inputs per second one
// conductor handles: a full turn (user input, 20 text pieces, word timings,
// model done, playout finished) is 24 inputs.
func BenchmarkConductorEvents(b *testing.B) {
	k, err := NewCore(&Agent{Instructions: "x"}, nopEdges{}, func(Input) {}, func(events.Event) {},
		WithID("bench"), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	c := k.c
	words := []tts.WordTiming{{Word: "hello", End: 100 * time.Millisecond}, {Word: "there", Start: 100 * time.Millisecond, End: 200 * time.Millisecond}}
	const perTurn = 24
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.handle(UserText{Text: "hi"})
		e := c.epoch
		for range 20 {
			c.handle(ModelText{Epoch: e, Text: "word "})
		}
		c.handle(SpeechWords{Epoch: e, Words: words})
		c.handle(ModelDone{Epoch: e})
		c.handle(PlayoutFinished{Epoch: e})
		if i%64 == 0 {
			c.chat = c.chat[:0] // keep the context from growing without bound
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*perTurn)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkPushAudio is the steady-state inbound frame path: voice activity
// and the recogniser write, per 20 ms frame. It must not allocate.
func BenchmarkPushAudio(b *testing.B) {
	rec := scripted.NewSTT()
	s, err := New(&Agent{Model: scripted.NewLLM(), STT: rec})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := rec.Stream(ctx, media.Rate16k)
	if err != nil {
		b.Fatal(err)
	}
	s.in.stream = stream
	f := media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.PushAudio(ctx, f); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToolCallCore measures what one tool call costs the core: the
// request, the ledger, the dispatch, the outcome, the commit and the
// follow-up turn it triggers (two turns per call, as in a real session).
func BenchmarkToolCallCore(b *testing.B) {
	lookup := tools.MustNew("lookup", "", func(context.Context, struct{}) (string, error) { return "", nil },
		tools.WithEffect(tools.Read))
	k, err := NewCore(&Agent{Instructions: "x", Tools: []*tools.Tool{lookup}}, nopEdges{}, func(Input) {}, func(events.Event) {},
		WithID("bench"), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		b.Fatal(err)
	}
	c := k.c
	call := []llm.ToolCall{{Name: "lookup", Arguments: json.RawMessage(`{}`)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.handle(UserText{Text: "look"})
		e := c.epoch
		c.handle(ModelDone{Epoch: e, Calls: call})
		c.handle(SpeechDone{Epoch: e})
		c.handle(PlayoutFinished{Epoch: e})
		c.handle(ToolOutcome{CallID: fmt.Sprintf("call_bench_%d", c.ncall), State: tools.StateSucceeded, Output: "ok"})
		f := c.epoch
		c.handle(ModelDone{Epoch: f})
		c.handle(PlayoutFinished{Epoch: f})
		c.chat = c.chat[:0] // rendering a long context is measured elsewhere

	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/call")
}

// BenchmarkSessionToolCallsLeak runs b.N tool calls through live sessions
// (100 chained calls each, real goroutines, deadlines and journal) and
// reports the goroutines left once they have all stopped. Run it with
// -benchtime=100000x for the 100k-call figure.
func BenchmarkSessionToolCallsLeak(b *testing.B) {
	before := goruntime.NumGoroutine()
	const perSession = 100
	b.ReportAllocs()
	for done := 0; done < b.N; done += perSession {
		if err := chainedCalls(min(perSession, b.N-done)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// Stopped goroutines may take a moment to be reaped.
	deadline := time.Now().Add(5 * time.Second)
	for goruntime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	b.ReportMetric(float64(goruntime.NumGoroutine()-before), "leaked-goroutines")
}

// chainedCalls runs one session in which the model makes n tool calls one
// after another, and stops it once the last has been answered.
func chainedCalls(n int) error {
	var runs atomic.Int32
	lookup := tools.MustNew("lookup", "", func(ctx context.Context, _ struct{}) (string, error) {
		runs.Add(1)
		return "ok", nil
	}, tools.WithEffect(tools.Read))
	model := scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		results := 0
		for _, it := range req.Context.Items {
			if it.Kind == llm.KindToolResult {
				results++
			}
		}
		if results < n {
			return scripted.Response{ToolCalls: []scripted.Call{{Name: "lookup"}}, TokensPerSecond: math.Inf(1)}
		}
		return scripted.Response{Text: "done", TokensPerSecond: math.Inf(1)}
	})
	s, err := New(&Agent{Model: model, Tools: []*tools.Tool{lookup}}, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return err
	}
	sub := s.Subscribe(1 << 12)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	if err := s.Inject(ctx, "go"); err != nil {
		return err
	}
	for e := range sub.C() {
		if e.Kind == events.Idle {
			break
		}
	}
	cancel()
	if err := <-errc; err != nil {
		return err
	}
	if got := runs.Load(); got != int32(n) {
		return fmt.Errorf("%d calls ran; want %d", got, n)
	}
	return nil
}
