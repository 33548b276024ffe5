package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdline/holdline/events"
)

// ScopeName is the instrumentation scope of Holdline's spans.
const ScopeName = "github.com/holdline/holdline/tracing"

// Span names.
const (
	SpanSession      = "holdline.session"
	SpanTurn         = "holdline.turn"
	SpanSynthesis    = "holdline.synthesis"
	SpanPlayout      = "holdline.playout"
	SpanBargeIn      = "holdline.barge_in"
	SpanHandoff      = "holdline.handoff"
	SpanCheckpoint   = "holdline.checkpoint"
	SpanTransport    = "holdline.transport_lost"
	SpanProviderErr  = "holdline.provider_error"
	spanChatPrefix   = "chat"         // "chat MODEL", as gen_ai names a model request
	spanToolPrefix   = "execute_tool" // "execute_tool NAME"
	maxAttributeText = 512
)

// Tracer turns sessions' events into spans. It is safe for concurrent
// use; each Session it makes is not, and is fed from one goroutine (an
// event subscriber's), never from the session's core.
type Tracer struct {
	tracer  trace.Tracer
	content bool
	log     *slog.Logger
}

// Option configures a Tracer.
type Option func(*Tracer)

// WithContent puts what was said and typed in the spans: tool call
// arguments, the caller's transcripts, the agent's words as played, key
// presses. Off by default: a trace backend is rarely the place for a
// caller's card number.
func WithContent(on bool) Option { return func(t *Tracer) { t.content = on } }

// WithLogger sets the logger told of a span that could not be made
// (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(t *Tracer) { t.log = l } }

