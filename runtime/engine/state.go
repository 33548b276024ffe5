package engine

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
)

// State is what a session carries to another agent, another process or a
// worker that takes over after a crash: who it talks as, what was said and
// played, and every tool call with its outcome. Package handoff wraps it
// in a versioned, signed snapshot; its JSON form is part of that format.
type State struct {
	// SessionID is kept across a resume: idempotency keys include it, so
	// a mutation repeated after the move is still recognised as a repeat.
	SessionID string `json:"session_id"`
	// Agent is the name of the agent the session talks as.
	Agent string `json:"agent"`
	// Epoch is the latest agent turn; NextCall numbers the next tool call.
	Epoch    uint64 `json:"epoch"`
	NextCall int    `json:"next_call"`
	// Chat is the context as the caller experienced it: an answer cut
	// short, or still playing when the state was taken, holds the words
	// played by then and is marked interrupted. Tool results are not in
	// it: they come from Calls.
	Chat []llm.Item `json:"chat"`
	// Calls is the ledger: every call, terminal or not, in request order.
	Calls []tools.Call `json:"calls"`
	// UserData is what the application stored with runtime.Session.SetUserData.
	UserData map[string]json.RawMessage `json:"user_data,omitempty"`
	// Seq is the sequence number of the last event the session had
	// emitted when the state was taken: what the state covers. A session
	// restored from the state numbers its events on from there.
	Seq uint64 `json:"seq"`
}

// ErrStateMismatch is returned by runtime.New when a restored state does
// not fit the session: another session id, or another agent's state
// without a handoff.
var ErrStateMismatch = errors.New("runtime: state does not fit the session")

// checkpointKinds are the events after which the state is checkpointed.
var checkpointKinds = map[events.Kind]bool{
	events.SessionStarted: true, events.TurnSettled: true,
	events.ToolStarted: true, events.ToolDeferred: true, events.ToolTerminal: true, events.ToolCommitted: true,
	events.Handoff:         true,
	events.TransferStarted: true, events.TransferBriefing: true, events.TransferConnected: true, events.TransferFailed: true,
}

func (c *conductor) onCheckpointDone(r CheckpointDone) {
	switch {
	case r.Err != nil && !c.link.checkpointFailing:
		c.link.checkpointFailing = true
		c.emit(events.Event{Kind: events.CheckpointFailed, Epoch: c.turns.epoch, Error: r.Err.Error()})
	case r.Err == nil:
		reason := ""
		if c.link.checkpointFailing {
			c.link.checkpointFailing, reason = false, "recovered"
		}
		c.emit(events.Event{Kind: events.CheckpointSaved, Epoch: c.turns.epoch, Reason: reason, Count: int(r.Seq)})
	}
}

// state captures the conductor's state. Only its goroutine calls it.
func (c *conductor) state() State {
	st := State{
		SessionID: c.cfg.ID, Agent: c.agent.Name, Epoch: c.turns.epoch, NextCall: c.calls.n,
		Calls: c.calls.ledger.Calls(), UserData: maps.Clone(c.chat.userData), Seq: c.seq,
	}
	for _, e := range c.chat.entries {
		if e.drop {
			continue
		}
		it := e.item
		if t := e.turn; t != nil {
			// Still playing: what the caller has heard so far.
			played := c.edges.Played(t.epoch)
			it.Text = c.playedText(t, played)
			if !t.playoutDone() || t.wasCut() {
				it.Interrupted, it.Played = true, played
			}
			if it.Text == "" {
				continue
			}
		}
		it.Arguments = slices.Clone(it.Arguments)
		st.Chat = append(st.Chat, it)
	}
	return st
}

// restoreState rebuilds the conductor from st, settling unfinished calls
// by the journal's records. Only called before the conductor starts.
func (c *conductor) restoreState(st State, journal []tools.Record) {
	// The session's events go on numbering from where they were: one
	// stream across workers, as its clients see it.
	c.turns.epoch, c.calls.n, c.seq = st.Epoch, st.NextCall, st.Seq
	c.chat.userData = maps.Clone(st.UserData)
	settled := make([]tools.Call, len(st.Calls))
	for i, call := range st.Calls {
		settled[i] = tools.Settle(call, journal)
	}
	c.calls.ledger.Load(settled)
	for _, it := range st.Chat {
		switch it.Kind {
		case llm.KindToolResult:
			continue // results come from the ledger
		case llm.KindToolCall:
			rec, ok := c.calls.ledger.Get(it.CallID)
			if !ok {
				continue // a call the ledger never had: not shown
			}
			tool, _ := c.agent.tools.Lookup(rec.Tool)
			cs := &callState{rec: rec, tool: tool}
			// Settled here if it was not: the result enters the context
			// now and the model sees it with its next request, which the
			// application asks for (it owes no inference of its own).
			c.calls.ledger.Commit(rec.ID)
			c.calls.byID[rec.ID] = cs
			c.chat.entries = append(c.chat.entries, &entry{item: it, call: cs})
		default:
			c.chat.entries = append(c.chat.entries, &entry{item: it})
		}
	}
}
