package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
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
	k, err := NewCore(Agent{Instructions: "x"}, nopEdges{}, func(Input) {}, func(events.Event) {},
		Config{ID: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
		e := c.turns.epoch
		for range 20 {
			c.handle(ModelText{Epoch: e, Text: "word "})
		}
		c.handle(SpeechWords{Epoch: e, Words: words})
		c.handle(ModelDone{Epoch: e})
		c.handle(PlayoutFinished{Epoch: e})
		if i%64 == 0 {
			c.chat.entries = c.chat.entries[:0] // keep the context from growing without bound
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*perTurn)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkToolCallCore measures what one tool call costs the core: the
// request, the ledger, the dispatch, the outcome, the commit and the
// follow-up turn it triggers (two turns per call, as in a real session).
func BenchmarkToolCallCore(b *testing.B) {
	lookup := tools.MustNew("lookup", "", func(context.Context, struct{}) (string, error) { return "", nil },
		tools.WithEffect(tools.Read))
	k, err := NewCore(Agent{Instructions: "x", Tools: []*tools.Tool{lookup}}, nopEdges{}, func(Input) {}, func(events.Event) {},
		Config{ID: "bench", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	c := k.c
	call := []llm.ToolCall{{Name: "lookup", Arguments: json.RawMessage(`{}`)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.handle(UserText{Text: "look"})
		e := c.turns.epoch
		c.handle(ModelDone{Epoch: e, Calls: call})
		c.handle(SpeechDone{Epoch: e})
		c.handle(PlayoutFinished{Epoch: e})
		c.handle(ToolOutcome{CallID: fmt.Sprintf("call_bench_%d", c.calls.n), State: tools.StateSucceeded, Output: "ok"})
		f := c.turns.epoch
		c.handle(ModelDone{Epoch: f})
		c.handle(PlayoutFinished{Epoch: f})
		c.chat.entries = c.chat.entries[:0] // rendering a long context is measured elsewhere

	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/call")
}
