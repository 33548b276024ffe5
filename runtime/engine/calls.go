package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
)

// toolCalls is every tool call of the session: the ledger, the core's side
// of each entry, and what the model is still owed.
type toolCalls struct {
	ledger *tools.Ledger
	byID   map[string]*callState
	// n numbers the calls, for the ids of calls the model left unnamed.
	n int
	// inflight counts calls not yet in a terminal state.
	inflight int
	// unseen holds committed results no model request has shown yet.
	unseen []*callState
	// pendingFollowUps holds turns with calls whose follow-up has not gone
	// out; a turn may settle (audio done, calls in) before it does.
	pendingFollowUps []*turnState
}

// callState is the core's side of a ledger entry: where the call sits in
// the conversation and what the model has been shown of it.
type callState struct {
	rec  *tools.Call
	tool *tools.Tool // nil for a tool the agent does not have
	turn *turnState
	// seen: a model request has shown the real result.
	seen bool
	// shownRunning: a model request showed the call as still running, so
	// the model is owed its real result, however it ends.
	shownRunning bool
	// moot: the call ended only because the user cut in (never started,
	// or cancelled); the newer input is being answered and the result
	// rides along with it rather than getting an answer of its own.
	moot bool
	// joiners are calls with the same idempotency key waiting for this
	// running call's outcome.
	joiners []*callState
	// reconciling: the Reconciler is finding out what an earlier call with
	// this key did.
	reconciling bool
}

func (cs *callState) id() string { return cs.rec.ID }

func (cs *callState) detached() bool { return cs.rec.Policy == tools.Detach }

// answered reports whether the call is done with: its result is in the
// context.
func (cs *callState) answered() bool { return cs.rec.Committed }

// owed reports whether the model must be given this result in a request of
// its own.
func (cs *callState) owed() bool { return !cs.moot }

// applyPolicies treats the calls of a turn the user cut into: a deferred
// mutation never runs, a cancel tool is cancelled, the rest go on.
func (c *conductor) applyPolicies(t *turnState) {
	for _, cs := range t.calls {
		switch {
		case cs.rec.State.Terminal():
		case cs.rec.State == tools.StateDeferred:
			cs.moot = true
			c.finishCall(cs, tools.Outcome{State: tools.StateCancelled, IsError: true,
				Output: "not executed: the user interrupted before this call started, so nothing was done"}, "not_executed")
		case cs.rec.State == tools.StateRunning && cs.rec.Policy == tools.Cancel:
			if c.calls.ledger.RequestCancel(cs.id()) {
				c.emit(events.Event{Kind: events.ToolCancelRequested, Epoch: t.epoch, CallID: cs.id(), Tool: cs.rec.Tool})
				c.edges.CancelTool(cs.id())
			}
		}
	}
}

func (c *conductor) requestCall(t *turnState, call llm.ToolCall) {
	c.calls.n++
	if call.ID == "" {
		call.ID = fmt.Sprintf("call_%s_%d", c.cfg.ID, c.calls.n)
	}
	if _, dup := c.calls.ledger.Get(call.ID); dup {
		call.ID = fmt.Sprintf("%s_%d", call.ID, c.calls.n)
	}
	tool, known := c.agent.tools.Lookup(call.Name)
	effect, policy := tools.Read, tools.Complete
	if known {
		effect, policy = tool.Effect(), tool.Policy()
	}
	rec, err := c.calls.ledger.Request(call.ID, call.Name, call.Arguments, effect, policy, t.epoch)
	if err != nil { // ids are made unique above; this is a bug, not input
		c.log.Error("tool ledger", "err", err)
		return
	}
	cs := &callState{rec: rec, turn: t}
	if known {
		cs.tool = tool
	}
	c.calls.byID[rec.ID] = cs
	c.calls.inflight++
	t.calls = append(t.calls, cs)
	c.chat.entries = append(c.chat.entries, &entry{
		item: llm.Item{Kind: llm.KindToolCall, CallID: rec.ID, Name: rec.Tool, Arguments: rec.Args},
		call: cs,
	})
	c.emit(events.Event{Kind: events.ToolRequested, Epoch: t.epoch, CallID: rec.ID, Tool: rec.Tool, Text: string(rec.Args),
		Policy: string(rec.Policy), Key: rec.Key})

	if !known {
		c.finishCall(cs, tools.Outcome{State: tools.StateFailed, IsError: true,
			Output: fmt.Sprintf("error: no tool named %q; available tools: %s", rec.Tool, c.toolNames())}, "unknown_tool")
		return
	}
	if err := tool.Validate(rec.Args); err != nil {
		c.finishCall(cs, tools.Outcome{State: tools.StateFailed, IsError: true, Output: "error: " + err.Error()}, "invalid_arguments")
		return
	}
	if policy == tools.Defer {
		c.calls.ledger.Defer(rec.ID)
		c.emit(events.Event{Kind: events.ToolDeferred, Epoch: t.epoch, CallID: rec.ID, Tool: rec.Tool})
		return
	}
	c.dispatch(cs)
}

