package sim

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// Errors the scripted edges report for injected faults.
var (
	errLLMFault = errors.New("sim: injected llm_error")
	errTTSFault = errors.New("sim: injected tts_error")
)

// edges are the scripted model, synthesiser, output and tools, in virtual
// time. They implement engine.Edges, and record what happened for the
// checks: every request the model received, every tool body run, every
// sample played.
type edges struct {
	r  *run
	in *input

	nextModel int
	gens      map[uint64]*generation
	// armed faults hit the next model request or synthesis when none is in
	// flight at the fault's time.
	llmArmed, ttsArmed bool
	// ttsDownUntil: a tts_error outage fails every synthesis on the
	// agent's voice started before then.
	ttsDownUntil time.Duration

	requests []request
	player   player
	// held is the epoch whose audio waits for ReleaseOutput: a
	// speculative answer's. discarded counts the speculative requests
	// never used; their scripted responses went to the next request.
	held      uint64
	discarded int

	ncall    uint64
	toolRuns map[string]int
	runs     map[string]*toolRun // by call id
	byKey    map[string][]*toolRun
}

type request struct {
	at    time.Duration
	epoch uint64
	items []llm.Item
	// used is when a speculative request's answer was taken for the
	// turn: from then on it carries the turn's words (0 for others).
	used time.Duration
}

// carries is when the request carried its items to a turn: when it went
// out, or, for a speculative one, when it was used.
func (q request) carries() time.Duration { return max(q.at, q.used) }

type generation struct {
	epoch     uint64
	started   time.Duration
	cancelled bool
	modelDone bool // ModelDone delivered
	synthDone bool // SpeechDone delivered
	reply     engine.Timer
	ended     time.Duration // when the floor was released: -1 while holding
	// model is the index of its scripted response.
	model int
	// held: a speculative answer's, its audio waiting in heldAudio for
	// ReleaseOutput; endDue: its synthesis ended meanwhile. discarded:
	// cancelled while held, so never the caller's to hear.
	held      bool
	heldAudio []heldPhrase
	endDue    bool
	discarded bool

	// Synthesis: the answer's text, its phrases, the next one to speak and
	// the attempt at it (inFlight from its start until it is queued or
	// fails), or the backoff before the next attempt; synth says which
	// voice, and what went unspoken, as it does for a live generation.
	text         string
	phrases      []string
	next         int
	synth        engine.Synthesis
	inFlight     bool
	attemptTimer engine.Timer
}

// heldPhrase is a phrase's audio waiting for its answer to be used.
type heldPhrase struct {
	dur   time.Duration
	words []tts.WordTiming
}

type toolRun struct {
	call     string
	key      string
	tool     *tools.Tool
	spec     *Tool
	finished bool
	state    tools.State
	outcome  engine.Timer
	dedupe   bool
	// real: the Go body runs (WithRealTools) instead of the script.
	real bool
	// epoch is the turn that made the call.
	epoch uint64
	// src is the source its work is scheduled from.
	src uint64
}

func newEdges(r *run) *edges {
	return &edges{
		r:        r,
		gens:     map[uint64]*generation{},
		toolRuns: map[string]int{},
		runs:     map[string]*toolRun{},
		byKey:    map[string][]*toolRun{},
		player:   player{segs: map[uint64][]segment{}, endMark: map[uint64]engine.Timer{}},
	}
}

// StartGeneration answers with the next scripted model response after its
// TTFB, then speaks its text phrase by phrase.
func (e *edges) StartGeneration(epoch uint64, req llm.Request) {
	now := e.r.sched.now()
	e.requests = append(e.requests, request{at: now, epoch: epoch, items: req.Context.Items})
	g := &generation{epoch: epoch, started: now, ended: -1, model: e.nextModel, held: e.held == epoch}
	e.gens[epoch] = g
	resp := ModelResponse{TTFB: defaultModelTTFB}
	if e.nextModel < len(e.r.sc.Model) {
		resp = e.r.sc.Model[e.nextModel]
	}
	e.nextModel++
	src := srcGeneration + epoch
	if e.llmArmed {
		e.llmArmed = false
		g.reply = e.r.sched.at(now+resp.TTFB, src, func() { e.failModel(g) })
		return
	}
	g.reply = e.r.sched.at(now+resp.TTFB, src, func() {
		if g.cancelled || g.modelDone {
			return
		}
		g.modelDone = true
		if resp.Text != "" {
			e.r.handle(engine.ModelText{Epoch: epoch, Text: resp.Text})
		}
		e.r.handle(engine.ModelDone{Epoch: epoch, Calls: calls(resp.ToolCalls)})
		e.speak(g, resp.Text, phrases(resp))
	})
}

