package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// liveEdges runs a session's I/O on goroutines: one generation (model
// stream → phrases → synthesis → output queue) per turn, one runner per tool
// call. Its methods are called only from the conductor goroutine and return
// at once.
type liveEdges struct {
	s    *Session
	ctx  context.Context
	gens map[uint64]context.CancelFunc // conductor goroutine only
	wg   sync.WaitGroup

	mu    sync.Mutex
	tools map[string]*engine.ToolCall // running calls, by id
}

func (e *liveEdges) wait() { e.wg.Wait() }

func (e *liveEdges) Played(epoch uint64) time.Duration { return e.s.player.Played(epoch) }

func (e *liveEdges) FlushOutput(epoch uint64) { e.s.player.Flush(epoch) }

func (e *liveEdges) PauseOutput() { e.s.player.Pause() }

func (e *liveEdges) HoldOutput(epoch uint64) { e.s.player.Hold(epoch) }

func (e *liveEdges) ReleaseOutput(epoch uint64) { e.s.player.Release(epoch) }

func (e *liveEdges) ResumeOutput() { e.s.player.Resume() }

func (e *liveEdges) CancelGeneration(epoch uint64) {
	if cancel, ok := e.gens[epoch]; ok {
		cancel()
		delete(e.gens, epoch)
	}
}

func (e *liveEdges) StartGeneration(epoch uint64, req llm.Request) {
	ctx, cancel := context.WithCancel(e.ctx)
	e.gens[epoch] = cancel
	e.wg.Go(func() {
		defer cancel()
		g := generation{s: e.s, epoch: epoch, stages: &stageMarks{}}
		g.run(ctx, req)
	})
}

// generation is one turn's speech pipeline. The model reader and the
// speaker run concurrently so that the first phrase is synthesised while
// the model is still writing the rest.
type generation struct {
	s      *Session
	epoch  uint64
	stages *stageMarks
}

// stageMarks are the stages a generation has reported, shared by its
// model reader and its speaker (each marks its own stages).
type stageMarks struct {
	mu   sync.Mutex
	seen [engine.StageQueued + 1]bool
}

// reach reports a stage of the turn's answer the first time it is
// reached, read on the session clock now. The voice's first audio is
// reported with its queueing (StageQueued, VoiceFirstAudio), in one input:
// it goes into the mailbox just ahead of the player's note that the audio
// started playing, which it must not hold up.
func (g generation) reach(in engine.StageReached) {
	g.stages.mu.Lock()
	seen := g.stages.seen[in.Stage]
	g.stages.seen[in.Stage] = true
	g.stages.mu.Unlock()
	if !seen {
		in.Epoch = g.epoch
		if in.At.IsZero() {
			in.At = g.s.cfg.Clock.Now()
		}
		g.s.post(in)
	}
}

// providerName names a provider for the turn's breakdown and metrics: its
// Name, or its Go type.
func providerName(p any) string {
	if n, ok := p.(interface{ Name() string }); ok && n.Name() != "" {
		return n.Name()
	}
	return fmt.Sprintf("%T", p)
}

const phraseQueue = 64

// piece is what the model reader hands the speaker: a phrase to
// synthesise, or a speech-to-speech model's own audio or transcript.
type piece struct {
	text       string
	audio      []int16
	rate       int
	transcript string
}

func (g generation) run(ctx context.Context, req llm.Request) {
	pieces := make(chan piece, phraseQueue)
	var wg sync.WaitGroup
	wg.Go(func() { g.speak(ctx, pieces) })
	g.read(ctx, req, pieces)
	wg.Wait()
}

