package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

// edges is what the conductor commands. Every method returns at once: the
// work it starts reports back through the mailbox.
type edges interface {
	startGeneration(epoch uint64, req llm.Request, turn *Turn)
	cancelGeneration(epoch uint64)
	// flushOutput drops all queued audio of epochs <= epoch.
	flushOutput(epoch uint64)
	// played is the playout clock: how much of epoch's audio has played.
	played(epoch uint64) time.Duration
	runTool(r toolRun)
}

type toolRun struct {
	callID string
	tool   *tools.Tool
	args   json.RawMessage
	epoch  uint64
	turn   *Turn
}

// conductor owns all session state. Only its goroutine touches it, and
// nothing it does waits: edges are told what to do and answer later.
type conductor struct {
	id       string
	agent    *Agent
	toolset  *tools.Set
	textOnly bool
	clock    Clock
	start    time.Time
	edges    edges
	publish  func(events.Event)
	post     func(Input)
	log      *slog.Logger
	cfg      config

	seq   uint64
	chat  []*entry
	epoch uint64
	turns []*turnState // not yet settled, in epoch order
	calls map[string]*callState
	ncall int

	userSpeaking  bool
	userFinals    []string
	endpointTimer Timer
	timerID       uint64
	endpointID    uint64
	// transcriptID is the pending wait for a final transcript after the
	// caller's silence already ended the turn.
	transcriptID uint64

	// pendingInference is set when a tool result was committed that no model
	// request has seen yet and no follow-up is coming for it.
	pendingInference bool
	idle             bool
}

type entry struct {
	item llm.Item
	// turn is set on an assistant message whose audio may still be
	// playing: requests show its planned text until playout settles it.
	turn *turnState
	call *callState // tool_call entries
	drop bool
}

type turnState struct {
	handle  *Turn
	epoch   uint64
	planned strings.Builder
	words   []tts.WordTiming

	modelDone   bool
	playoutDone bool
	interrupted bool
	// superseded: newer user input came after this turn began, so its tool
	// results must not trigger a follow-up of their own.
	superseded bool
	followUp   bool
	settled    bool

	assistant *entry
	calls     []*callState
}

// holdsFloor reports whether the turn's model stream or audio is still going.
func (t *turnState) holdsFloor() bool {
	return !t.interrupted && (!t.modelDone || !t.playoutDone)
}

type callState struct {
	id        string
	name      string
	args      json.RawMessage
	turn      *turnState
	state     tools.State
	output    string
	isError   bool
	committed bool
	// moot: the call ended only because the user interrupted its turn; the
	// newer input is being answered, so its result needs no answer of its
	// own (it still reaches the context, and the next request sees it).
	moot bool
}

func (c *conductor) now() time.Duration { return c.clock.Now().Sub(c.start) }

func (c *conductor) emit(e events.Event) {
	c.seq++
	e.Seq = c.seq
	e.Session = c.id
	e.Time = c.clock.Now()
	e.At = e.Time.Sub(c.start)
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		c.log.Debug("event", "kind", e.Kind, "epoch", e.Epoch, "text", e.Text, "tool", e.Tool, "state", e.State, "reason", e.Reason)
	}
	c.publish(e)
}

func (c *conductor) handle(in Input) {
	switch in := in.(type) {
	case UserText:
		c.onUserText(in.Text)
	case ReplyRequest:
		c.idle = false
		c.startTurn(in.Instructions)
	case UserSpeechStarted:
		c.onSpeechStarted()
	case UserSpeechStopped:
		c.onSpeechStopped()
	case UserTranscript:
		c.onTranscript(in)
	case timerFired:
		c.onTimer(in.id)
	case ModelText:
		if t := c.liveTurn(in.Epoch); t != nil {
			t.planned.WriteString(in.Text)
		}
	case ModelDone:
		c.onModelDone(in)
	case SpeechWords:
		if t := c.liveTurn(in.Epoch); t != nil {
			t.words = append(t.words, in.Words...)
		}
	case SpeechDone:
		if in.Err != nil && c.liveTurn(in.Epoch) != nil {
			c.emit(events.Event{Kind: events.ProviderError, Epoch: in.Epoch, Provider: "tts", Error: in.Err.Error()})
		}
	case PlayoutFinished:
		c.onPlayoutFinished(in.Epoch)
	case ToolOutcome:
		c.onToolOutcome(in)
	case providerFailure:
		c.emit(events.Event{Kind: events.ProviderError, Provider: in.provider, Error: in.err.Error()})
	case query:
		in.fn(c)
	}
	c.checkFloor()
}