// New returns a Tracer making spans with tp, which should generate ids
// with IDGenerator (NewProvider's does) for a session's trace to follow
// from its id.
func New(tp trace.TracerProvider, opts ...Option) *Tracer {
	t := &Tracer{
		tracer: tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		log:    slog.Default(),
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Content reports whether spans carry what was said (WithContent).
func (t *Tracer) Content() bool { return t.content }

// SessionOption configures the tracing of one session.
type SessionOption func(*Session)

// WithTransport names the transport carrying the session ("sip", "webrtc").
func WithTransport(kind string) SessionOption { return func(s *Session) { s.kind = kind } }

// WithStart says the session's events begin at sequence number seq: 1
// for a fresh session, one past the snapshot's for a resumed one. It
// decides the session span's id (SessionSpanID) before the first event,
// so that it can be sealed with the session's checkpoints. Without it the
// first event's number is taken.
func WithStart(seq uint64) SessionOption { return func(s *Session) { s.startSeq = seq } }

// WithPrevious links the session span to the span of the session's
// earlier life, which it resumes (a crash, a transfer between workers).
// Without it, a resumed session links to its first life's span.
func WithPrevious(span trace.SpanID) SessionOption { return func(s *Session) { s.prev = span } }

// Session makes the spans of one session, id, from its events. Feed it
// every event with Observe, and Close it when they end: a span the
// events left open (a dropped event, a worker going away) ends there.
func (t *Tracer) Session(id string, opts ...SessionOption) *Session {
	s := &Session{t: t, id: id, traceID: TraceID(id), turns: map[uint64]*turnSpans{}, tools: map[string]trace.Span{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Session is the tracing of one session's events.
type Session struct {
	t        *Tracer
	id       string
	kind     string
	startSeq uint64
	prev     trace.SpanID
	traceID  trace.TraceID

	root    trace.Span
	rootCtx context.Context
	linked  bool
	agent   string
	last    time.Time // the latest event's time: where Close ends what is open
	epoch   uint64    // the latest turn
	turns   map[uint64]*turnSpans
	tools   map[string]trace.Span
	bargeIn trace.Span
	lost    trace.Span
	dropped int
	done    bool
	panics  int
}

// turnSpans are one agent turn's span and its open children.
type turnSpans struct {
	span    trace.Span
	ctx     context.Context
	playout trace.Span
	// The providers' errors in the turn, for the spans turn_metrics makes.
	llmErr, ttsErr string
}

// SpanID returns the session span's id, known before the first event
// when WithStart was given (otherwise once session_started arrived).
func (s *Session) SpanID() trace.SpanID {
	if s.startSeq == 0 {
		return trace.SpanID{}
	}
	return SessionSpanID(s.id, s.startSeq)
}

// Observe makes and ends spans for e. Events may come out of order with
// their spans' lives (one was dropped): the spans are kept consistent
// anyway, and nothing here panics out to the subscriber.
func (s *Session) Observe(e events.Event) {
	if s.done {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			// A bug here must not take the call down with it.
			if s.panics++; s.panics == 1 {
				s.t.log.Error("tracing: an event could not be traced", "session", s.id, "kind", e.Kind, "panic", fmt.Sprint(r))
			}
		}
	}()
	if e.Time.After(s.last) {
		s.last = e.Time
	}
	if s.root == nil {
		s.startRoot(e)
	}
	switch e.Kind {
	case events.SessionStarted:
		// startRoot took it.
	case events.SessionEnded:
		s.end(e.Time, e.Reason, false)
	case events.SessionResumed:
		s.root.SetAttributes(attribute.Bool("holdline.session.resumed", true))
		s.root.AddEvent("session_resumed", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("holdline.agent", e.Text)))
		if !s.linked && s.root.SpanContext().SpanID() != SessionSpanID(s.id, 1) {
			s.root.AddLink(s.link(SessionSpanID(s.id, 1)))
			s.linked = true
		}
	case events.SessionMoved:
		// A draining worker moved the call here: the span says from where.
		s.root.AddEvent("session_moved", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("holdline.moved", e.Text)))
	case events.EventsDropped:
		s.dropped += e.Count
		s.root.SetAttributes(attribute.Int("holdline.events_dropped", s.dropped))
		s.root.AddEvent("events_dropped", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.Int("holdline.count", e.Count)))

	case events.UserTurn:
		attrs := []attribute.KeyValue{attribute.String("holdline.input", e.Reason)}
		if s.t.content {
			attrs = append(attrs, attribute.String("holdline.text", clip(e.Text)))
		}
		s.root.AddEvent("user_turn", trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
	case events.Transcript:
		if s.t.content && e.Final {
			s.root.AddEvent("transcript", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("holdline.text", clip(e.Text))))
		}
	case events.DTMF:
		attrs := []attribute.KeyValue{}
		if s.t.content {
			attrs = append(attrs, attribute.String("holdline.digit", e.Text))
		}
		s.root.AddEvent("dtmf", trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
	case events.TranscriptIgnored:
		s.root.AddEvent("transcript_ignored", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("holdline.reason", e.Reason)))

	case events.TurnStarted:
		s.turn(e)
	case events.InferenceSent:
		s.turn(e).span.AddEvent("inference_sent", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("holdline.reason", e.Reason)))
	case events.SpeculationUsed, events.SpeculationDiscarded:
		s.root.AddEvent(string(e.Kind), trace.WithTimestamp(e.Time), trace.WithAttributes(
			attribute.Int64("holdline.epoch", int64(e.Epoch)), attribute.String("holdline.reason", e.Reason)))
	case events.TurnInterrupted:
		t := s.turn(e)
		t.span.SetAttributes(attribute.Bool("holdline.turn.interrupted", true))
		t.span.AddEvent("turn_interrupted", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("holdline.reason", e.Reason)))
	case events.PlayoutStarted:
		t := s.turn(e)
		if t.playout == nil {
			_, t.playout = s.t.tracer.Start(t.ctx, SpanPlayout, trace.WithTimestamp(e.Time),
				trace.WithAttributes(attribute.Int64("holdline.epoch", int64(e.Epoch))))
		}
	case events.PlayoutDone, events.PlayoutTruncate:
		t := s.turn(e)
		if t.playout == nil { // its start was dropped: what is known, from here
			_, t.playout = s.t.tracer.Start(t.ctx, SpanPlayout, trace.WithTimestamp(e.Time.Add(-e.Played)),
				trace.WithAttributes(attribute.Int64("holdline.epoch", int64(e.Epoch))))
		}
		attrs := []attribute.KeyValue{
			attribute.Float64("holdline.playout.played_ms", ms(e.Played)),
			attribute.Bool("holdline.playout.truncated", e.Kind == events.PlayoutTruncate),
		}
		if s.t.content {
			attrs = append(attrs, attribute.String("holdline.text", clip(e.Text)))
		}
		t.playout.SetAttributes(attrs...)
		t.playout.End(trace.WithTimestamp(e.Time))
		t.playout = nil
	case events.TurnMetrics:
		s.turnMetrics(e)
	case events.TurnSettled:
		if t := s.turns[e.Epoch]; t != nil {
			s.endTurn(e.Epoch, t, e.Time, false)
		}

	case events.BargeInSuspected:
		if s.bargeIn != nil { // the earlier one's outcome was lost
			s.bargeIn.End(trace.WithTimestamp(e.Time))
		}
		_, s.bargeIn = s.t.tracer.Start(s.parent(e.Epoch), SpanBargeIn, trace.WithTimestamp(e.Time),
			trace.WithAttributes(attribute.String("holdline.barge_in.suspected_reason", e.Reason), attribute.Int64("holdline.epoch", int64(e.Epoch))))
	case events.BargeInConfirmed, events.BargeInResumed:
		outcome := "confirmed"
		if e.Kind == events.BargeInResumed {
			outcome = "resumed"
		}
		span := s.bargeIn
		if span == nil { // confirmed without a pause first, or its suspicion was dropped
			_, span = s.t.tracer.Start(s.parent(e.Epoch), SpanBargeIn, trace.WithTimestamp(e.Time),
				trace.WithAttributes(attribute.Int64("holdline.epoch", int64(e.Epoch))))
		}
		span.SetAttributes(attribute.String("holdline.barge_in.outcome", outcome), attribute.String("holdline.barge_in.reason", e.Reason))
		span.End(trace.WithTimestamp(e.Time))
		s.bargeIn = nil

	case events.ToolRequested:
		s.toolRequested(e)
	case events.ToolDeferred, events.ToolStarted, events.ToolCancelRequested, events.ToolDeduped, events.ToolReconcile:
		if span := s.tools[e.CallID]; span != nil {
			attrs := []attribute.KeyValue{}
			if e.Reason != "" {
				attrs = append(attrs, attribute.String("holdline.reason", e.Reason))
			}
			if e.Text != "" { // the earlier call's id, for deduped and reconcile
				attrs = append(attrs, attribute.String("holdline.tool.earlier_call_id", e.Text))
			}
			span.AddEvent(string(e.Kind), trace.WithTimestamp(e.Time), trace.WithAttributes(attrs...))
		}
	case events.ToolTerminal:
		s.toolTerminal(e)
	case events.ToolLateOutcome, events.ToolCommitted:
		// After the call's span ended: on the session, by call id.
		s.root.AddEvent(string(e.Kind), trace.WithTimestamp(e.Time), trace.WithAttributes(
			semconv.GenAIToolCallID(e.CallID), semconv.GenAIToolName(e.Tool), attribute.String("holdline.tool.state", e.State)))

	case events.Handoff:
		_, span := s.t.tracer.Start(s.rootCtx, SpanHandoff, trace.WithTimestamp(e.Time), trace.WithAttributes(
			attribute.String("holdline.handoff", e.Text), attribute.String("holdline.handoff.strategy", e.Reason),
			attribute.Int("holdline.handoff.items_kept", e.Count)))
		span.End(trace.WithTimestamp(e.Time))
	case events.CheckpointSaved:
		s.root.AddEvent("checkpoint_saved", trace.WithTimestamp(e.Time), trace.WithAttributes(
			attribute.Int("holdline.checkpoint.seq", e.Count), attribute.String("holdline.reason", e.Reason)))
	case events.CheckpointFailed:
		_, span := s.t.tracer.Start(s.rootCtx, SpanCheckpoint, trace.WithTimestamp(e.Time))
		span.SetStatus(codes.Error, redact(e.Error))
		span.End(trace.WithTimestamp(e.Time))

	case events.TransportLost:
		if s.lost == nil {
			_, s.lost = s.t.tracer.Start(s.rootCtx, SpanTransport, trace.WithTimestamp(e.Time))
		}
	case events.TransportRestored:
		if s.lost != nil {
			s.lost.SetAttributes(attribute.Bool("holdline.transport.restored", true))
			s.lost.End(trace.WithTimestamp(e.Time))
			s.lost = nil
		}

	case events.ProviderError:
		s.providerError(e)
	case events.ProviderFailover:
		s.root.AddEvent("provider_failover", trace.WithTimestamp(e.Time), trace.WithAttributes(
			attribute.String("holdline.provider", e.Provider), attribute.String("holdline.error", redact(e.Error))))
	case events.EchoPath:
		s.root.SetAttributes(attribute.String("holdline.echo_path", e.State), attribute.Float64("holdline.echo_path.delay_ms", ms(e.Delay)),
			attribute.Float64("holdline.echo_path.gain_db", e.GainDB))
	}
}

