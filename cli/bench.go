package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/openaitest"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/server"
	"github.com/holdline/holdline/tts"
	"github.com/holdline/holdline/tts/espeak"
	"github.com/holdline/holdline/vad"
	"github.com/holdline/holdline/webrtc"
	"github.com/holdline/holdline/webrtc/rtctest"
)

const benchUsage = `usage: %[1]s bench <benchmark> [flags]

benchmarks:
  latency   voice-to-voice latency: a WebRTC caller speaks turns to an agent served
            on this machine against a fake OpenAI-compatible server whose latencies
            you set, and the table says how long from the end of each turn to the
            agent's first audio heard, stage by stage (%[1]s bench latency --turns 30);
            --runtime livekit or both measures LiveKit Agents for Node the same way
`

// benchCmd runs one of the benchmarks.
func (c *cli) benchCmd(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprintf(c.stderr, benchUsage, c.name)
		return errors.New("bench: which benchmark? (have: latency)")
	}
	switch args[0] {
	case "latency":
		return c.benchLatencyCmd(ctx, args[1:])
	case "help", "-h", "--help":
		fmt.Fprintf(c.stdout, benchUsage, c.name)
		return nil
	}
	fmt.Fprintf(c.stderr, benchUsage, c.name)
	return fmt.Errorf("bench: no benchmark %q (have: latency)", args[0])
}

// benchCallerLines are what the caller says by default, in turn: a
// booking, asked about, cancelled, twice over; the booking agent's demo
// model answers each, and every answer speaks before any tool runs.
var benchCallerLines = []string{
	"Book a table for two at seven.",
	"What did I book?",
	"Cancel the booking.",
	"Book a table for four at eight thirty.",
	"What did I book?",
	"Cancel the booking.",
}

const (
	// benchLoud is the level (RMS, of full scale) above which a packet
	// of the agent's audio is heard, as the client measures it: the level
	// at which rtctest marks the caller's own sound.
	benchLoud = rtctest.Loud
	// benchSettle is how long the agent must stay idle before the caller
	// speaks again: the agent has finished its answer, tools and
	// follow-ups included, and the caller takes a breath.
	benchSettle = 600 * time.Millisecond
	// benchTurnTimeout bounds each wait of a turn beyond the caller's
	// own speech.
	benchTurnTimeout = 30 * time.Second
)

// latencySettings are what the providers and the session are told to
// take.
type latencySettings struct {
	turns            int
	ttft             time.Duration
	tokenInterval    time.Duration
	speechFirstAudio time.Duration
	transcription    time.Duration
	endpointing      time.Duration
	// silence is how long the voice detector must hear quiet before it
	// says the caller stopped (vad.DefaultMinSilence): the first part of
	// the endpointing, which the delay above follows.
	silence time.Duration
	// speculate: the session asks the model as soon as the transcript is
	// in (runtime.WithSpeculation).
	speculate bool
	// local: the agent runs on its local engines (pocketsphinx, espeak-ng,
	// its own model), not against openaitest: the providers' latencies
	// are theirs, and the stages come from the turn's own breakdown (the
	// turn_metrics event).
	local bool
}

// floor is the least any runtime could take for a turn whose first phrase
// is tokens long, followed by more of the answer or not: the detector must
// hear the caller's silence, then the endpointing delay must pass, and the
// transcription (which starts once the detector has heard the speech end)
// runs within it or past it; then the model's first token, the rest of the
// first phrase, one token more to show the phrase has ended (none when the
// answer ends there), and the voice's first audio. A runtime that asks the
// model as soon as the transcript is in (speculation) needs only the
// endpointing or the whole of that chain after the transcript, whichever
// is longer: the answer may not play before the turn has ended.
func (s latencySettings) floor(tokens int, follows bool) time.Duration {
	n := tokens - 1
	if follows {
		n++
	}
	answer := s.ttft + time.Duration(max(n, 0))*s.tokenInterval + s.speechFirstAudio
	if s.speculate {
		return s.silence + max(s.endpointing, s.transcription+answer)
	}
	return s.silence + max(s.endpointing, s.transcription) + answer
}

