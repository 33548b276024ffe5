package tracing_test

import (
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/calls/callstest"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tracing"
	"github.com/holdline/holdline/tracing/tracingtest"
)

var testKey = handoff.Key{ID: "k1", Secret: []byte("a snapshot key for the tracing tests")}

const (
	greeting = "Welcome to the Holdline bistro. I can book a table for you: tell me the day, the time, and how many of you are coming along tonight."
	request  = "Book a table for two at seven, please."
)

type bookArgs struct {
	Party int    `json:"party"`
	Time  string `json:"time"`
}

// bookingAgent greets at length (for the caller to cut in), books a
// table when asked, and confirms; each answer counts its tokens.
func bookingAgent(stt *scripted.STT) calls.AgentFunc {
	return func(context.Context) (*runtime.Agent, func(), error) {
		// 2.5 words a second: the greeting lasts some 11 s, time enough
		// for the caller to cut in on a busy machine.
		voice, err := scripted.NewTTS()
		if err != nil {
			return nil, nil, err
		}
		book := tools.MustNew("book_table", "Book a table.", func(_ context.Context, a bookArgs) (string, error) {
			return "booked: table 12", nil
		}, tools.WithEffect(tools.Mutation))
		model := scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
			items := req.Context.Items
			last := llm.Item{}
			if len(items) > 0 {
				last = items[len(items)-1]
			}
			switch {
			case last.Kind == llm.KindToolResult:
				return scripted.Response{TTFB: 30 * time.Millisecond, Text: "You are booked for seven.", Usage: &llm.Usage{InputTokens: 120, OutputTokens: 9}}
			case len(items) > 3: // the resumed call: the conversation so far is above
				return scripted.Response{TTFB: 30 * time.Millisecond, Text: "Sorry, we were cut off."}
			case strings.Contains(last.Text, "Book"):
				return scripted.Response{TTFB: 30 * time.Millisecond, Text: "Let me book that.",
					ToolCalls: []scripted.Call{{Name: "book_table", Args: map[string]any{"party": 2, "time": "19:00"}}},
					Usage:     &llm.Usage{InputTokens: 100, OutputTokens: 12}}
			}
			return scripted.Response{TTFB: 30 * time.Millisecond, Text: greeting, Usage: &llm.Usage{InputTokens: 50, OutputTokens: 30}}
		})
		return &runtime.Agent{Name: "booking", Instructions: "Book tables.", Model: model, TTS: voice, STT: stt,
			Tools: []*tools.Tool{book},
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				if s.Restored() {
					return nil
				}
				return s.GenerateReply(ctx, "Greet the caller.")
			}}, nil, nil
	}
}

// recorder keeps a call's events, for what the spans are checked against.
type recorder struct {
	mu  sync.Mutex
	evs []events.Event
}

func (r *recorder) observer(calls.Watch) (calls.Observer, map[string]string) { return r, nil }
func (r *recorder) Observe(e events.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
}
func (r *recorder) Close() {}
func (r *recorder) find(kind events.Kind) (events.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if e.Kind == kind {
			return e, true
		}
	}
	return events.Event{}, false
}
func (r *recorder) wait(t *testing.T, kind events.Kind, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		got := 0
		for _, e := range r.evs {
			if e.Kind == kind {
				got++
			}
		}
		r.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %d %s events within %v", n, kind, limit)
}

