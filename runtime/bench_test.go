package runtime

import (
	"context"
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
)

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