// benchLatencyCmd measures voice-to-voice latency: see benchUsage and the
// README's "Measuring voice-to-voice latency".
func (c *cli) benchLatencyCmd(ctx context.Context, args []string) error {
	fs := c.flagSet("bench latency")
	name := c.agentFlag(fs)
	set := latencySettings{silence: vad.DefaultMinSilence}
	fs.IntVar(&set.turns, "turns", 30, "how many turns the caller speaks")
	fs.DurationVar(&set.ttft, "ttft", 300*time.Millisecond, "the model's time to first token")
	fs.DurationVar(&set.tokenInterval, "token-interval", 20*time.Millisecond, "the time between two of the model's tokens")
	fs.DurationVar(&set.speechFirstAudio, "speech-first-audio", 200*time.Millisecond, "the voice's time to first audio (/v1/audio/speech)")
	fs.DurationVar(&set.transcription, "transcribe", 150*time.Millisecond, "the recogniser's time to answer an utterance (/v1/audio/transcriptions)")
	fs.DurationVar(&set.endpointing, "endpointing", runtime.DefaultEndpointing, "how long the caller must be silent before their turn ends")
	fs.BoolVar(&set.speculate, "speculate", true, "ask the model as soon as the caller's words are in (false: once the turn has ended)")
	var lines []string
	fs.Func("say", "a `LINE` the caller says (repeat the flag for several; they are said in turn, from the first again after the last; default a booking, asked about and cancelled)", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("an empty line says nothing")
		}
		lines = append(lines, s)
		return nil
	})
	engines := fs.String("engines", "openai", "the agent's engines: openai (OpenAI's clients against openaitest, with the latencies set here) or local (pocketsphinx, espeak-ng and the agent's own model, at their own pace; the latency flags are then ignored)")
	runtimeName := fs.String("runtime", "holdline", "what answers the caller: holdline, livekit (LiveKit Agents for Node through livekit-server on this machine, test/latency-livekit; needs node and npm) or both (alternating rounds of Holdline, LiveKit with preemptive generation off, and LiveKit's defaults; --speculate is then ignored)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	verbose := fs.Bool("v", false, "log the server's debug detail to standard error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("bench latency: unexpected argument %q", fs.Arg(0))
	case set.turns < 1:
		return fmt.Errorf("--turns %d: want at least one", set.turns)
	case set.ttft < 0 || set.tokenInterval < 0 || set.speechFirstAudio < 0 || set.transcription < 0:
		return errors.New("--ttft, --token-interval, --speech-first-audio and --transcribe cannot be negative")
	case set.endpointing <= 0:
		return fmt.Errorf("--endpointing %v: want a positive duration", set.endpointing)
	case !slices.Contains(benchRuntimes, *runtimeName):
		return fmt.Errorf("--runtime %q: want one of %s", *runtimeName, strings.Join(benchRuntimes, ", "))
	case *engines != "openai" && *engines != "local":
		return fmt.Errorf("--engines %q: want openai or local", *engines)
	case *engines == "local" && *runtimeName != "holdline":
		return errors.New("--engines local measures Holdline alone: LiveKit Agents has no pocketsphinx or espeak-ng")
	}
	set.local = *engines == "local"
	if len(lines) == 0 {
		lines = benchCallerLines
	}
	fn, err := c.agent(*name)
	if err != nil {
		return err
	}
	speech, err := callerSpeech(ctx, lines)
	if err != nil {
		return err
	}

	// The brain answering the chat completions is the agent's own model,
	// as fake-openai's is. A scripted model paces itself, which would add
	// to the latency set here: it answers at once, and the server paces it.
	brainAgent, releaseBrain, err := fn(ctx)
	if err != nil {
		return err
	}
	if releaseBrain != nil {
		defer releaseBrain()
	}
	if brainAgent == nil || brainAgent.Model == nil {
		return fmt.Errorf("agent %q has no model of its own to answer the chat completions with", *name)
	}
	brain := brainAgent.Model
	var note string
	if m, ok := brain.(*scripted.LLM); ok {
		brain = m.Unpaced()
	} else {
		note = fmt.Sprintf("the agent's model (%T) answers at its own pace, which the server does not hurry: the model's latency is at least what --ttft and --token-interval say", brain)
	}
	latency := openaitest.Latency{
		ChatFirstToken:    set.ttft,
		ChatTokenInterval: set.tokenInterval,
		SpeechFirstAudio:  set.speechFirstAudio,
		Transcription:     set.transcription,
	}
	fake := openaitest.New(brain, openaitest.WithLatency(latency))
	defer fake.Close()
	// The recogniser hears what the caller said: the turn's line, once
	// (an utterance the detector cut in two gets the words with its first
	// part, nothing with the rest).
	var recognised struct {
		sync.Mutex
		line string
	}
	fake.SetTranscriber(func([]int16, int) string {
		recognised.Lock()
		defer recognised.Unlock()
		line := recognised.line
		recognised.line = ""
		return line
	})

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	setLine := func(l string) {
		recognised.Lock()
		recognised.line = l
		recognised.Unlock()
	}
	if *runtimeName != "holdline" {
		return c.benchLatencyAcross(ctx, *runtimeName, benchSetup{
			set: set, lines: lines, speech: speech, fake: fake, setLine: setLine,
			fn: fn, name: *name, note: note, logger: logger, asJSON: *asJSON, verbose: *verbose,
		})
	}
	pf := &providerFlags{llm: "openai", stt: "openai", tts: "openai", openAIURL: fake.URL(), openAIKey: openaitest.APIKey}
	if set.local {
		pf = &providerFlags{stt: "pocketsphinx", tts: "espeak"}
	}
	base, stop, err := benchServe(ctx, fn, *name, pf, logger,
		runtime.WithEndpointing(set.endpointing), runtime.WithSpeculation(set.speculate))
	if err != nil {
		return err
	}
	defer stop()

	if !*asJSON {
		if set.local {
			fmt.Fprintf(c.stderr, "bench latency: the %s agent over WebRTC on 127.0.0.1, on its local engines (pocketsphinx, espeak-ng, its own model); %d turns\n", *name, set.turns)
		} else {
			fmt.Fprintf(c.stderr, "bench latency: the %s agent over WebRTC on 127.0.0.1, against openaitest at %s; %d turns\n", *name, fake.URL(), set.turns)
		}
	}
	if note != "" {
		fmt.Fprintln(c.stderr, "note:", note)
	}
	r := &latencyRun{settings: set, fake: fake, lines: lines, speech: speech, stderr: c.stderr, setLine: setLine}
	runErr := r.run(ctx, base)
	rep := r.report(*name, note)
	if len(rep.PerTurn) > 0 {
		if *asJSON {
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else {
			writeLatencyTable(c.stdout, rep)
		}
	}
	if runErr != nil {
		return fmt.Errorf("bench latency: %w", runErr)
	}
	if rep.Measured < rep.Turns {
		var why []string
		for _, t := range rep.PerTurn {
			if t.Error != "" {
				why = append(why, fmt.Sprintf("turn %d: %s", t.Turn, t.Error))
			}
		}
		return fmt.Errorf("bench latency: %d of %d turns not measured: %s", rep.Turns-rep.Measured, rep.Turns, strings.Join(why, "; "))
	}
	return nil
}