// liveTurn returns the unsettled, uninterrupted turn of epoch; anything an
// interrupted or finished epoch still produces is stale and dropped.
func (c *conductor) liveTurn(epoch uint64) *turnState {
	for _, t := range c.turns {
		if t.epoch == epoch && !t.interrupted {
			return t
		}
	}
	return nil
}

func (c *conductor) onUserText(text string) {
	c.idle = false
	c.emit(events.Event{Kind: events.UserTurn, Text: text, Reason: "injected"})
	c.preempt("user_input")
	c.appendUser(text)
	c.startTurn("")
}

func (c *conductor) onSpeechStarted() {
	c.idle = false
	c.userSpeaking = true
	c.stopEndpoint()
	c.emit(events.Event{Kind: events.SpeechStarted, Epoch: c.epoch})
	if c.speaking() {
		c.emit(events.Event{Kind: events.BargeInConfirmed, Epoch: c.epoch, Reason: "speech"})
		c.preempt("barge_in")
	}
}

func (c *conductor) onSpeechStopped() {
	c.userSpeaking = false
	c.emit(events.Event{Kind: events.SpeechStopped, Epoch: c.epoch})
	c.startEndpoint()
}

// startEndpoint starts the silence that ends the caller's turn.
func (c *conductor) startEndpoint() {
	c.stopEndpoint()
	c.timerID++
	id := c.timerID
	c.endpointID = id
	c.endpointTimer = c.clock.AfterFunc(c.cfg.endpointing, func() { c.post(timerFired{id: id}) })
}

func (c *conductor) stopEndpoint() {
	if c.endpointTimer != nil {
		c.endpointTimer.Stop()
		c.endpointTimer = nil
	}
	c.endpointID = 0
	c.transcriptID = 0
}

func (c *conductor) onTranscript(tr UserTranscript) {
	c.emit(events.Event{Kind: events.Transcript, Text: tr.Text, Final: tr.Final})
	if !tr.Final || strings.TrimSpace(tr.Text) == "" {
		return
	}
	c.userFinals = append(c.userFinals, strings.TrimSpace(tr.Text))
	switch {
	case c.userSpeaking:
	case c.transcriptID != 0:
		c.finishUserTurn()
	case c.endpointID == 0:
		// Words the VAD did not catch as speech: they still make a turn,
		// once the usual silence has passed.
		c.startEndpoint()
	}
}

func (c *conductor) onTimer(id uint64) {
	switch id {
	case 0:
		return
	case c.endpointID:
		c.endpointTimer = nil
		c.endpointID = 0
		if len(c.userFinals) > 0 {
			c.finishUserTurn()
			return
		}
		// Silence says the turn is over but the recogniser has not
		// answered yet: wait for it, but not forever.
		c.timerID++
		tid := c.timerID
		c.transcriptID = tid
		c.endpointTimer = c.clock.AfterFunc(c.cfg.transcriptTimeout, func() { c.post(timerFired{id: tid}) })
	case c.transcriptID:
		c.endpointTimer = nil
		c.stopEndpoint()
		c.emit(events.Event{Kind: events.ProviderError, Provider: "stt", Error: "no final transcript before the deadline; user turn dropped"})
	}
}

func (c *conductor) finishUserTurn() {
	text := strings.Join(c.userFinals, " ")
	c.userFinals = nil
	c.stopEndpoint()
	c.emit(events.Event{Kind: events.UserTurn, Text: text, Reason: "speech"})
	c.preempt("user_turn")
	c.appendUser(text)
	c.startTurn("")
}

// speaking reports whether some turn still holds the floor: its model
// stream or its audio is still going.
func (c *conductor) speaking() bool {
	for _, t := range c.turns {
		if t.holdsFloor() {
			return true
		}
	}
	return false
}