// phrases reads a scripted response as a live generation reads a model's
// stream: its text, then its calls, then its end.
func phrases(resp ModelResponse) []string {
	var answer engine.AnswerText
	out := answer.Text(resp.Text)
	if len(resp.ToolCalls) > 0 {
		if rest := answer.ToolCall(); rest != "" {
			out = append(out, rest)
		}
	}
	if rest, _ := answer.End(nil, ""); rest != "" {
		out = append(out, rest)
	}
	return out
}

func calls(tcs []ToolCall) []llm.ToolCall {
	out := make([]llm.ToolCall, len(tcs))
	for i, tc := range tcs {
		out[i] = llm.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Args}
	}
	return out
}

// failModel ends g's model stream with the injected error.
func (e *edges) failModel(g *generation) {
	if g.cancelled || g.modelDone {
		return
	}
	g.modelDone = true
	// The stream fails before its first token: the agent apologises
	// rather than go silent.
	var answer engine.AnswerText
	sorry, _ := answer.End(errLLMFault, "")
	e.r.handle(engine.ModelText{Epoch: g.epoch, Text: sorry})
	e.r.handle(engine.ModelDone{Epoch: g.epoch, Err: errLLMFault})
	// The voice gets the apology as one phrase, as a live generation's does.
	e.speak(g, sorry, []string{sorry})
}

// speak synthesises the phrases of text one at a time, each ready one TTFB
// after the previous, and queues their audio; the words follow the audio.
// A phrase the voice fails on is tried again as engine.Synthesis says, as
// the live generation edge does.
func (e *edges) speak(g *generation, text string, phrases []string) {
	g.text, g.phrases = text, phrases
	voices := 1
	if e.r.sc.TTS.Backup {
		voices = 2
	}
	g.synth = engine.NewSynthesis(voices)
	if len(g.phrases) == 0 {
		e.endSynth(g)
		return
	}
	g.synth.Say(g.phrases[0])
	e.attempt(g, e.r.sched.now())
}

// attempt asks the voice in use for g's next phrase at time at: it is ready
// one TTFB later, unless a fault hits the agent's voice first.
func (e *edges) attempt(g *generation, at time.Duration) {
	g.inFlight = true
	ready := at + e.r.sc.TTS.TTFB
	src := srcGeneration + g.epoch
	onPrimary := g.synth.Voice() == 0
	if onPrimary && (e.ttsArmed || at < e.ttsDownUntil) {
		e.ttsArmed = false
		g.attemptTimer = e.r.sched.at(ready, src, func() { e.failSynth(g) })
		return
	}
	g.attemptTimer = e.r.sched.at(ready, src, func() {
		if g.cancelled || g.synthDone {
			return
		}
		g.inFlight = false
		p := g.phrases[g.next]
		g.next++
		dur, spoken := e.synthesize(p)
		timings := engine.WordsFrom(g.synth.Offset(), spoken)
		g.synth.Queued(dur)
		if g.held {
			g.heldAudio = append(g.heldAudio, heldPhrase{dur: dur, words: timings})
		} else {
			start := e.player.enqueue(e.r.sched.now(), g.epoch, dur, timings)
			e.in.echoFrom(start)
		}
		e.r.handle(engine.SpeechWords{Epoch: g.epoch, Words: timings})
		if g.next == len(g.phrases) {
			e.endSynth(g)
			return
		}
		g.synth.Say(g.phrases[g.next])
		e.attempt(g, e.r.sched.now())
	})
}