// speak pushes d of a tone (speech to the detector, level 0.3) or near
// silence, paced as a line delivers it.
func speak(t *testing.T, c *callstest.Call, d time.Duration, level float64) {
	t.Helper()
	n := media.SamplesFor(callstest.Rate, 20*time.Millisecond)
	for at := time.Duration(0); at < d; at += 20 * time.Millisecond {
		buf := make([]int16, n)
		for i := range buf {
			buf[i] = int16(level * math.MaxInt16 * math.Sin(2*math.Pi*440*float64(i)/float64(callstest.Rate)))
		}
		if err := c.Say(context.Background(), buf); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newHost(t *testing.T, st store.Store, worker string, opts ...calls.Option) *calls.Host {
	t.Helper()
	stt := scripted.NewSTT()
	stt.Say(request)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := calls.New(bookingAgent(stt), append([]calls.Option{
		calls.WithStore(st, worker, testKey), calls.WithLogger(logger),
		// The loopback line has no echo: spare the canceller's CPU.
		calls.WithSessionOptions(engine.WithInput(engine.InputConfig{Rate: callstest.Rate, NoEchoCancellation: true})),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A booking call with a barge-in and a tool, then the worker going away
// and another resuming the call, reaches an OTLP/HTTP receiver (the
// protobuf wire format, gzipped) as one trace: the spans' tree, names,
// gen_ai attributes and token counts, and the resumed life linked to the
// first.
func TestBookingCallIsOneTraceAcrossAResume(t *testing.T) {
	rcv := tracingtest.NewReceiver()
	defer rcv.Close()
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL())
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20sk-not-a-real-key")
	t.Setenv("OTEL_SERVICE_NAME", "bistro")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	ctx := context.Background()
	x, err := tracing.FromEnv(ctx)
	if err != nil || x == nil {
		t.Fatalf("FromEnv = %v, %v; want an exporter", x, err)
	}
	if got, want := x.Endpoint(), rcv.URL()+"/v1/traces"; got != want {
		t.Errorf("Endpoint() = %q, want %q", got, want)
	}
	tr := tracing.New(x.TracerProvider())

	st, err := store.OpenFile(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// The first worker: greeting, barge-in, booking.
	rec := &recorder{}
	h1 := newHost(t, st, "worker-a", calls.WithObserver(tr.Observer), calls.WithObserver(rec.observer))
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	c, err := callstest.Dial(dctx, h1, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := c.ID()
	rec.wait(t, events.PlayoutStarted, 1, 10*time.Second)
	speak(t, c, 700*time.Millisecond, 0.0005)
	// The caller cuts in, speaks and falls silent for the endpoint.
	deadline := time.Now().Add(10 * time.Second)
	for {
		speak(t, c, 100*time.Millisecond, 0.3)
		if _, ok := rec.find(events.TurnInterrupted); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no barge-in")
		}
	}
	speak(t, c, 600*time.Millisecond, 0.3)
	speak(t, c, 1500*time.Millisecond, 0.0005)
	rec.wait(t, events.ToolTerminal, 1, 15*time.Second)
	rec.wait(t, events.TurnMetrics, 3, 15*time.Second) // the greeting, the booking, the confirmation
	rec.wait(t, events.CheckpointSaved, 1, 5*time.Second)
	// The worker goes away; its calls' checkpoints stay.
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}

	// Another worker resumes the call.
	rec2 := &recorder{}
	h2 := newHost(t, st, "worker-b", calls.WithObserver(tr.Observer), calls.WithObserver(rec2.observer))
	defer h2.Close()
	snap, err := handoff.Resume(ctx, st, id, testKey)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := callstest.Dial(dctx, h2, &calls.Resumed{Snapshot: &snap, Origin: calls.Reconnected})
	if err != nil {
		t.Fatal(err)
	}
	rec2.wait(t, events.TurnSettled, 1, 15*time.Second)
	c2.End("the caller hung up")
	<-c2.Done()
	h2.Close() // its observers have ended their spans once it returns

	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := x.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if n, gz, _ := rcv.Requests(); n == 0 || gz != n {
		t.Errorf("%d requests, %d gzipped: want every request gzipped", n, gz)
	}
	checkTrace(t, id, spans, rec, tracing.SessionSpanID(id, snap.State.Seq+1).String())
}

func checkTrace(t *testing.T, id string, spans []tracingtest.Span, rec *recorder, resumedSpan string) {
	t.Helper()
	traceID := tracing.TraceID(id).String()
	byID := map[string]tracingtest.Span{}
	var sessions, turns []tracingtest.Span
	for _, s := range spans {
		if s.TraceID != traceID {
			t.Errorf("span %s in trace %s, want the session's %s", s.Name, s.TraceID, traceID)
		}
		byID[s.SpanID] = s
		switch s.Name {
		case tracing.SpanSession:
			sessions = append(sessions, s)
		case tracing.SpanTurn:
			turns = append(turns, s)
		}
		for k, v := range s.Attrs {
			if str, ok := v.(string); ok && strings.Contains(str, "sk-not-a-real-key") {
				t.Errorf("span %s attribute %s holds the exporter's credential", s.Name, k)
			}
		}
		if s.Resource["service.name"] != "bistro" || s.Resource["deployment.environment"] != "test" {
			t.Errorf("span %s resource %v: want service.name and attributes from the environment", s.Name, s.Resource)
		}
	}
	if t.Failed() {
		return
	}
	if len(sessions) != 2 {
		t.Fatalf("%d session spans, want 2 (the first life, the resumed one): %v", len(sessions), names(spans))
	}
	first, second := sessions[0], sessions[1]
	if first.Start.After(second.Start) {
		first, second = second, first
	}
	if first.ParentID != "" || second.ParentID != "" {
		t.Errorf("session spans have parents %q, %q: want roots", first.ParentID, second.ParentID)
	}
	if first.SpanID != tracing.SessionSpanID(id, 1).String() {
		t.Errorf("the first life's span %s, want the one its session id derives", first.SpanID)
	}
	if second.SpanID != resumedSpan {
		t.Errorf("the resumed life's span %s, want %s, as sealed in its checkpoints", second.SpanID, resumedSpan)
	}
	if len(second.Links) != 1 || second.Links[0].SpanID != first.SpanID || second.Links[0].TraceID != traceID {
		t.Errorf("the resumed session span links %+v; want the first life's span %s", second.Links, first.SpanID)
	}
	if second.Attrs["holdline.session.resumed"] != true || second.Attrs["holdline.transport"] != callstest.Kind {
		t.Errorf("resumed session attributes %v", second.Attrs)
	}
	parentName := func(s tracingtest.Span) string { return byID[s.ParentID].Name }

	// Turns under the sessions; the greeting cut by the barge-in.
	var cut *tracingtest.Span
	for i, tn := range turns {
		if p := parentName(tn); p != tracing.SpanSession {
			t.Errorf("turn %v under %q, want the session", tn.Attrs["holdline.epoch"], p)
		}
		if tn.Start.Before(byID[tn.ParentID].Start) || tn.End.After(byID[tn.ParentID].End) {
			t.Errorf("turn %v [%v, %v] outside its session", tn.Attrs["holdline.epoch"], tn.Start, tn.End)
		}
		if tn.Attrs["holdline.turn.interrupted"] == true && tn.Attrs["holdline.epoch"] == int64(1) {
			cut = &turns[i]
		}
	}
	if len(turns) < 4 {
		t.Errorf("%d turns, want the greeting, the booking, the confirmation and the resumed one", len(turns))
	}
	if cut == nil {
		t.Fatalf("no interrupted greeting turn among %d turns", len(turns))
	}
	metrics, _ := rec.find(events.TurnMetrics)
	model := metrics.Turn.Model
	children := map[string][]tracingtest.Span{}
	for _, s := range spans {
		children[s.ParentID] = append(children[s.ParentID], s)
	}
	var bargeIn, playout *tracingtest.Span
	for i, s := range children[cut.SpanID] {
		switch s.Name {
		case tracing.SpanBargeIn:
			bargeIn = &children[cut.SpanID][i]
		case tracing.SpanPlayout:
			playout = &children[cut.SpanID][i]
		}
	}
	if bargeIn == nil || bargeIn.Attrs["holdline.barge_in.outcome"] != "confirmed" || bargeIn.Attrs["holdline.barge_in.reason"] == "" {
		t.Errorf("the greeting's barge-in span: %+v", bargeIn)
	}
	if playout == nil || playout.Attrs["holdline.playout.truncated"] != true || playout.Attrs["holdline.playout.played_ms"].(float64) <= 0 {
		t.Errorf("the greeting's playout span: %+v", playout)
	}
	if playout != nil && playout.Attrs["holdline.text"] != nil {
		t.Errorf("the words played are in the span without WithContent")
	}

	// Model requests under their turns, with gen_ai attributes and the
	// tokens the model counted.
	tokens := map[[2]int64]bool{}
	var synth int
	for _, s := range spans {
		switch {
		case strings.HasPrefix(s.Name, "chat "):
			if s.Name != "chat "+model || s.Attrs["gen_ai.operation.name"] != "chat" || s.Attrs["gen_ai.request.model"] != model {
				t.Errorf("model span %q attributes %v, want chat %s", s.Name, s.Attrs, model)
			}
			if parentName(s) != tracing.SpanTurn {
				t.Errorf("model span under %q", parentName(s))
			}
			if len(s.Events) == 0 || s.Events[0].Name != "gen_ai.first_token" || s.Events[0].Time.Before(s.Start) {
				t.Errorf("model span events %+v: want the first token within it", s.Events)
			}
			in, _ := s.Attrs["gen_ai.usage.input_tokens"].(int64)
			out, _ := s.Attrs["gen_ai.usage.output_tokens"].(int64)
			tokens[[2]int64{in, out}] = true
		case s.Name == tracing.SpanSynthesis:
			synth++
			if parentName(s) != tracing.SpanTurn || s.Attrs["holdline.voice"] == "" || s.End.Before(s.Start) {
				t.Errorf("synthesis span %+v", s)
			}
		}
	}
	for _, want := range [][2]int64{{50, 30}, {100, 12}, {120, 9}} {
		if !tokens[want] {
			t.Errorf("no model span with %d tokens in and %d out: %v", want[0], want[1], tokens)
		}
	}
	if synth < 3 {
		t.Errorf("%d synthesis spans, want one a spoken turn", synth)
	}

	// The tool call, under the turn that asked for it.
	var tool *tracingtest.Span
	for i, s := range spans {
		if s.Name == "execute_tool book_table" {
			tool = &spans[i]
		}
	}
	requested, _ := rec.find(events.ToolRequested)
	switch {
	case tool == nil:
		t.Errorf("no tool span: %v", names(spans))
	case parentName(*tool) != tracing.SpanTurn || byID[tool.ParentID].Attrs["holdline.epoch"] != int64(requested.Epoch):
		t.Errorf("the tool span is under %q of epoch %v, want the turn of epoch %d", parentName(*tool), byID[tool.ParentID].Attrs["holdline.epoch"], requested.Epoch)
	case tool.Attrs["gen_ai.tool.name"] != "book_table" || tool.Attrs["gen_ai.tool.call.id"] != requested.CallID ||
		tool.Attrs["holdline.tool.state"] != "succeeded" || tool.Attrs["holdline.tool.policy"] != requested.Policy ||
		requested.Policy == "" || tool.Attrs["holdline.tool.idempotency_key"] != requested.Key || requested.Key == "":
		t.Errorf("tool span attributes %v; the request was %+v", tool.Attrs, requested)
	case tool.Attrs["gen_ai.tool.call.arguments"] != nil:
		t.Errorf("the tool's arguments are in the span without WithContent")
	}
	t.Logf("%d spans in trace %s: %v", len(spans), traceID, names(spans))
}

func names(spans []tracingtest.Span) map[string]int {
	m := map[string]int{}
	for _, s := range spans {
		m[s.Name]++
	}
	return m
}