// preempt hands the floor to new user input at once: turns still speaking
// are interrupted, and no earlier turn may start a follow-up of its own.
// Nothing here waits for anything to settle.
func (c *conductor) preempt(reason string) {
	cut := false
	for _, t := range c.turns {
		t.superseded = true
		if t.holdsFloor() {
			c.interrupt(t, reason)
			cut = true
		}
	}
	if cut {
		c.edges.flushOutput(c.epoch)
	}
}

func (c *conductor) interrupt(t *turnState, reason string) {
	t.interrupted = true
	close(t.handle.interrupted)
	c.edges.cancelGeneration(t.epoch)
	c.emit(events.Event{Kind: events.TurnInterrupted, Epoch: t.epoch, Reason: reason})

	played := c.edges.played(t.epoch)
	text := c.playedText(t, played)
	if !t.playoutDone {
		c.settleAssistant(t, text, true)
		c.emit(events.Event{Kind: events.PlayoutTruncate, Epoch: t.epoch, Text: text, Played: played})
		c.stopPlayout(t, text)
	}
	t.modelDone = true
	c.maybeSettle(t)
}

// playedText is the words of t whose audio had started by played.
func (c *conductor) playedText(t *turnState, played time.Duration) string {
	if c.textOnly {
		return strings.TrimSpace(t.planned.String())
	}
	var b strings.Builder
	for _, w := range t.words {
		if w.Start >= played {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.Word)
	}
	return b.String()
}

func (c *conductor) allWords(t *turnState) string {
	if c.textOnly {
		return strings.TrimSpace(t.planned.String())
	}
	words := make([]string, len(t.words))
	for i, w := range t.words {
		words[i] = w.Word
	}
	return strings.Join(words, " ")
}

// settleAssistant records what the user actually heard of t in the chat
// context. An entry is created if the turn had none yet; an empty one with
// no tool calls is dropped rather than kept as noise.
func (c *conductor) settleAssistant(t *turnState, text string, interrupted bool) {
	e := t.assistant
	if e == nil {
		if text == "" {
			return
		}
		e = &entry{item: llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant}}
		c.chat = append(c.chat, e)
		t.assistant = e
	}
	e.turn = nil
	e.item.Text = text
	e.item.Interrupted = interrupted
	if text == "" && len(t.calls) == 0 {
		e.drop = true
	}
}

func (c *conductor) stopPlayout(t *turnState, text string) {
	t.playoutDone = true
	t.handle.mu.Lock()
	t.handle.played = text
	t.handle.mu.Unlock()
	close(t.handle.playoutStopped)
}

func (c *conductor) onModelDone(d ModelDone) {
	t := c.liveTurn(d.Epoch)
	if t == nil {
		// A call from an interrupted generation never runs.
		return
	}
	t.modelDone = true
	if d.Err != nil {
		c.emit(events.Event{Kind: events.ProviderError, Epoch: t.epoch, Provider: "llm", Error: d.Err.Error()})
	}
	if t.planned.Len() > 0 || len(d.Calls) > 0 {
		e := &entry{item: llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant}, turn: t}
		c.chat = append(c.chat, e)
		t.assistant = e
	}
	for _, call := range d.Calls {
		c.requestCall(t, call)
	}
	if t.playoutDone {
		c.settleAssistant(t, c.allWords(t), false)
	}
	c.commitReady(t)
	c.maybeSettle(t)
}