// synthesize is the scripted voice: a phrase's audio lasts as long as its
// words take at the scenario's pace, each word an equal share of it.
func (e *edges) synthesize(phrase string) (time.Duration, []tts.WordTiming) {
	words := strings.Fields(phrase)
	dur := time.Duration(float64(len(words)) / e.r.sc.TTS.WordsPerSecond * float64(time.Second))
	timings := make([]tts.WordTiming, len(words))
	for j, w := range words {
		timings[j] = tts.WordTiming{Word: w, Start: dur * time.Duration(j) / time.Duration(len(words)),
			End: dur * time.Duration(j+1) / time.Duration(len(words))}
	}
	return dur, timings
}

// failSynth fails the phrase g is synthesising: it is tried again after the
// backoff, or on the backup voice; when no voice is left, synthesis ends
// with the phrase and the rest of the answer unspoken. What was queued
// still plays.
func (e *edges) failSynth(g *generation) {
	if g.cancelled || g.synthDone || !g.inFlight {
		return
	}
	e.r.sched.cancel(g.attemptTimer)
	g.inFlight = false
	wait, failover, ok := g.synth.Failed(g.phrases[g.next], errTTSFault)
	switch {
	case !ok:
		for _, p := range g.phrases[g.next+1:] {
			g.synth.Say(p) // unspoken: the answer's speech has failed
		}
		e.endSynth(g)
	case failover:
		e.r.handle(engine.ProviderFailover{Provider: "tts", Err: errTTSFault})
		e.attempt(g, e.r.sched.now())
	default:
		g.attemptTimer = e.r.sched.at(e.r.sched.now()+wait, srcGeneration+g.epoch, func() {
			if !g.cancelled && !g.synthDone {
				e.attempt(g, e.r.sched.now())
			}
		})
	}
}

func (e *edges) endSynth(g *generation) {
	g.synthDone = true
	e.r.handle(g.synth.Done(g.epoch))
	e.markEnd(g)
}

// markEnd schedules g's PlayoutFinished for when its queued audio will
// have played (again, after a pause moved it).
func (e *edges) markEnd(g *generation) {
	if g.held {
		g.endDue = true
		return
	}
	e.r.sched.cancel(e.player.endMark[g.epoch])
	end := e.player.end(e.r.sched.now(), g.epoch)
	e.player.endMark[g.epoch] = e.r.sched.at(end, srcPlayer, func() {
		if g.cancelled || e.player.paused {
			return
		}
		delete(e.player.endMark, g.epoch)
		g.ended = e.r.sched.now()
		e.r.handle(engine.PlayoutFinished{Epoch: g.epoch})
	})
}

// HoldOutput keeps a speculative answer's audio from the output until it
// is used.
func (e *edges) HoldOutput(epoch uint64) { e.held = epoch }

// ReleaseOutput queues the held answer's audio: it plays after whatever is
// queued, from now.
func (e *edges) ReleaseOutput(epoch uint64) {
	if e.held == epoch {
		e.held = 0
	}
	g := e.gens[epoch]
	if g == nil || !g.held {
		return
	}
	g.held = false
	now := e.r.sched.now()
	for i := range e.requests {
		if e.requests[i].epoch == epoch {
			e.requests[i].used = now
		}
	}
	for _, p := range g.heldAudio {
		e.in.echoFrom(e.player.enqueue(now, epoch, p.dur, p.words))
	}
	g.heldAudio = nil
	if g.endDue {
		e.markEnd(g)
	}
}

// PauseOutput holds the output where it is, for a suspected barge-in.
func (e *edges) PauseOutput() {
	now := e.r.sched.now()
	if !e.player.pause(now) {
		return
	}
	for _, t := range e.player.endMark {
		e.r.sched.cancel(t)
	}
}

// ResumeOutput goes on from the sample where the output paused.
func (e *edges) ResumeOutput() {
	if !e.player.resume(e.r.sched.now()) {
		return
	}
	// In epoch order: the schedule must not depend on map order.
	for _, ep := range slices.Sorted(maps.Keys(e.player.endMark)) {
		e.markEnd(e.gens[ep])
	}
	e.in.outputResumed()
}

