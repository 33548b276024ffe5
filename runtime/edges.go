package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media"
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
	tools map[string]context.CancelCauseFunc // running calls, by id
}

func (e *liveEdges) wait() { e.wg.Wait() }

func (e *liveEdges) Played(epoch uint64) time.Duration { return e.s.player.Played(epoch) }

func (e *liveEdges) FlushOutput(epoch uint64) { e.s.player.Flush(epoch) }

func (e *liveEdges) PauseOutput() { e.s.player.Pause() }

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
		g := generation{s: e.s, epoch: epoch}
		g.run(ctx, req)
	})
}

// generation is one turn's speech pipeline. The model reader and the
// speaker run concurrently so that the first phrase is synthesised while
// the model is still writing the rest.
type generation struct {
	s     *Session
	epoch uint64
}

const phraseQueue = 64

func (g generation) run(ctx context.Context, req llm.Request) {
	phrases := make(chan string, phraseQueue)
	var wg sync.WaitGroup
	wg.Go(func() { g.speak(ctx, phrases) })
	g.read(ctx, req, phrases)
	wg.Wait()
}

// read streams the model's answer. It reports ModelDone before closing
// phrases, so the conductor always learns the answer is complete before the
// turn's audio can finish.
func (g generation) read(ctx context.Context, req llm.Request, phrases chan<- string) {
	defer close(phrases)
	var (
		calls   llm.CallAccumulator
		chunker tts.Chunker
		err     error
	)
	sctx, stall := g.stallGuard(ctx, "model")
	defer stall.release()
	send := func(p string) bool {
		// Waiting for the speaker is not the model stalling.
		stall.Stop()
		defer stall.Reset(g.s.cfg.stallTimeout)
		select {
		case phrases <- p:
			return true
		case <-ctx.Done():
			return false
		}
	}
	stream, err := g.s.agent.Model.Stream(sctx, req)
	if err == nil {
		defer stream.Close()
		for {
			var chunk llm.Chunk
			chunk, err = stream.Recv()
			if err != nil {
				break
			}
			stall.Reset(g.s.cfg.stallTimeout)
			if chunk.Text != "" {
				g.s.post(ModelText{Epoch: g.epoch, Text: chunk.Text})
				for _, p := range chunker.Push(chunk.Text) {
					if !send(p) {
						return
					}
				}
			}
			if chunk.ToolCall != nil {
				calls.Add(*chunk.ToolCall)
			}
		}
	}
	if ctx.Err() != nil {
		return // cancelled: the conductor has moved on
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	if cause := context.Cause(sctx); errors.Is(cause, ErrProviderStalled) {
		err = cause
	}
	if err != nil {
		err = fmt.Errorf("model stream: %w", err)
	}
	rest := chunker.Flush()
	g.s.post(ModelDone{Epoch: g.epoch, Calls: calls.Calls(), Err: err})
	if rest != "" {
		send(rest)
	}
}

// speak synthesises phrases in order and queues their audio. Word timings
// are shifted onto the turn's audio timeline; a synthesiser that gives none
// gets estimated ones spread over each phrase's audio.
func (g generation) speak(ctx context.Context, phrases <-chan string) {
	synth := g.s.agent.TTS
	var (
		offset time.Duration
		failed error
		rs     *media.Resampler
		rsFrom int
		buf    []int16
	)
	player := g.s.player
	for p := range phrases {
		if ctx.Err() != nil {
			continue // drain so the reader is never stuck
		}
		if synth == nil {
			g.s.post(SpeechWords{Epoch: g.epoch, Words: wordsAt(p, offset, 0)})
			continue
		}
		if failed != nil {
			continue
		}
		start := offset
		timed := false
		sctx, stall := g.stallGuard(ctx, "speech synthesis")
		stream, err := synth.Synthesize(sctx, p)
		for err == nil {
			var chunk tts.Chunk
			chunk, err = stream.Recv()
			if err != nil {
				break
			}
			stall.Reset(g.s.cfg.stallTimeout)
			if len(chunk.Words) > 0 {
				timed = true
				words := make([]tts.WordTiming, len(chunk.Words))
				for i, w := range chunk.Words {
					words[i] = tts.WordTiming{Word: w.Word, Start: start + w.Start, End: start + w.End}
				}
				g.s.post(SpeechWords{Epoch: g.epoch, Words: words})
			}
			a := chunk.Audio
			if len(a.Samples) == 0 {
				continue
			}
			samples := a.Samples
			if a.SampleRate != player.Rate() {
				if rs == nil || rsFrom != a.SampleRate {
					if rs, err = media.NewResampler(a.SampleRate, player.Rate()); err != nil {
						break
					}
					rsFrom = a.SampleRate
				}
				buf = rs.Process(buf[:0], samples)
				samples = buf
			}
			if err = player.Enqueue(ctx, g.epoch, samples); err != nil {
				break
			}
			offset += media.Frame{Samples: samples, SampleRate: player.Rate()}.Duration()
		}
		if stream != nil {
			stream.Close()
		}
		cause := context.Cause(sctx)
		stall.release()
		if ctx.Err() != nil {
			continue
		}
		if errors.Is(cause, ErrProviderStalled) {
			err = cause
		}
		if !errors.Is(err, io.EOF) && err != nil {
			failed = fmt.Errorf("speech synthesis: %w", err)
		}
		// Words without audio were never heard, so they get no timings.
		if !timed && offset > start {
			g.s.post(SpeechWords{Epoch: g.epoch, Words: wordsAt(p, start, offset-start)})
		}
	}
	if ctx.Err() != nil {
		return
	}
	if synth == nil {
		g.s.post(SpeechDone{Epoch: g.epoch})
		g.s.post(PlayoutFinished{Epoch: g.epoch})
		return
	}
	player.EndEpoch(g.epoch)
	g.s.post(SpeechDone{Epoch: g.epoch, Err: failed})
}

// ErrProviderStalled ends a model or synthesis stream that sent nothing for
// longer than the session's stall timeout.
var ErrProviderStalled = errors.New("runtime: provider stalled")

// stallGuard returns a context that is cancelled, with ErrProviderStalled as
// its cause, when the returned timer fires; callers Reset it on every sign
// of life.
func (g generation) stallGuard(ctx context.Context, what string) (context.Context, *stallTimer) {
	limit := g.s.cfg.stallTimeout
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

// errCancelled is the cause given to a call's context by the cancel policy.
var errCancelled = errors.New("runtime: call cancelled because the user interrupted")

// RunTool runs one call under its deadline, writing a mutation's intent to
// the journal first and its outcome after. A body that ignores its context is
// abandoned at the deadline: the call is recorded as timed out and the
// session goes on; if the body finishes later, that late outcome is reported
// (and journaled) too, because it is what really happened.
func (e *liveEdges) RunTool(r ToolRun) {
	deadline, cancelDeadline := context.WithTimeout(e.ctx, r.Tool.Timeout())
	ctx, cancel := context.WithCancelCause(deadline)
	e.mu.Lock()
	e.tools[r.CallID] = cancel
	e.mu.Unlock()
	e.wg.Go(func() {
		defer func() {
			e.mu.Lock()
			delete(e.tools, r.CallID)
			e.mu.Unlock()
			cancel(nil)
			cancelDeadline()
		}()
		ctx := tools.WithPlayout(ctx, r.Turn)
		ctx = tools.WithCallInfo(ctx, tools.CallInfo{ID: r.CallID, Name: r.Tool.Name(), Epoch: r.Epoch, IdempotencyKey: r.Key})
		rec := tools.Record{Session: e.s.cfg.id, CallID: r.CallID, Tool: r.Tool.Name(), Key: r.Key, Args: r.Args}
		mutation := r.Tool.Effect() == tools.Mutation
		if mutation {
			// A failing store must not stop the call: it goes on in memory
			// and the failure is reported.
			if err := e.journal(func(jctx context.Context) error { return e.s.cfg.journal.WriteIntent(jctx, rec) }); err != nil {
				e.s.post(providerFailure{provider: "journal", err: fmt.Errorf("intent of %s: %w", r.CallID, err)})
			}
		}
		done := make(chan ToolOutcome, 1) // buffered: an abandoned body can still finish
		go func() {
			out, err := r.Tool.Run(ctx, r.Args)
			done <- outcomeOf(ctx, r.CallID, out, err)
		}()
		var o ToolOutcome
		select {
		case o = <-done:
		case <-deadline.Done():
			if e.ctx.Err() != nil {
				return // the session is ending
			}
			e.s.post(ToolOutcome{CallID: r.CallID, State: tools.StateTimedOut,
				Err: fmt.Errorf("%w: no result within %v", ErrWaitTimeout, r.Tool.Timeout())})
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
			if err := e.journal(func(jctx context.Context) error { return e.s.cfg.journal.WriteOutcome(jctx, rec) }); err != nil {
				e.s.post(providerFailure{provider: "journal", err: fmt.Errorf("outcome of %s: %w", r.CallID, err)})
			}
		}
		e.s.post(o)
	})
}

// outcomeOf names the state a body's return puts its call in.
func outcomeOf(ctx context.Context, id, out string, err error) ToolOutcome {
	o := ToolOutcome{CallID: id, State: tools.StateSucceeded, Output: out, Err: err}
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), errCancelled) && errors.Is(err, context.Canceled):
		o.State = tools.StateCancelled
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		o.State = tools.StateTimedOut
	default:
		o.State = tools.StateFailed
	}
	return o
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
	cancel := e.tools[id]
	e.mu.Unlock()
	if cancel != nil {
		cancel(errCancelled)
	}
}

// Reconcile asks the tool's Reconciler what call r.Of really did, under the
// tool's deadline.
func (e *liveEdges) Reconcile(r ToolRun) {
	e.wg.Go(func() {
		ctx, cancel := context.WithTimeout(e.ctx, r.Tool.Timeout())
		defer cancel()
		res := ReconcileOutcome{CallID: r.CallID, Of: r.Of}
		rec := r.Tool.Reconciler()
		ci := tools.CallInfo{ID: r.Of, Name: r.Tool.Name(), Epoch: r.Epoch, IdempotencyKey: r.Key}
		done := make(chan ReconcileOutcome, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- ReconcileOutcome{CallID: r.CallID, Of: r.Of, Err: fmt.Errorf("%w: reconcile: %v", tools.ErrToolPanicked, p)}
				}
			}()
			found, err := rec(ctx, ci, r.Args)
			done <- ReconcileOutcome{CallID: r.CallID, Of: r.Of, Done: found.Done, Output: found.Output, Err: err}
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