// read streams the model's answer, from the backup model if the agent's
// model fails before its first token. It reports engine.ModelDone before closing
// pieces, so the conductor always learns the answer is complete before the
// turn's audio can finish. A model that fails having said nothing leaves
// the agent's apology to be spoken, not silence.
func (g generation) read(ctx context.Context, req llm.Request, pieces chan<- piece) {
	defer close(pieces)
	agent := g.s.currentAgent()
	var (
		calls  llm.CallAccumulator
		answer = engine.NewAnswerText(g.s.cfg.FirstPhraseWords)
		err    error
	)
	send := func(p piece) bool {
		select {
		case pieces <- p:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, model := range []llm.Model{agent.Model, agent.BackupModel} {
		if model == nil {
			continue
		}
		if err != nil {
			g.s.post(engine.ProviderFailover{Provider: "llm", Err: err})
			req.Reason = llm.ReasonRetry
		}
		var started bool
		started, err = g.stream(ctx, model, req, &calls, &answer, send)
		if err == nil || started || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return // cancelled: the conductor has moved on
	}
	rest, apologised := answer.End(err, agent.Apology)
	if apologised {
		g.s.post(engine.ModelText{Epoch: g.epoch, Text: rest})
	}
	g.s.post(engine.ModelDone{Epoch: g.epoch, Calls: calls.Calls(), Err: err})
	if rest != "" {
		send(piece{text: rest})
	}
}

// stream reads one model's answer into pieces and calls; started reports
// whether anything of the answer came out before an error.
func (g generation) stream(ctx context.Context, model llm.Model, req llm.Request,
	calls *llm.CallAccumulator, answer *engine.AnswerText, send func(piece) bool) (started bool, err error) {
	sctx, stall := g.stallGuard(ctx, "model")
	defer stall.release()
	deliver := func(p piece) bool {
		// Waiting for the speaker is not the model stalling.
		stall.Stop()
		defer stall.Reset(g.s.cfg.StallTimeout)
		return send(p)
	}
	g.reach(engine.StageReached{Stage: engine.StageRequest, Provider: providerName(model)})
	stream, err := model.Stream(sctx, req)
	if err == nil {
		defer stream.Close()
		for {
			var chunk llm.Chunk
			chunk, err = stream.Recv()
			if err != nil {
				break
			}
			stall.Reset(g.s.cfg.StallTimeout)
			if u := chunk.Usage; u != nil {
				g.s.post(engine.ModelUsage{Epoch: g.epoch, TokensIn: u.InputTokens, TokensOut: u.OutputTokens})
			}
			if chunk.Text != "" || chunk.Transcript != "" || len(chunk.Audio.Samples) > 0 || chunk.ToolCall != nil {
				g.reach(engine.StageReached{Stage: engine.StageFirstToken})
			}
			if chunk.Text != "" {
				started = true
				g.s.post(engine.ModelText{Epoch: g.epoch, Text: chunk.Text})
				for _, p := range answer.Text(chunk.Text) {
					if !deliver(piece{text: p}) {
						return started, ctx.Err()
					}
				}
			}
			if chunk.Transcript != "" {
				started = true
				answer.Spoke()
				g.s.post(engine.ModelText{Epoch: g.epoch, Text: chunk.Transcript})
				if !deliver(piece{transcript: chunk.Transcript}) {
					return started, ctx.Err()
				}
			}
			if a := chunk.Audio; len(a.Samples) > 0 {
				started = true
				answer.Spoke()
				if !deliver(piece{audio: slices.Clone(a.Samples), rate: a.SampleRate}) {
					return started, ctx.Err()
				}
			}
			if chunk.ToolCall != nil {
				started = true
				if rest := answer.ToolCall(); rest != "" && !deliver(piece{text: rest}) {
					return started, ctx.Err()
				}
				calls.Add(*chunk.ToolCall)
			}
		}
	}
	if errors.Is(err, io.EOF) {
		return started, nil
	}
	if cause := context.Cause(sctx); errors.Is(cause, ErrProviderStalled) && ctx.Err() == nil {
		err = cause
	}
	return started, fmt.Errorf("model stream: %w", err)
}

// speak synthesises phrases in order and queues their audio, or queues the
// model's own audio. Word timings are shifted onto the turn's audio
// timeline; a synthesiser that gives none gets estimated ones spread over
// each phrase's audio, and a speaking model's transcript is timed by
// voiceWords. A phrase the voice fails on is tried again as engine.PhraseTries
// says; if no voice can speak it, it and the rest of the answer are
// reported unspoken, so the context says what the caller missed.
func (g generation) speak(ctx context.Context, pieces <-chan piece) {
	agent := g.s.currentAgent()
	voices := make([]tts.Synthesizer, 0, 2)
	for _, v := range []tts.Synthesizer{agent.TTS, agent.BackupTTS} {
		if v != nil && !slices.Contains(voices, v) {
			voices = append(voices, v)
		}
	}
	textOnly := g.s.textOnly()
	var (
		speech = engine.NewSynthesis(len(voices))
		out    = outputQueue{player: g.s.player, clock: g.s.cfg.Clock, epoch: g.epoch}
		voice  voiceWords
	)
	for p := range pieces {
		if ctx.Err() != nil {
			continue // drain so the reader is never stuck
		}
		switch {
		case p.transcript != "":
			voice.add(p.transcript)
			g.postWords(voice.timed(speech.Offset(), false))
			continue
		case len(p.audio) > 0:
			voice.begin(speech.Offset())
			// A speaking model is its own voice.
			first := g.s.cfg.Clock.Now()
			d, err := out.enqueue(ctx, p.audio, p.rate)
			if err != nil {
				if ctx.Err() == nil {
					speech.Fail(fmt.Errorf("model audio: %w", err))
				}
				continue
			}
			speech.Queued(d)
			g.reach(engine.StageReached{Stage: engine.StageQueued, At: out.queuedAt, VoiceFirstAudio: first})
			g.postWords(voice.timed(speech.Offset(), false))
			continue
		}
		if textOnly {
			g.postWords(wordsAt(p.text, speech.Offset(), 0))
			continue
		}
		if len(voices) == 0 {
			continue
		}
		if speech.Say(p.text) {
			g.sayPhrase(ctx, voices, &speech, p.text, &out)
		}
	}
	if ctx.Err() != nil {
		return
	}
	g.postWords(voice.timed(speech.Offset(), true))
	if textOnly {
		g.s.post(engine.SpeechDone{Epoch: g.epoch})
		g.s.post(engine.PlayoutFinished{Epoch: g.epoch})
		return
	}
	g.s.player.EndEpoch(g.epoch)
	g.s.post(speech.Done(g.epoch))
}

// sayPhrase speaks one phrase, trying again as speech says when the voice
// fails: a retry or a backup voice says the whole phrase, so a caller who
// heard its start hears it begin again rather than a gap. speech records
// the phrase unspoken if no voice could speak it.
func (g generation) sayPhrase(ctx context.Context, voices []tts.Synthesizer, speech *engine.Synthesis,
	text string, out *outputQueue) {
	for {
		err := g.synthesize(ctx, voices[speech.Voice()], text, speech, out)
		if err == nil || ctx.Err() != nil {
			return
		}
		wait, failover, ok := speech.Failed(text, err)
		if !ok {
			return
		}
		if failover {
			g.s.post(engine.ProviderFailover{Provider: "tts", Err: err})
			continue
		}
		t := time.NewTimer(min(wait, g.s.cfg.StallTimeout))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

func (g generation) postWords(words []tts.WordTiming) {
	if len(words) > 0 {
		g.s.post(engine.SpeechWords{Epoch: g.epoch, Words: words})
	}
}

// synthesize speaks one phrase with voice, its audio going on the turn's
// audio timeline where speech says.
func (g generation) synthesize(ctx context.Context, voice tts.Synthesizer, text string,
	speech *engine.Synthesis, out *outputQueue) error {
	start := speech.Offset()
	timed := false
	sctx, stall := g.stallGuard(ctx, "speech synthesis")
	g.reach(engine.StageReached{Stage: engine.StageFirstPhrase, Provider: providerName(voice)})
	stream, err := voice.Synthesize(sctx, text)
	for err == nil {
		var chunk tts.Chunk
		chunk, err = stream.Recv()
		if err != nil {
			break
		}
		stall.Reset(g.s.cfg.StallTimeout)
		if len(chunk.Words) > 0 {
			timed = true
			g.postWords(engine.WordsFrom(start, chunk.Words))
		}
		if len(chunk.Audio.Samples) == 0 {
			continue
		}
		first := g.s.cfg.Clock.Now()
		var d time.Duration
		if d, err = out.enqueue(ctx, chunk.Audio.Samples, chunk.Audio.SampleRate); err != nil {
			break
		}
		g.reach(engine.StageReached{Stage: engine.StageQueued, At: out.queuedAt, VoiceFirstAudio: first})
		speech.Queued(d)
	}
	if stream != nil {
		stream.Close()
	}
	cause := context.Cause(sctx)
	stall.release()
	if errors.Is(cause, ErrProviderStalled) && ctx.Err() == nil {
		err = cause
	}
	// Words without audio were never heard, so they get no timings.
	if end := speech.Offset(); !timed && end > start {
		g.postWords(wordsAt(text, start, end-start))
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return fmt.Errorf("speech synthesis: %w", err)
}

// outputQueue queues a turn's audio on the player, resampled to its rate.
type outputQueue struct {
	player *media.Player
	clock  engine.Clock
	epoch  uint64
	// queuedAt is when the last samples were handed to the player, read
	// before the handing: the player may start playing them at once, and
	// its note must not come before their queueing.
	queuedAt time.Time
	rs       *media.Resampler
	rsFrom   int
	buf      []int16
}

// enqueue queues samples at rate and returns their duration at the output.
func (q *outputQueue) enqueue(ctx context.Context, samples []int16, rate int) (time.Duration, error) {
	if rate != q.player.Rate() {
		if q.rs == nil || q.rsFrom != rate {
			rs, err := media.NewResampler(rate, q.player.Rate())
			if err != nil {
				return 0, err
			}
			q.rs, q.rsFrom = rs, rate
		}
		q.buf = q.rs.Process(q.buf[:0], samples)
		samples = q.buf
	}
	q.queuedAt = q.clock.Now()
	if err := q.player.Enqueue(ctx, q.epoch, samples); err != nil {
		return 0, err
	}
	return media.Frame{Samples: samples, SampleRate: q.player.Rate()}.Duration(), nil
}

// voiceWords times the words of a speaking model's transcript, which
// arrives with no timings, usually a little ahead of its audio. Each word
// is placed at an ordinary speaking pace, never past the audio received so
// far, so a cut never credits the caller with words they did not hear;
// what is left when the stream ends is spread over the rest of the audio.
type voiceWords struct {
	text    strings.Builder // transcript not yet split into words
	pending []string        // whole words not yet timed
	at      time.Duration   // end of the last timed word
	begun   bool
}

// voiceCharsPerSecond is an ordinary speaking pace: about 150 words a
// minute.
const voiceCharsPerSecond = 14

func (v *voiceWords) begin(offset time.Duration) {
	if !v.begun {
		v.begun, v.at = true, offset
	}
}

func (v *voiceWords) add(text string) {
	v.text.WriteString(text)
	s := v.text.String()
	cut := strings.LastIndexAny(s, " \t\n")
	if cut < 0 {
		return
	}
	v.pending = append(v.pending, strings.Fields(s[:cut])...)
	v.text.Reset()
	v.text.WriteString(s[cut+1:])
}

// timed returns the words that fit in the audio up to end; at the end of
// the stream, all of them.
func (v *voiceWords) timed(end time.Duration, final bool) []tts.WordTiming {
	if final {
		v.pending = append(v.pending, strings.Fields(v.text.String())...)
		v.text.Reset()
		if !v.begun || len(v.pending) == 0 {
			return nil
		}
		words := wordsAt(strings.Join(v.pending, " "), v.at, max(end-v.at, 0))
		v.pending = nil
		return words
	}
	if !v.begun {
		return nil
	}
	var out []tts.WordTiming
	for len(v.pending) > 0 {
		w := v.pending[0]
		d := time.Duration(len(w)+1) * time.Second / voiceCharsPerSecond
		if v.at+d > end {
			break
		}
		out = append(out, tts.WordTiming{Word: w, Start: v.at, End: v.at + d})
		v.at += d
		v.pending = v.pending[1:]
	}
	return out
}

// stallGuard returns a context that is cancelled, with ErrProviderStalled as
// its cause, when the returned timer fires; callers Reset it on every sign
// of life.
func (g generation) stallGuard(ctx context.Context, what string) (context.Context, *stallTimer) {
	limit := g.s.cfg.StallTimeout
	sctx, cancel := context.WithCancelCause(ctx)
	t := &stallTimer{cancel: cancel}
	t.Timer = time.AfterFunc(limit, func() {
		cancel(fmt.Errorf("%w: %s sent nothing for %v", ErrProviderStalled, what, limit))
	})
	return sctx, t
}

type stallTimer struct {
	*time.Timer
	cancel context.CancelCauseFunc
}

// release stops the guard and frees its context; read the context's cause
// before calling it.
func (t *stallTimer) release() {
	t.Stop()
	t.cancel(nil)
}

// wordsAt spreads the words of text over [start, start+dur), each in
// proportion to its length: the estimate used when synthesis gives no word
// timings.
func wordsAt(text string, start, dur time.Duration) []tts.WordTiming {
	words := strings.Fields(text)
	total := 0
	for _, w := range words {
		total += len(w) + 1
	}
	out := make([]tts.WordTiming, len(words))
	at := start
	for i, w := range words {
		d := time.Duration(0)
		if total > 0 {
			d = dur * time.Duration(len(w)+1) / time.Duration(total)
		}
		out[i] = tts.WordTiming{Word: w, Start: at, End: at + d}
		at += d
	}
	return out
}

// RunTool runs one call under its deadline, writing a mutation's intent to
// the journal first and its outcome after. A body that ignores its context is
// abandoned at the deadline: the call is recorded as timed out and the
// session goes on; if the body finishes later, that late outcome is reported
// (and journaled) too, because it is what really happened.
func (e *liveEdges) RunTool(r engine.ToolRun) {
	call := engine.NewToolCall(e.ctx, r)
	e.mu.Lock()
	e.tools[r.CallID] = call
	e.mu.Unlock()
	e.wg.Go(func() {
		defer func() {
			e.mu.Lock()
			delete(e.tools, r.CallID)
			e.mu.Unlock()
			call.Release()
		}()
		ctx := context.WithValue(call.Ctx, sessionKey{}, e.s)
		rec := tools.Record{Session: e.s.cfg.ID, CallID: r.CallID, Tool: r.Tool.Name(), Key: r.Key, Args: r.Args}
		mutation := r.Tool.Effect() == tools.Mutation
		if mutation {
			// A failing store must not stop the call: it goes on in memory
			// and the failure is reported.
			if err := e.journal(func(jctx context.Context) error { return e.s.cfg.Journal.WriteIntent(jctx, rec) }); err != nil {
				e.s.post(engine.ProviderFailure{Provider: "journal", Err: fmt.Errorf("intent of %s: %w", r.CallID, err)})
			}
		}
		done := make(chan engine.ToolOutcome, 1) // buffered: an abandoned body can still finish
		go func() {
			out, err := r.Tool.Run(ctx, r.Args)
			done <- call.Outcome(out, err)
		}()
		var o engine.ToolOutcome
		timedOut := false
		select {
		case o = <-done:
		case <-call.Deadline.Done():
			if e.ctx.Err() != nil {
				return // the session is ending
			}
			e.s.post(call.TimedOut())
			timedOut = true
			select {
			case o = <-done: // the late outcome, posted below
			case <-e.ctx.Done():
				return
			}
		}
		if mutation {
			rec.State, rec.Output, rec.IsError = o.State, o.Output, o.Err != nil
			if o.Err != nil {
				rec.Output = o.Err.Error()
			}
			if err := e.journal(func(jctx context.Context) error { return e.s.cfg.Journal.WriteOutcome(jctx, rec) }); err != nil {
				e.s.post(engine.ProviderFailure{Provider: "journal", Err: fmt.Errorf("outcome of %s: %w", r.CallID, err)})
			}
		}
		if timedOut && o.State == tools.StateTimedOut {
			// The body stopped because of the deadline the core was just
			// told of: the same timeout, not news.
			return
		}
		e.s.post(o)
	})
}

// journal runs one journal write under its own short deadline.
func (e *liveEdges) journal(write func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(e.ctx, journalTimeout)
	defer cancel()
	return write(ctx)
}

// CancelTool cancels a running call's context; the body decides how it
// ends.
func (e *liveEdges) CancelTool(id string) {
	e.mu.Lock()
	call := e.tools[id]
	e.mu.Unlock()
	if call != nil {
		call.Interrupt()
	}
}

// Reconcile asks the tool's Reconciler what call r.Of really did, under the
// tool's deadline.
func (e *liveEdges) Reconcile(r engine.ToolRun) {
	e.wg.Go(func() {
		ctx, cancel := context.WithTimeout(e.ctx, r.Tool.Timeout())
		defer cancel()
		res := engine.ReconcileOutcome{CallID: r.CallID, Of: r.Of}
		rec := r.Tool.Reconciler()
		ci := tools.CallInfo{ID: r.Of, Name: r.Tool.Name(), Epoch: r.Epoch, IdempotencyKey: r.Key}
		done := make(chan engine.ReconcileOutcome, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- engine.ReconcileOutcome{CallID: r.CallID, Of: r.Of, Err: fmt.Errorf("%w: reconcile: %v", tools.ErrToolPanicked, p)}
				}
			}()
			found, err := rec(ctx, ci, r.Args)
			done <- engine.ReconcileOutcome{CallID: r.CallID, Of: r.Of, Done: found.Done, Output: found.Output, Err: err}
		}()
		select {
		case res = <-done:
		case <-ctx.Done():
			if e.ctx.Err() != nil {
				return
			}
			res.Err = fmt.Errorf("%w: reconcile gave no answer within %v", ErrWaitTimeout, r.Tool.Timeout())
		}
		e.s.post(res)
	})
}