// startDeferred runs the turn's deferred calls: its response is complete
// and its preamble has played out, both without interruption.
func (c *conductor) startDeferred(t *turnState) {
	if t.overtaken() || t.phase != answered {
		return
	}
	for _, cs := range t.calls {
		if cs.rec.State == tools.StateDeferred {
			c.dispatch(cs)
		}
	}
}

// dispatch runs a call, unless at-most-once says its key was already seen
// to: then the call gets the earlier outcome, waits for the earlier run, or
// has the outcome reconciled first.
func (c *conductor) dispatch(cs *callState) {
	if cs.tool.Dedupe() {
		switch d, prior := c.calls.ledger.Decide(cs.id()); d {
		case tools.Reuse:
			c.emit(events.Event{Kind: events.ToolDeduped, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Reason: "reuse", Text: prior.ID})
			c.calls.ledger.Reuse(cs.id(), prior)
			c.ended(cs, "deduped")
			return
		case tools.Join:
			p := c.calls.byID[prior.ID]
			c.emit(events.Event{Kind: events.ToolDeduped, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Reason: "join", Text: prior.ID})
			p.joiners = append(p.joiners, cs)
			return
		case tools.Reconcile:
			if r := cs.tool.Reconciler(); r != nil {
				cs.reconciling = true
				c.emit(events.Event{Kind: events.ToolReconcile, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Reason: "started", Text: prior.ID})
				c.edges.Reconcile(c.toolRun(cs, prior.ID))
				return
			}
			c.finishCall(cs, tools.Outcome{State: tools.StateFailed, IsError: true, Output: fmt.Sprintf(
				"error: not run: an identical earlier call (%s) may have taken effect but its outcome is unknown; "+
					"check with the user before trying again", prior.ID)}, "outcome_unknown")
			return
		}
	}
	if c.adopted(cs) {
		return
	}
	c.calls.ledger.Start(cs.id())
	c.emit(events.Event{Kind: events.ToolStarted, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool})
	c.edges.RunTool(c.toolRun(cs, ""))
}

func (c *conductor) toolRun(cs *callState, of string) ToolRun {
	return ToolRun{CallID: cs.id(), Key: cs.rec.Key, Tool: cs.tool, Args: cs.rec.Args, Epoch: cs.turn.epoch, Turn: cs.turn.handle, Of: of}
}

func (c *conductor) toolNames() string {
	names := make([]string, 0, c.agent.tools.Len())
	for _, t := range c.agent.tools.All() {
		names = append(names, t.Name())
	}
	return strings.Join(names, ", ")
}

func (c *conductor) onToolOutcome(o ToolOutcome) {
	cs := c.calls.byID[o.CallID]
	if cs == nil || !o.State.Terminal() {
		return
	}
	out := tools.Outcome{State: o.State, Output: o.Output}
	reason := ""
	if o.Err != nil {
		out.IsError = true
		out.Output = "error: " + o.Err.Error()
		switch {
		case errors.Is(o.Err, ErrInterrupted):
			out.State = tools.StateCancelled
			out.Output = "error: the user interrupted before this call could finish; it did not complete"
			cs.moot = true
			reason = "interrupted"
		case o.State == tools.StateCancelled:
			out.Output = "cancelled: the user interrupted and the call stopped before it completed"
			cs.moot = true
			reason = "cancelled"
		}
	} else if cs.rec.CancelRequested {
		// The body ignored the cancel and finished: that is what happened,
		// and what the model must hear.
		reason = "completed_despite_cancel"
	}
	if cs.rec.State.Terminal() {
		before := cs.rec.Late
		if c.calls.ledger.Finish(cs.id(), out); cs.rec.Late != before {
			c.emit(events.Event{Kind: events.ToolLateOutcome, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool,
				State: string(out.State), Text: out.Output})
			c.amend(cs, out)
		}
		return
	}
	c.finishCall(cs, out, reason)
}

// amend tells the model what a call abandoned at its deadline really did:
// its one result is updated in place and is owed an answer again, because
// a caller told "it timed out" while their card was charged has been told
// something false.
func (c *conductor) amend(cs *callState, late tools.Outcome) {
	if !cs.answered() {
		return
	}
	note := fmt.Sprintf("%s\nupdate: the call finished after its deadline after all: %s: %s", cs.rec.Output, late.State, late.Output)
	c.calls.ledger.Amend(cs.id(), note)
	cs.seen, cs.moot = false, false
	c.calls.unseen = append(c.calls.unseen, cs)
	c.emit(events.Event{Kind: events.ToolCommitted, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool,
		State: string(cs.rec.State), Reason: "late_outcome"})
}