// fault applies an injected fault at its time.
func (e *edges) fault(f Fault) {
	switch f.Kind {
	case "llm_error":
		for _, g := range e.inFlight() {
			if !g.modelDone {
				e.r.sched.cancel(g.reply)
				e.failModel(g)
				return
			}
		}
		e.llmArmed = true
	case "tts_error":
		if f.Duration > 0 {
			e.ttsDownUntil = max(e.ttsDownUntil, e.r.sched.now()+f.Duration)
		}
		for _, g := range e.inFlight() {
			// A retry waiting out its backoff is not talking to the voice:
			// the fault is armed for it instead.
			if g.modelDone && !g.synthDone && g.inFlight && g.synth.Voice() == 0 {
				e.failSynth(g)
				return
			}
		}
		if f.Duration == 0 {
			e.ttsArmed = true
		}
	case "transport_drop":
		e.r.handle(engine.TransportLost{})
	}
}

// inFlight lists generations not cancelled, oldest first.
func (e *edges) inFlight() []*generation {
	var out []*generation
	for _, ep := range slices.Sorted(maps.Keys(e.gens)) {
		if g := e.gens[ep]; !g.cancelled {
			out = append(out, g)
		}
	}
	return out
}

// CancelGeneration stops turn epoch: nothing more of it is delivered.
func (e *edges) CancelGeneration(epoch uint64) {
	g := e.gens[epoch]
	if g == nil || g.cancelled {
		return
	}
	g.cancelled = true
	if g.ended < 0 {
		g.ended = e.r.sched.now()
	}
	e.r.sched.cancel(g.reply)
	e.r.sched.cancel(g.attemptTimer)
	if g.held {
		// A speculative answer never used: it was not the turn's, and
		// the script's response goes to the request that is.
		g.discarded, g.heldAudio = true, nil
		e.nextModel = g.model
		e.discarded++
		e.requests = slices.DeleteFunc(e.requests, func(q request) bool { return q.epoch == epoch })
		if e.held == epoch {
			e.held = 0
		}
	}
}

// FlushOutput drops the queued audio of epochs <= epoch.
func (e *edges) FlushOutput(epoch uint64) {
	for _, ep := range e.player.flush(e.r.sched.now(), epoch) {
		if m := e.player.endMark[ep]; m != nil {
			e.r.sched.cancel(m)
			delete(e.player.endMark, ep)
		}
		if g := e.gens[ep]; g != nil && g.ended < 0 {
			g.ended = e.r.sched.now()
		}
	}
}

// Played is the playout clock.
func (e *edges) Played(epoch uint64) time.Duration { return e.player.played(e.r.sched.now(), epoch) }

// RunTool runs a scripted body: it ends after its duration with its result
// or error, never (hang), or at its deadline as timed out; a body that
// outlives its deadline still reports its late outcome.
func (e *edges) RunTool(r engine.ToolRun) {
	now := e.r.sched.now()
	spec := e.r.toolSpec(r.Tool.Name())
	e.ncall++
	src := srcTool + e.ncall
	tr := &toolRun{call: r.CallID, key: r.Key, tool: r.Tool, spec: spec, dedupe: r.Tool.Dedupe(),
		real: e.r.bodies != nil && spec.def != nil && !spec.scripted, epoch: r.Epoch, src: src}
	e.checkOnce(tr)
	e.toolRuns[r.Tool.Name()]++
	e.runs[r.CallID] = tr
	e.byKey[r.Key] = append(e.byKey[r.Key], tr)
	if tr.real {
		// The body's own return comes through the bubble; its deadline is
		// kept here, as for a script, so that the core hears of it in the
		// same step as the body's context does.
		e.r.bodies.start(r, tr, src)
	} else if !spec.Hang {
		tr.outcome = e.r.sched.at(now+spec.Duration, src, func() {
			out, err := string(spec.Result), error(nil)
			if spec.Error != "" {
				out, err = "", errors.New(spec.Error)
			}
			e.finishTool(tr, engine.ToolOutcomeOf(context.Background(), r.CallID, out, err))
		})
	}
	if tr.real || spec.Hang || spec.Duration >= r.Tool.Timeout() {
		e.r.sched.at(now+r.Tool.Timeout(), src, func() {
			if tr.finished {
				return
			}
			tr.finished, tr.state = true, tools.StateTimedOut
			e.r.handle(engine.ToolTimedOut(r.CallID, r.Tool.Timeout()))
		})
	}
}