// benchServe serves the agent fn makes as "serve --store none" with the
// providers pf chooses would, on 127.0.0.1 alone (WebRTC included), until
// stop. It returns the base URL to dial.
func benchServe(ctx context.Context, fn runtime.AgentFunc, name string, pf *providerFlags, logger *slog.Logger, opts ...runtime.Option) (base string, stop func(), err error) {
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	undo = append(undo, func() { pf.closeShared() })
	probe, err := pf.probe(ctx, fn, true)
	if err != nil {
		return "", nil, err
	}
	newAgent := pf.agentFunc(fn, true)
	transport, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"), webrtc.WithLogger(logger))
	if err != nil {
		return "", nil, err
	}
	host, err := calls.New(newAgent, calls.WithLogger(logger), calls.WithCallCost(probe.callCost()),
		calls.WithSessionOptions(opts...))
	if err != nil {
		return "", nil, err
	}
	undo = append(undo, func() { host.Close() })
	srv, err := server.New(newAgent, server.WithAgentName(name), server.WithTransport(transport), server.WithLogger(logger), server.WithHost(host))
	if err != nil {
		return "", nil, err
	}
	undo = append(undo, func() { srv.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
	undo = append(undo, func() {
		// The calls end first, so that their event streams do.
		host.Close()
		hs.Close()
		<-served
	})
	return "http://" + ln.Addr().String(), stop, nil
}

// callerSpeech is each line in espeak-ng's voice at 48 kHz (rtctest's
// rate), its leading and trailing silence cut off, so that the end of
// the audio is the end of the speech.
func callerSpeech(ctx context.Context, lines []string) (map[string][]int16, error) {
	voice, err := espeak.New(espeak.WithSampleRate(48000))
	if err != nil {
		return nil, fmt.Errorf("bench latency: the caller speaks in espeak-ng's voice: %w", err)
	}
	out := map[string][]int16{}
	for _, l := range lines {
		if _, ok := out[l]; ok {
			continue
		}
		pcm, err := synthesizeAll(ctx, voice, l)
		if err != nil {
			return nil, fmt.Errorf("bench latency: speaking %q: %w", l, err)
		}
		pcm = trimQuiet(pcm)
		if len(pcm) == 0 {
			return nil, fmt.Errorf("bench latency: espeak-ng said nothing for %q", l)
		}
		out[l] = pcm
	}
	return out, nil
}

// synthesizeAll is the whole of text in voice's audio.
func synthesizeAll(ctx context.Context, voice *espeak.Synthesizer, text string) ([]int16, error) {
	st, err := voice.Synthesize(ctx, text)
	if err != nil {
		return nil, err
	}
	return tts.ReadAll(st)
}

// trimQuiet cuts the samples quieter than 1% of full scale off both ends.
func trimQuiet(pcm []int16) []int16 {
	loud := func(v int16) bool { return v > 327 || v < -327 }
	first := slices.IndexFunc(pcm, loud)
	if first < 0 {
		return nil
	}
	last := len(pcm) - 1
	for !loud(pcm[last]) {
		last--
	}
	return pcm[first : last+1]
}

// latencyRun is one run of the benchmark: the caller's turns and what
// each took.
type latencyRun struct {
	settings latencySettings
	fake     *openaitest.Server
	lines    []string
	speech   map[string][]int16
	setLine  func(string)
	stderr   io.Writer

	turns []latencyTurn
}

// latencyStageName is one stage of a turn, and the stage it follows: its
// step is the time from that one.
type latencyStageName struct{ name, source, what, after string }

// The stages of a turn, each timed from the end of the caller's speech:
// from the session's events (which the caller receives on the data
// channel), from the provider's side (the fake server's records) and at
// the caller. With speculation the model is asked as soon as the words are
// in, and the caller's turn ends while it answers.
var (
	latencyStages = []latencyStageName{
		{"speech_stopped", "event", "the detector heard the caller stop", ""},
		{"transcription_sent", "server", "the utterance reached the recogniser", "speech_stopped"},
		{"transcription_answered", "server", "the recogniser answered", "transcription_sent"},
		{"transcript", "event", "the session had the words", "transcription_answered"},
		{"user_turn", "event", "the caller's turn ended", "speech_stopped"},
		{"model_asked", "event", "the model was asked (inference_sent)", "user_turn"},
		{"chat_request", "server", "the request reached the model", "model_asked"},
		{"first_token", "server", "the model's first token left", "chat_request"},
		{"speech_request", "server", "the first phrase reached the voice", "first_token"},
		{"first_audio_sent", "server", "the voice's first audio left", "speech_request"},
		{"playout_started", "event", "the first audio went to the line", "first_audio_sent"},
		{"heard", "client", "the caller heard it", "playout_started"},
	}
	speculativeStages = func() []latencyStageName {
		st := slices.Clone(latencyStages)
		st[5] = latencyStageName{"model_asked", "event", "the model was asked (speculation_started)", "transcript"}
		return st
	}()
)

// localStages are the stages of a turn on local engines: the session's
// events and its own breakdown of the turn (turn_metrics), and the caller.
var localStages = []latencyStageName{
	{"speech_stopped", "event", "the detector heard the caller stop", ""},
	{"transcript", "event", "the session had the words", "speech_stopped"},
	{"user_turn", "event", "the caller's turn ended", "speech_stopped"},
	{"request", "turn", "the model request left", "user_turn"},
	{"first_token", "turn", "the model's first token came back", "request"},
	{"first_phrase", "turn", "the first phrase went to the voice", "first_token"},
	{"voice_first_audio", "turn", "the voice's first audio came back", "first_phrase"},
	{"queued", "turn", "it was queued for the line", "voice_first_audio"},
	{"playout_started", "event", "the first audio went to the line", "queued"},
	{"heard", "client", "the caller heard it", "playout_started"},
}

// stages are the stages of the run's turns, in the order they happen.
func (s latencySettings) stages() []latencyStageName {
	if s.local {
		if s.speculate {
			// The request leaves once the words are in, before the turn ends.
			st := slices.Clone(localStages)
			st[3].after = "transcript"
			return st
		}
		return localStages
	}
	if s.speculate {
		return speculativeStages
	}
	return latencyStages
}

// latencyTurn is one turn's measurements.
type latencyTurn struct {
	Turn int    `json:"turn"`
	Said string `json:"said"`
	// FirstPhrase is the first phrase the voice was asked to say, and
	// FirstPhraseTokens the model's tokens it took.
	FirstPhrase       string `json:"first_phrase,omitempty"`
	FirstPhraseTokens int    `json:"first_phrase_tokens,omitempty"`
	// HeardMS is from the end of the caller's speech to the agent's first
	// audio heard; FloorMS is the least the providers and the endpointing
	// allow (latencySettings.floor).
	HeardMS float64 `json:"heard_ms"`
	FloorMS float64 `json:"floor_ms"`
	// OverheadMS is Holdline's own share of the turn, as the turn's
	// breakdown (the turn_metrics event) counts it.
	OverheadMS float64 `json:"overhead_ms"`
	// AtMS is when each stage happened, since the end of the speech.
	AtMS  map[string]float64 `json:"at_ms,omitempty"`
	Error string             `json:"error,omitempty"`
}

func (t latencyTurn) measured() bool { return t.Error == "" }

func (r *latencyRun) run(ctx context.Context, base string) error {
	dctx, cancel := context.WithTimeout(ctx, benchTurnTimeout)
	client, err := rtctest.Dial(dctx, base, rtctest.Options{})
	cancel()
	if err != nil {
		return fmt.Errorf("calling the agent: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Delete(dctx, base, "")
		client.Close()
	}()
	// The greeting first, if the agent has one.
	mark, err := settle(ctx, client, 0)
	if err != nil {
		return fmt.Errorf("waiting for the agent's greeting to end: %w", err)
	}
	for i := range r.settings.turns {
		line := r.lines[i%len(r.lines)]
		t, next, err := r.turn(ctx, client, i+1, line, mark)
		if err != nil {
			return err // the run itself is over (ctx)
		}
		r.turns = append(r.turns, t)
		mark = next
		switch {
		case t.measured() && r.settings.local:
			fmt.Fprintf(r.stderr, "turn %d/%d: %q: first audio heard %.0f ms after the end of speech\n", t.Turn, r.settings.turns, line, t.HeardMS)
		case t.measured():
			fmt.Fprintf(r.stderr, "turn %d/%d: %q: first audio heard %.0f ms after the end of speech (floor %.0f ms)\n", t.Turn, r.settings.turns, line, t.HeardMS, t.FloorMS)
		default:
			fmt.Fprintf(r.stderr, "turn %d/%d: %q: not measured: %s\n", t.Turn, r.settings.turns, line, t.Error)
		}
	}
	return nil
}

// turn speaks line after event seq mark and measures the answer. It
// returns the last event seq of the turn, once the agent has settled; an
// error only when ctx ended.
func (r *latencyRun) turn(ctx context.Context, c *rtctest.Client, n int, line string, mark uint64) (latencyTurn, uint64, error) {
	t := latencyTurn{Turn: n, Said: line}
	fail := func(format string, args ...any) (latencyTurn, uint64, error) {
		t.Error = fmt.Sprintf(format, args...)
		if ctx.Err() != nil {
			return t, mark, ctx.Err()
		}
		// Let whatever the agent is doing end before the next turn.
		if last, err := settle(ctx, c, lastSeq(c)); err == nil {
			mark = last
		}
		return t, mark, ctx.Err()
	}
	pcm := r.speech[line]
	spoken := time.Duration(len(pcm)) * time.Second / 48000
	r.setLine(line)
	sayAt := time.Now()
	c.Say(pcm)

	tctx, cancel := context.WithTimeout(ctx, spoken+benchTurnTimeout)
	defer cancel()
	ut, err := c.WaitEvent(tctx, func(e events.Event) bool { return e.Kind == events.UserTurn && e.Seq > mark })
	if err != nil {
		return fail("the caller's turn never ended (no user_turn event): %v", err)
	}
	var end time.Time
	for _, off := range c.Offsets() {
		if off.After(sayAt) && off.Before(ut.Time) {
			end = off
		}
	}
	if end.IsZero() {
		return fail("the caller's speech has no end before the user_turn event")
	}
	var heard time.Time
	err = c.Wait(tctx, "the agent's answer", func(c *rtctest.Client) bool {
		heard = firstLoud(c.Levels(), end)
		return !heard.IsZero()
	})
	if err != nil {
		return fail("no audio from the agent: %v", err)
	}
	last, err := settle(tctx, c, ut.Seq)
	if err != nil {
		return fail("the agent never finished its answer: %v", err)
	}
	mark = last

	// The session's side, from its events.
	at := map[string]time.Time{"user_turn": ut.Time, "heard": heard}
	var eventErr string
	// The speculative requests of the turn, by epoch: the one used is
	// when the model was asked for the answer heard.
	asked := map[uint64]time.Time{}
	var used, played uint64
	for _, e := range c.Events() {
		if e.Kind == events.SpeculationStarted && e.Seq < ut.Seq && e.Time.After(sayAt) {
			asked[e.Epoch] = e.Time
		}
	}
	for _, e := range c.Events() {
		switch {
		case e.Seq < ut.Seq && e.Time.After(sayAt):
			// Before the turn ended: the last of each counts.
			switch {
			case e.Kind == events.SpeechStopped:
				at["speech_stopped"] = e.Time
			case e.Kind == events.Transcript && e.Final:
				at["transcript"] = e.Time
			}
		case e.Seq > ut.Seq && e.Seq <= last:
			switch e.Kind {
			case events.InferenceSent:
				if _, ok := at["model_asked"]; !ok {
					at["model_asked"] = e.Time
				}
			case events.SpeculationUsed:
				if t, ok := asked[e.Epoch]; ok && used == 0 {
					at["model_asked"], used = t, e.Epoch
				}
			case events.PlayoutStarted:
				if _, ok := at[string(e.Kind)]; !ok {
					at[string(e.Kind)], played = e.Time, e.Epoch
				}
			case events.ProviderError, events.ProviderFailover:
				if eventErr == "" {
					eventErr = fmt.Sprintf("%s (%s): %s", e.Kind, e.Provider, e.Error)
				}
			}
		}
	}
	if eventErr != "" {
		return fail("%s", eventErr)
	}
	// The session's own breakdown of the turn that was heard.
	var tm *events.Turn
	for _, e := range c.Events() {
		if e.Kind == events.TurnMetrics && e.Epoch == played && e.Seq > ut.Seq && e.Seq <= last && e.Turn != nil {
			tm = e.Turn
			zero := e.Time.Add(-e.At) // the session's start
			for name, d := range map[string]time.Duration{"request": tm.Request, "first_token": tm.FirstToken,
				"first_phrase": tm.FirstPhrase, "voice_first_audio": tm.VoiceFirstAudio, "queued": tm.Queued} {
				if d != 0 && r.settings.local {
					at[name] = zero.Add(d)
				}
			}
		}
	}
	if tm == nil {
		return fail("no turn_metrics event for the turn heard")
	}
	t.OverheadMS = ms(tm.Overhead)
	if r.settings.local {
		for _, s := range r.settings.stages() {
			if _, ok := at[s.name]; !ok {
				return fail("no %s (%s)", s.name, s.what)
			}
		}
		t.HeardMS = ms(heard.Sub(end))
		t.AtMS = map[string]float64{}
		for k, v := range at {
			t.AtMS[k] = ms(v.Sub(end))
		}
		return t, mark, nil
	}
	// The providers' side, from the fake server's records.
	for _, tr := range r.fake.Transcriptions() {
		if tr.Received.After(sayAt) && tr.Received.Before(ut.Time) {
			at["transcription_sent"], at["transcription_answered"] = tr.Received, tr.Answered
		}
	}
	if _, ok := at["model_asked"]; !ok {
		return fail("the model was not asked for the turn (no inference_sent or speculation_used)")
	}
	var chat *openaitest.ChatRequest
	for _, cr := range r.fake.ChatRequests() {
		if cr.Received.After(at["model_asked"]) {
			chat = &cr
			break
		}
	}
	if chat == nil || chat.FirstToken.IsZero() {
		return fail("the model was not asked, or sent nothing")
	}
	at["chat_request"], at["first_token"] = chat.Received, chat.FirstToken
	var sp *openaitest.Speech
	for _, s := range r.fake.Speeches() {
		if s.Received.After(chat.Received) {
			sp = &s
			break
		}
	}
	if sp == nil || sp.FirstAudio.IsZero() {
		return fail("the voice was not asked, or sent no audio")
	}
	at["speech_request"], at["first_audio_sent"] = sp.Received, sp.FirstAudio
	for _, s := range r.settings.stages() {
		if _, ok := at[s.name]; !ok {
			return fail("no %s (%s)", s.name, s.what)
		}
	}

	t.FirstPhrase = sp.Input
	t.FirstPhraseTokens = len(openaitest.ChatTokens(sp.Input))
	follows := strings.TrimSpace(chat.Answer.Content) != sp.Input || len(chat.Answer.ToolCalls) > 0
	t.FloorMS = ms(r.settings.floor(t.FirstPhraseTokens, follows))
	t.HeardMS = ms(heard.Sub(end))
	t.AtMS = map[string]float64{}
	for k, v := range at {
		t.AtMS[k] = ms(v.Sub(end))
	}
	return t, mark, nil
}

// settle waits until the agent has nothing left to do after event seq
// from: an idle event, and no turn started for benchSettle after it. It
// returns the last event seq by then.
func settle(ctx context.Context, c *rtctest.Client, from uint64) (uint64, error) {
	for {
		idle, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.Idle && e.Seq > from })
		if err != nil {
			return 0, err
		}
		t := time.NewTimer(benchSettle)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-t.C:
		}
		busy := false
		for _, e := range c.Events() {
			if e.Seq > idle.Seq && e.Kind == events.TurnStarted {
				from, busy = e.Seq, true
			}
		}
		if !busy {
			return lastSeq(c), nil
		}
	}
}

// lastSeq is the seq of the last event c received.
func lastSeq(c *rtctest.Client) uint64 {
	var last uint64
	for _, e := range c.Events() {
		last = max(last, e.Seq)
	}
	return last
}

// firstLoud is when the first packet of the agent's audio with sound
// arrived after from; zero if none has.
func firstLoud(levels []rtctest.Level, from time.Time) time.Time {
	for _, l := range levels {
		if l.At.After(from) && l.RMS > benchLoud {
			return l.At
		}
	}
	return time.Time{}
}