func (c *conductor) onReconciled(r ReconcileOutcome) {
	cs := c.calls.byID[r.CallID]
	if cs == nil || !cs.reconciling || cs.rec.State.Terminal() {
		return
	}
	cs.reconciling = false
	prior, _ := c.calls.ledger.Get(r.Of)
	ev := events.Event{Kind: events.ToolReconcile, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, Text: r.Of}
	switch {
	case r.Err != nil || prior == nil:
		ev.Reason, ev.Error = "failed", fmt.Sprint(r.Err)
		c.emit(ev)
		c.finishCall(cs, tools.Outcome{State: tools.StateFailed, IsError: true, Output: fmt.Sprintf(
			"error: not run: an identical earlier call (%s) may have taken effect, and checking failed (%v); "+
				"check with the user before trying again", r.Of, r.Err)}, "outcome_unknown")
	case r.Done:
		ev.Reason = "done"
		c.emit(ev)
		c.calls.ledger.Resolve(prior.ID, tools.Outcome{State: tools.StateSucceeded, Output: r.Output})
		c.calls.ledger.Reuse(cs.id(), prior)
		c.ended(cs, "reconciled")
	default:
		ev.Reason = "not_done"
		c.emit(ev)
		c.calls.ledger.Resolve(prior.ID, tools.Outcome{State: tools.StateFailed, IsError: true, Output: "error: it did not take effect"})
		c.dispatch(cs)
	}
}

// finishCall records a call's end in the ledger and moves on from it.
func (c *conductor) finishCall(cs *callState, o tools.Outcome, reason string) {
	if !c.calls.ledger.Finish(cs.id(), o) {
		return
	}
	c.ended(cs, reason)
}

// ended follows a call that just reached its terminal state: the event, the
// calls that waited on it, the commit, and what the turn does next.
func (c *conductor) ended(cs *callState, reason string) {
	c.calls.inflight--
	ev := events.Event{Kind: events.ToolTerminal, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool,
		State: string(cs.rec.State), Reason: reason}
	if cs.rec.IsError {
		ev.Error = cs.rec.Output
	}
	c.emit(ev)
	c.commit(cs)
	c.releaseJoiners(cs)
	c.maybeSettle(cs.turn)
}

// releaseJoiners gives the calls that waited on cs its outcome, when it did
// the thing; otherwise each decides afresh (and usually runs).
func (c *conductor) releaseJoiners(cs *callState) {
	joiners := cs.joiners
	cs.joiners = nil
	for _, j := range joiners {
		if j.rec.State.Terminal() {
			continue
		}
		if cs.rec.Outcome().State == tools.StateSucceeded {
			c.calls.ledger.Reuse(j.id(), cs.rec)
			c.ended(j, "deduped")
			continue
		}
		c.dispatch(j)
	}
}

// commit puts a finished result into the context. Results are rendered in
// call order next to their calls (see render), so a result is never held
// back behind a slower sibling.
func (c *conductor) commit(cs *callState) {
	c.calls.ledger.Commit(cs.id())
	c.calls.unseen = append(c.calls.unseen, cs)
	c.emit(events.Event{Kind: events.ToolCommitted, Epoch: cs.turn.epoch, CallID: cs.id(), Tool: cs.rec.Tool, State: string(cs.rec.State)})
}

// readyForFollowUp reports whether t's results are all in (detached calls
// aside), at least one is news to the model, and t may now ask about them.
func (c *conductor) readyForFollowUp(t *turnState) bool {
	if !t.awaitsFollowUp() || !t.modelDone() || !(t.synthDone || t.playoutDone()) || len(t.calls) == 0 {
		return false
	}
	news := false
	for _, cs := range t.calls {
		if !cs.answered() && !cs.detached() {
			return false
		}
		news = news || cs.answered() && !cs.seen
	}
	// A turn whose calls are all detached has nothing to tell the model
	// until one of them lands.
	return news
}

// owedResult reports whether a committed result still needs a request of
// its own: no request has shown it, none is coming for it (its turn was cut
// into or has had its follow-up), and it is not moot.
func (c *conductor) owedResult() bool {
	keep := c.calls.unseen[:0]
	owed := false
	for _, cs := range c.calls.unseen {
		if cs.seen {
			continue
		}
		keep = append(keep, cs)
		if cs.owed() && !cs.turn.awaitsFollowUp() {
			owed = true
		}
	}
	clear(c.calls.unseen[len(keep):])
	c.calls.unseen = keep
	return owed
}