// finishTool reports a body's return: its outcome, or its late outcome
// after a timeout.
func (e *edges) finishTool(tr *toolRun, o engine.ToolOutcome) {
	if tr.finished && tr.state != tools.StateTimedOut {
		return
	}
	tr.finished, tr.state = true, o.State
	e.r.handle(o)
}

// CancelTool cancels a running body: it stops at once unless the tool
// ignores cancellation.
func (e *edges) CancelTool(id string) {
	tr := e.runs[id]
	if tr != nil && tr.real && !tr.finished {
		e.r.bodies.cancel(id) // the body decides how it ends
		return
	}
	if tr == nil || tr.finished || tr.spec.IgnoresCancel {
		return
	}
	e.r.sched.cancel(tr.outcome)
	// A scripted body heeds its context: it returns the context's error,
	// which reaches the core as its next input, never inside this
	// command, as a live body's return waits in the mailbox.
	tr.outcome = e.r.sched.at(e.r.sched.now(), tr.src, func() {
		e.finishTool(tr, engine.ToolOutcomeOf(interrupted, id, "", context.Canceled))
	})
}

// interrupted is a scripted body's context once the cancel policy has
// cancelled it.
var interrupted = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(engine.ErrCallInterrupted)
	return ctx
}()

// Reconcile is never asked: scripted tools have no Reconciler.
func (e *edges) Reconcile(r engine.ToolRun) {
	e.r.violate("the core asked a scripted tool without a Reconciler to reconcile call %s", r.Of)
}

// checkOnce is the at-most-once invariant, checked when a body starts: no
// earlier body with the same key may be running, have succeeded, or have an
// unknown outcome (timed out). Failures and cancellations may be retried.
func (e *edges) checkOnce(tr *toolRun) {
	if !tr.dedupe {
		return
	}
	for _, p := range e.byKey[tr.key] {
		switch {
		case !p.finished:
			e.r.violate("mutation %s ran again (call %s) while call %s with the same idempotency key was still running", tr.tool.Name(), tr.call, p.call)
		case p.state == tools.StateSucceeded:
			e.r.violate("mutation %s ran twice for one idempotency key: call %s after call %s had succeeded", tr.tool.Name(), tr.call, p.call)
		case p.state == tools.StateTimedOut:
			e.r.violate("mutation %s ran again (call %s) though call %s with the same idempotency key timed out with its outcome unknown", tr.tool.Name(), tr.call, p.call)
		}
	}
}

// player is the output: audio of each epoch plays in order after the
// audio queued before it. It knows what the caller really heard. A pause
// holds everything not yet played at pausedAt; resuming moves it later by
// the pause's length.
type player struct {
	cursor  time.Duration // when the output is free
	segs    map[uint64][]segment
	endMark map[uint64]engine.Timer
	order   []uint64 // epochs in the order their audio was first queued

	paused   bool
	pausedAt time.Duration
}

// at is the output's own time: now, or where it paused.
func (p *player) at(now time.Duration) time.Duration {
	if p.paused {
		return p.pausedAt
	}
	return now
}

// pause holds the output at now, splitting the segment playing then so
// that its rest (and its words not yet begun) plays after the pause.
func (p *player) pause(now time.Duration) bool {
	if p.paused {
		return false
	}
	p.paused, p.pausedAt = true, now
	for ep, segs := range p.segs {
		for i := 0; i < len(segs); i++ {
			s := segs[i]
			if s.flushed || s.start >= now || s.start+s.dur <= now {
				continue
			}
			head := now - s.start
			var early, late []tts.WordTiming
			for _, w := range s.words {
				if w.Start-s.offset < head {
					early = append(early, w)
				} else {
					late = append(late, w)
				}
			}
			rest := segment{start: now, dur: s.dur - head, offset: s.offset + head, words: late}
			segs[i].dur, segs[i].words = head, early
			segs = slices.Insert(segs, i+1, rest)
			i++
		}
		p.segs[ep] = segs
	}
	return true
}