func (c *conductor) requestCall(t *turnState, call llm.ToolCall) {
	c.ncall++
	if call.ID == "" {
		call.ID = fmt.Sprintf("call_%s_%d", c.id, c.ncall)
	}
	if _, dup := c.calls[call.ID]; dup {
		call.ID = fmt.Sprintf("%s_%d", call.ID, c.ncall)
	}
	cs := &callState{id: call.ID, name: call.Name, args: call.Arguments, turn: t, state: tools.StateRequested}
	c.calls[cs.id] = cs
	t.calls = append(t.calls, cs)
	c.chat = append(c.chat, &entry{
		item: llm.Item{Kind: llm.KindToolCall, CallID: cs.id, Name: cs.name, Arguments: cs.args},
		call: cs,
	})
	c.emit(events.Event{Kind: events.ToolRequested, Epoch: t.epoch, CallID: cs.id, Tool: cs.name, Text: string(cs.args)})

	tool, ok := c.toolset.Lookup(cs.name)
	if !ok {
		c.finishCall(cs, tools.StateFailed, fmt.Sprintf("error: no tool named %q; available tools: %s", cs.name, c.toolNames()), true)
		return
	}
	if err := tool.Validate(cs.args); err != nil {
		c.finishCall(cs, tools.StateFailed, "error: "+err.Error(), true)
		return
	}
	cs.state = tools.StateRunning
	c.emit(events.Event{Kind: events.ToolStarted, Epoch: t.epoch, CallID: cs.id, Tool: cs.name})
	c.edges.runTool(toolRun{callID: cs.id, tool: tool, args: cs.args, epoch: t.epoch, turn: t.handle})
}

func (c *conductor) toolNames() string {
	names := make([]string, 0, c.toolset.Len())
	for _, t := range c.toolset.All() {
		names = append(names, t.Name())
	}
	return strings.Join(names, ", ")
}

func (c *conductor) onToolOutcome(o ToolOutcome) {
	cs := c.calls[o.CallID]
	if cs == nil || cs.state.Terminal() {
		return // a late or repeated outcome: the first one stands
	}
	out, isErr := o.Output, false
	if o.Err != nil {
		isErr = true
		out = "error: " + o.Err.Error()
		if errors.Is(o.Err, ErrInterrupted) {
			out = "error: the user interrupted before this call could finish; it did not complete"
			cs.moot = true
		}
	}
	c.finishCall(cs, o.State, out, isErr)
	c.commitReady(cs.turn)
	c.maybeSettle(cs.turn)
}

func (c *conductor) finishCall(cs *callState, st tools.State, out string, isErr bool) {
	cs.state, cs.output, cs.isError = st, out, isErr
	ev := events.Event{Kind: events.ToolTerminal, Epoch: cs.turn.epoch, CallID: cs.id, Tool: cs.name, State: string(st)}
	if isErr {
		ev.Error = out
	}
	c.emit(ev)
}

// commitReady puts finished results into the context in the order the model
// issued the calls. When the last one is in, the turn's follow-up inference
// starts, unless newer input took the floor meanwhile: then the results wait
// for the next inference, and get one of their own if none is coming.
func (c *conductor) commitReady(t *turnState) {
	committed := false
	for _, cs := range t.calls {
		if cs.committed {
			continue
		}
		if !cs.state.Terminal() {
			return
		}
		cs.committed = true
		committed = true
		c.insertAfterCalls(t, &entry{call: cs, item: llm.Item{
			Kind: llm.KindToolResult, CallID: cs.id, Name: cs.name, Output: cs.output, IsError: cs.isError,
		}})
		c.emit(events.Event{Kind: events.ToolCommitted, Epoch: t.epoch, CallID: cs.id, Tool: cs.name, State: string(cs.state)})
	}
	if !committed || !t.modelDone {
		return
	}
	if t.interrupted || t.superseded {
		for _, cs := range t.calls {
			c.pendingInference = c.pendingInference || !cs.moot
		}
		return
	}
	if !t.followUp {
		t.followUp = true
		c.startTurn("")
	}
}

// insertAfterCalls places a result right after the last call or result of
// its turn: providers want every output next to the calls it answers, even
// when newer messages came in while the call ran.
func (c *conductor) insertAfterCalls(t *turnState, e *entry) {
	at := len(c.chat)
	for i := len(c.chat) - 1; i >= 0; i-- {
		if x := c.chat[i]; x.call != nil && x.call.turn == t {
			at = i + 1
			break
		}
	}
	c.chat = append(c.chat, nil)
	copy(c.chat[at+1:], c.chat[at:])
	c.chat[at] = e
}