// Close ends what the events left open, at the latest event's time, and
// the session span: the session's events have ended. Observe does
// nothing after it.
func (s *Session) Close() {
	if s.done || s.root == nil {
		s.done = true
		return
	}
	s.end(s.last, "", true)
}

// startRoot starts the session span at e, normally session_started.
func (s *Session) startRoot(e events.Event) {
	seq := s.startSeq
	if seq == 0 {
		seq = max(e.Seq, 1)
		s.startSeq = seq
	}
	attrs := []attribute.KeyValue{
		attribute.String("holdline.session.id", s.id),
		semconv.GenAIConversationID(s.id),
	}
	if s.kind != "" {
		attrs = append(attrs, attribute.String("holdline.transport", s.kind))
	}
	if e.Kind == events.SessionStarted {
		s.agent = e.Text
		attrs = append(attrs, attribute.String("holdline.agent", e.Text))
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(e.Time), trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
	if seq > 1 { // a resumed life: link to the one before
		prev := s.prev
		if !prev.IsValid() {
			prev = SessionSpanID(s.id, 1)
		}
		opts = append(opts, trace.WithLinks(s.link(prev)))
		s.linked = true
	}
	ctx := withRootIDs(context.Background(), s.traceID, SessionSpanID(s.id, seq))
	s.rootCtx, s.root = s.t.tracer.Start(ctx, SpanSession, opts...)
}

func (s *Session) link(span trace.SpanID) trace.Link {
	return trace.Link{
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.traceID, SpanID: span, TraceFlags: trace.FlagsSampled, Remote: true}),
		Attributes:  []attribute.KeyValue{attribute.String("holdline.link", "previous_session")},
	}
}