// resume plays on from where the output paused.
func (p *player) resume(now time.Duration) bool {
	if !p.paused {
		return false
	}
	p.paused = false
	shift := now - p.pausedAt
	for _, segs := range p.segs {
		for i := range segs {
			if segs[i].start >= p.pausedAt {
				segs[i].start += shift
			}
		}
	}
	if p.cursor >= p.pausedAt {
		p.cursor += shift
	}
	return true
}

// playingWithin reports whether audio played at any time in [from, to).
func (p *player) playingWithin(now, from, to time.Duration) bool {
	to = min(to, p.at(now))
	for _, segs := range p.segs {
		for _, s := range segs {
			if s.dur > 0 && s.start < to && s.start+s.dur > from {
				return true
			}
		}
	}
	return false
}

// playedTotal is how much audio has played in all.
func (p *player) playedTotal(now time.Duration) time.Duration {
	var d time.Duration
	for ep := range p.segs {
		d += p.played(now, ep)
	}
	return d
}

type segment struct {
	start, dur time.Duration
	offset     time.Duration // within the epoch's audio
	words      []tts.WordTiming
	flushed    bool
}

func (p *player) queued(epoch uint64) time.Duration {
	var d time.Duration
	for _, s := range p.segs[epoch] {
		d += s.dur
	}
	return d
}

// enqueue queues audio and returns when it will start playing.
func (p *player) enqueue(now time.Duration, epoch uint64, dur time.Duration, words []tts.WordTiming) time.Duration {
	start := max(p.at(now), p.cursor)
	if _, ok := p.segs[epoch]; !ok {
		p.order = append(p.order, epoch)
	}
	p.segs[epoch] = append(p.segs[epoch], segment{start: start, dur: dur, offset: p.queued(epoch), words: words})
	p.cursor = start + dur
	return start
}

// end is when epoch's queued audio will have played.
func (p *player) end(now time.Duration, epoch uint64) time.Duration {
	end := p.at(now)
	for _, s := range p.segs[epoch] {
		end = max(end, s.start+s.dur)
	}
	return end
}

func (p *player) played(now time.Duration, epoch uint64) time.Duration {
	now = p.at(now)
	var d time.Duration
	for _, s := range p.segs[epoch] {
		d += min(max(now-s.start, 0), s.dur)
	}
	return d
}

// flush cuts every segment of epochs <= epoch at now and returns the epochs
// it cut.
func (p *player) flush(now time.Duration, epoch uint64) []uint64 {
	now = p.at(now)
	var cut []uint64
	for _, ep := range p.order {
		if ep > epoch {
			continue
		}
		segs := p.segs[ep]
		touched := false
		for i := range segs {
			s := &segs[i]
			if s.flushed || s.start+s.dur <= now {
				continue
			}
			// Audio not yet started no longer holds its slot: the output is
			// free from now.
			s.start = min(s.start, now)
			s.dur = min(now-s.start, s.dur)
			s.flushed = true
			touched = true
		}
		if touched || p.endMark[ep] != nil {
			cut = append(cut, ep)
		}
	}
	if p.cursor > now {
		p.cursor = now
		for _, ep := range p.order {
			for _, s := range p.segs[ep] {
				p.cursor = max(p.cursor, s.start+s.dur)
			}
		}
	}
	return cut
}

// heard is the words of epoch whose audio started playing by now.
func (p *player) heard(now time.Duration, epoch uint64) string {
	now = p.at(now)
	var words []string
	for _, s := range p.segs[epoch] {
		playedHere := min(max(now-s.start, 0), s.dur)
		for _, w := range s.words {
			if w.Start-s.offset < playedHere {
				words = append(words, w.Word)
			}
		}
	}
	return strings.Join(words, " ")
}

// playingAfter reports whether audio of epoch is still due to play after
// now.
func (p *player) playingAfter(now time.Duration, epoch uint64) bool {
	now = p.at(now)
	for _, s := range p.segs[epoch] {
		if s.dur > 0 && s.start+s.dur > now {
			return true
		}
	}
	return false
}

// landed reports a Go body's return. A body ended by its deadline after
// the deadline was reported says nothing new.
func (e *edges) landed(tr *toolRun, o engine.ToolOutcome) {
	if tr.finished && tr.state == tools.StateTimedOut && o.State == tools.StateTimedOut {
		return
	}
	e.finishTool(tr, o)
}
