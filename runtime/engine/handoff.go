package engine

import (
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
)

// onHandoff changes agents. Only the conductor's goroutine calls it.
func (c *conductor) onHandoff(h Handoff) {
	if h.Done != nil {
		defer close(h.Done)
	}
	set, err := tools.NewSet(h.To.Tools...)
	if err != nil {
		c.log.Error("handoff refused: the next agent's tools", "to", h.To.Name, "err", err)
		return
	}
	c.discardSpeculation("handoff")
	from := c.agent.Name
	switch {
	case h.Reset:
		c.keepTurns(0)
	case h.KeepTurns > 0:
		c.keepTurns(h.KeepTurns)
	}
	if h.Summary != "" {
		c.chat.entries = append([]*entry{{item: llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant,
			Text: "(Summary of the conversation so far, by " + from + ") " + h.Summary}}}, c.chat.entries...)
	}
	c.agent = agentOn{h.To, set}
	// The agent taking over has been shown nothing: its first request has
	// New 0, and a reply it is asked for before any turn is its greeting.
	c.chat.sent, c.turns.agentEpoch = nil, c.turns.epoch
	reason := h.Strategy
	if reason == "" {
		reason = "full"
	}
	kept := 0
	for _, e := range c.chat.entries {
		if !e.drop {
			kept++
		}
	}
	c.emit(events.Event{Kind: events.Handoff, Epoch: c.turns.epoch, Text: from + " -> " + h.To.Name, Reason: reason, Count: kept})
	if h.Greet && !c.speaking() && len(c.calls.pendingFollowUps) == 0 {
		c.startTurn("handoff", llm.ReasonHandoff, "")
	}
}

// keepTurns drops the messages before the caller's n-th latest turn (all
// of them for n = 0); tool calls stay, with their results.
func (c *conductor) keepTurns(n int) {
	cut := len(c.chat.entries)
	if n > 0 {
		seen := 0
		for i := len(c.chat.entries) - 1; i >= 0; i-- {
			it := c.chat.entries[i].item
			if it.Kind == llm.KindMessage && it.Role == llm.RoleUser && !c.chat.entries[i].drop {
				if seen++; seen == n {
					cut = i
					break
				}
			}
		}
		if seen < n {
			return
		}
	}
	for _, e := range c.chat.entries[:cut] {
		if e.call == nil && e.turn == nil {
			e.drop = true
		}
	}
}