// turn returns the spans of e's turn, started at e if its turn_started
// was not seen.
func (s *Session) turn(e events.Event) *turnSpans {
	if t := s.turns[e.Epoch]; t != nil {
		return t
	}
	t := &turnSpans{}
	t.ctx, t.span = s.t.tracer.Start(s.rootCtx, SpanTurn, trace.WithTimestamp(e.Time), trace.WithAttributes(
		attribute.Int64("holdline.epoch", int64(e.Epoch)), attribute.String("holdline.agent", s.agent)))
	s.turns[e.Epoch] = t
	if e.Epoch >= s.epoch {
		s.epoch = e.Epoch
	}
	return t
}

// parent is the context of the span an instant of epoch belongs under:
// its turn if open, else the latest open turn, else the session.
func (s *Session) parent(epoch uint64) context.Context {
	if t := s.turns[epoch]; t != nil {
		return t.ctx
	}
	if t := s.turns[s.epoch]; t != nil {
		return t.ctx
	}
	return s.rootCtx
}

// turnMetrics gives the turn its breakdown, and makes the spans of its
// model request and its synthesis from the instants the breakdown holds.
func (s *Session) turnMetrics(e events.Event) {
	m := e.Turn
	if m == nil {
		return
	}
	t := s.turn(e)
	base := e.Time.Add(-e.At) // the session clock's start: an instant d is base+d
	at := func(d time.Duration) time.Time { return base.Add(d) }
	attrs := []attribute.KeyValue{
		attribute.String("holdline.agent", m.Agent),
		attribute.Bool("holdline.turn.interrupted", m.Interrupted),
		attribute.String("holdline.turn.model", m.Model),
		attribute.String("holdline.turn.voice", m.Voice),
	}
	for _, st := range m.Breakdown() {
		attrs = append(attrs, attribute.Float64("holdline.turn."+st.Name+"_ms", ms(st.Took)))
	}
	t.span.SetAttributes(attrs...)

	if m.Request != 0 {
		end := e.Time
		if m.ModelDone >= m.Request && m.ModelDone != 0 {
			end = at(m.ModelDone)
		}
		attrs := []attribute.KeyValue{
			semconv.GenAIOperationNameChat,
			semconv.GenAIRequestModel(m.Model),
			attribute.Int64("holdline.epoch", int64(e.Epoch)),
		}
		if m.TokensIn > 0 || m.TokensOut > 0 {
			attrs = append(attrs, semconv.GenAIUsageInputTokens(m.TokensIn), semconv.GenAIUsageOutputTokens(m.TokensOut))
		}
		_, span := s.t.tracer.Start(t.ctx, spanChatPrefix+" "+m.Model, trace.WithTimestamp(at(m.Request)),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		if m.FirstToken != 0 {
			span.AddEvent("gen_ai.first_token", trace.WithTimestamp(at(m.FirstToken)))
		}
		if m.Interrupted {
			span.SetAttributes(attribute.Bool("holdline.cancelled", true))
		}
		if t.llmErr != "" {
			span.SetStatus(codes.Error, t.llmErr)
		}
		span.End(trace.WithTimestamp(end))
	}
	if m.FirstPhrase != 0 {
		end := e.Time
		if m.SynthDone >= m.FirstPhrase && m.SynthDone != 0 {
			end = at(m.SynthDone)
		}
		_, span := s.t.tracer.Start(t.ctx, SpanSynthesis, trace.WithTimestamp(at(m.FirstPhrase)),
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
				attribute.String("holdline.voice", m.Voice), attribute.Int64("holdline.epoch", int64(e.Epoch))))
		if m.VoiceFirstAudio != 0 {
			span.AddEvent("first_audio", trace.WithTimestamp(at(m.VoiceFirstAudio)))
		}
		if t.ttsErr != "" {
			span.SetStatus(codes.Error, t.ttsErr)
		}
		span.End(trace.WithTimestamp(end))
	}
}