func (c *conductor) onPlayoutFinished(epoch uint64) {
	t := c.liveTurn(epoch)
	if t == nil || t.playoutDone {
		return
	}
	text := c.allWords(t)
	c.stopPlayout(t, text)
	if t.modelDone {
		c.settleAssistant(t, text, false)
	}
	c.emit(events.Event{Kind: events.PlayoutDone, Epoch: epoch, Text: text, Played: c.edges.played(epoch)})
	c.maybeSettle(t)
}

func (c *conductor) maybeSettle(t *turnState) {
	if t.settled || !t.modelDone || !t.playoutDone {
		return
	}
	for _, cs := range t.calls {
		if !cs.committed {
			return
		}
	}
	t.settled = true
	c.edges.cancelGeneration(t.epoch) // releases the finished generation
	close(t.handle.settled)
	c.emit(events.Event{Kind: events.TurnSettled, Epoch: t.epoch})
	for i, x := range c.turns {
		if x == t {
			c.turns = append(c.turns[:i], c.turns[i+1:]...)
			break
		}
	}
}

// checkFloor runs after every input: a result nobody has answered gets its
// inference as soon as the floor is free, and a session with nothing left to
// do says so once.
func (c *conductor) checkFloor() {
	userBusy := c.userSpeaking || c.endpointID != 0 || c.transcriptID != 0 || len(c.userFinals) > 0
	if userBusy || c.speaking() {
		return
	}
	if c.pendingInference {
		c.startTurn("")
		return
	}
	if len(c.turns) == 0 && !c.idle {
		c.idle = true
		c.emit(events.Event{Kind: events.Idle, Epoch: c.epoch})
	}
}

func (c *conductor) appendUser(text string) {
	c.chat = append(c.chat, &entry{item: llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: text}})
}

func (c *conductor) startTurn(extra string) {
	c.idle = false
	c.epoch++
	t := &turnState{handle: newTurn(c.epoch), epoch: c.epoch}
	c.turns = append(c.turns, t)
	c.emit(events.Event{Kind: events.TurnStarted, Epoch: t.epoch})
	req := c.buildRequest(extra)
	c.pendingInference = false
	c.emit(events.Event{Kind: events.InferenceSent, Epoch: t.epoch, Count: len(req.Context.Items)})
	c.edges.startGeneration(t.epoch, req, t.handle)
}

// buildRequest renders the context for the model. An assistant message
// still playing shows its planned text, and a call still running gets a
// provisional output, because providers reject a call without one.
func (c *conductor) buildRequest(extra string) llm.Request {
	instr := c.agent.Instructions
	if extra != "" {
		instr = strings.TrimSpace(instr + "\n\n" + extra)
	}
	items := make([]llm.Item, 0, len(c.chat)+2)
	var running []*callState
	flushRunning := func() {
		for _, cs := range running {
			items = append(items, llm.Item{Kind: llm.KindToolResult, CallID: cs.id, Name: cs.name,
				Output: `{"status":"still running","note":"the result will follow when it is ready"}`})
		}
		running = running[:0]
	}
	for _, e := range c.chat {
		if e.drop {
			continue
		}
		if e.item.Kind != llm.KindToolCall && e.item.Kind != llm.KindToolResult {
			flushRunning()
		}
		it := e.item
		if e.turn != nil {
			it.Text = strings.TrimSpace(e.turn.planned.String())
		}
		if it.Arguments != nil {
			it.Arguments = append(json.RawMessage(nil), it.Arguments...)
		}
		items = append(items, it)
		if e.item.Kind == llm.KindToolCall && !e.call.committed {
			running = append(running, e.call)
		}
	}
	flushRunning()
	return llm.Request{Instructions: instr, Context: llm.ChatContext{Items: items}, Tools: c.toolset.Specs()}
}

// context renders the chat context as it stands: what was said, what was
// played, and every committed result.
func (c *conductor) context() llm.ChatContext {
	items := make([]llm.Item, 0, len(c.chat))
	for _, e := range c.chat {
		if e.drop {
			continue
		}
		it := e.item
		if e.turn != nil {
			it.Text = strings.TrimSpace(e.turn.planned.String())
		}
		items = append(items, it)
	}
	return llm.ChatContext{Items: items}
}
