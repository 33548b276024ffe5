package runtime

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/scripted"
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