func (s *Session) toolRequested(e events.Event) {
	if old := s.tools[e.CallID]; old != nil { // a repeated id: the first one's end was lost
		old.End(trace.WithTimestamp(e.Time))
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(e.Tool),
		semconv.GenAIToolCallID(e.CallID),
		attribute.Int64("holdline.epoch", int64(e.Epoch)),
	}
	if e.Policy != "" {
		attrs = append(attrs, attribute.String("holdline.tool.policy", e.Policy))
	}
	if e.Key != "" {
		attrs = append(attrs, attribute.String("holdline.tool.idempotency_key", e.Key))
	}
	if s.t.content {
		attrs = append(attrs, attribute.String("gen_ai.tool.call.arguments", clip(e.Text)))
	}
	_, span := s.t.tracer.Start(s.parent(e.Epoch), spanToolPrefix+" "+e.Tool, trace.WithTimestamp(e.Time),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	s.tools[e.CallID] = span
}

func (s *Session) toolTerminal(e events.Event) {
	span := s.tools[e.CallID]
	delete(s.tools, e.CallID)
	if span == nil { // its request was dropped: what is known, as an instant
		_, span = s.t.tracer.Start(s.parent(e.Epoch), spanToolPrefix+" "+e.Tool, trace.WithTimestamp(e.Time), trace.WithAttributes(
			semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(e.Tool), semconv.GenAIToolCallID(e.CallID)))
	}
	span.SetAttributes(attribute.String("holdline.tool.state", e.State))
	if e.Reason != "" {
		span.SetAttributes(attribute.String("holdline.reason", e.Reason))
	}
	switch e.State {
	case "succeeded", "cancelled":
	default:
		// A tool's error output can hold what the caller said: the state
		// and reason say what went wrong, the output only with content.
		msg := e.State
		if e.Reason != "" {
			msg += ": " + e.Reason
		}
		if s.t.content && e.Error != "" {
			msg += ": " + clip(redact(e.Error))
		}
		span.SetAttributes(attribute.String("error.type", e.State))
		span.SetStatus(codes.Error, msg)
	}
	span.End(trace.WithTimestamp(e.Time))
}

func (s *Session) providerError(e events.Event) {
	msg := redact(e.Error)
	_, span := s.t.tracer.Start(s.parent(e.Epoch), SpanProviderErr, trace.WithTimestamp(e.Time), trace.WithAttributes(
		attribute.String("holdline.provider", e.Provider), attribute.String("error.type", "provider_error")))
	if e.Reason != "" {
		span.SetAttributes(attribute.String("holdline.reason", e.Reason))
	}
	span.SetStatus(codes.Error, msg)
	span.End(trace.WithTimestamp(e.Time))
	if t := s.turns[e.Epoch]; t != nil {
		switch e.Provider {
		case "llm":
			t.llmErr = msg
		case "tts":
			t.ttsErr = msg
		}
		t.span.SetStatus(codes.Error, e.Provider+": "+msg)
	}
}

// endTurn ends a turn's span and its open children at end.
func (s *Session) endTurn(epoch uint64, t *turnSpans, end time.Time, incomplete bool) {
	if t.playout != nil {
		t.playout.SetAttributes(attribute.Bool("holdline.incomplete", true))
		t.playout.End(trace.WithTimestamp(end))
	}
	if incomplete {
		t.span.SetAttributes(attribute.Bool("holdline.incomplete", true))
	}
	t.span.End(trace.WithTimestamp(end))
	delete(s.turns, epoch)
}

// end ends every open span at end, then the session span.
func (s *Session) end(end time.Time, reason string, incomplete bool) {
	s.done = true
	if s.bargeIn != nil {
		s.bargeIn.SetAttributes(attribute.Bool("holdline.incomplete", true))
		s.bargeIn.End(trace.WithTimestamp(end))
	}
	if s.lost != nil {
		s.lost.SetAttributes(attribute.Bool("holdline.transport.restored", false))
		s.lost.End(trace.WithTimestamp(end))
	}
	for id, span := range s.tools {
		span.SetAttributes(attribute.Bool("holdline.incomplete", true))
		span.End(trace.WithTimestamp(end))
		delete(s.tools, id)
	}
	for epoch, t := range s.turns {
		s.endTurn(epoch, t, end, true)
	}
	if reason != "" {
		s.root.SetAttributes(attribute.String("holdline.session.end_reason", reason))
	}
	if incomplete {
		s.root.SetAttributes(attribute.Bool("holdline.incomplete", true))
	}
	s.root.End(trace.WithTimestamp(end))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// clip bounds a text attribute: spans are not transcripts' archive.
func clip(s string) string {
	if len(s) <= maxAttributeText {
		return s
	}
	return s[:maxAttributeText] + "…"
}

// secretPattern matches what looks like a credential in a provider's
// error: bearer tokens, OpenAI-style keys, key=value pairs of secrets.
// The providers redact their own errors already; this is the second lock.
var secretPattern = regexp.MustCompile(`(?i)(bearer\s+)[^\s"',]+|\bsk-[a-z0-9_\-]{6,}|((?:api[_-]?key|token|secret|password|authorization)["']?\s*[:=]\s*["']?(?:bearer\s+)?)[^\s"',&]+`)

// redact removes what looks like a credential from s, and bounds it.
func redact(s string) string {
	return clip(secretPattern.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretPattern.FindStringSubmatch(m)
		switch {
		case sub[1] != "":
			return sub[1] + "[redacted]"
		case sub[2] != "":
			return sub[2] + "[redacted]"
		}
		return "[redacted]"
	}))
}
