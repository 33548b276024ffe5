package engine

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/tools"
)

// chat is the conversation: the context as the caller experienced it,
// what the model was last shown of it, the caller's words of the turn
// being heard, and the application's data carried with the state.
type chat struct {
	entries []*entry
	// sent is the context of the previous model request, for the next
	// one's New; nil when the agent has been shown nothing (a new session,
	// a restored one, a handoff).
	sent  []llm.Item
	heard heard
	// userData is the application's, carried with the state.
	userData map[string]json.RawMessage
}

// heard is the caller's turn as it is being heard.
type heard struct {
	// stages are the caller's side of the breakdown of the turn that will
	// answer them: their speech's end, the last final, the endpoint.
	stages events.Turn
	finals []string
	// wordsSinceSpeech: a final with words came since the caller last
	// started speaking, so finals may hold their latest words.
	wordsSinceSpeech bool
	// confidence is the least recogniser confidence of finals that has
	// one; 0: none has.
	confidence float64
}

// add takes a final transcript with words.
func (h *heard) add(tr UserTranscript) {
	h.finals = append(h.finals, strings.TrimSpace(tr.Text))
	h.wordsSinceSpeech = true
	if tr.Confidence > 0 && (h.confidence == 0 || tr.Confidence < h.confidence) {
		h.confidence = tr.Confidence
	}
}

// words is what the caller has said of the turn so far.
func (h *heard) words() string { return strings.Join(h.finals, " ") }

// take ends the caller's turn: their words, and the recogniser's least
// confidence in them.
func (h *heard) take() (text string, confidence float64) {
	text, confidence = h.words(), h.confidence
	h.finals, h.confidence, h.wordsSinceSpeech = nil, 0, false
	return text, confidence
}

// entry is one item of the chat context, with what the core needs to
// render it.
type entry struct {
	item llm.Item
	// turn is set on an assistant message whose audio may still be
	// playing: requests show its planned text until playout settles it.
	turn *turnState
	call *callState // tool_call entries
	drop bool
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
		c.chat.entries = append(c.chat.entries, e)
		t.assistant = e
	}
	e.turn = nil
	e.item.Text = text
	e.item.Interrupted = interrupted
	if text == "" && len(t.calls) == 0 {
		e.drop = true
	}
}

func (c *conductor) appendUser(text string) {
	c.chat.entries = append(c.chat.entries, &entry{item: c.userItem(text, 0)})
}

// userItem is the caller's message, with the recogniser's confidence in it
// (0: none given).
func (c *conductor) userItem(text string, confidence float64) llm.Item {
	return llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: text, Confidence: confidence}
}

// buildRequest renders the context for the model and records what the
// model has now been shown.
func (c *conductor) buildRequest(reason llm.Reason, extra string) llm.Request {
	instr := c.agent.Instructions
	if extra != "" {
		instr = strings.TrimSpace(instr + "\n\n" + extra)
	}
	items := c.render(true, true)
	req := llm.Request{Instructions: instr, Context: llm.ChatContext{Items: items}, Tools: c.agent.tools.Specs(),
		Reason: reason, New: unchangedPrefix(c.chat.sent, items)}
	// A copy: the model may hold on to the request, and must not be able
	// to change what the next request is compared with.
	c.chat.sent = slices.Clone(items)
	return req
}

// unchangedPrefix is how many items b begins with that a began with, item
// for item.
func unchangedPrefix(a, b []llm.Item) int {
	n := 0
	for n < len(a) && n < len(b) && sameItem(a[n], b[n]) {
		n++
	}
	return n
}

// sameItem reports whether a and b are the same item, field for field.
func sameItem(a, b llm.Item) bool {
	return a.Kind == b.Kind && a.Role == b.Role && a.Text == b.Text &&
		a.Interrupted == b.Interrupted && a.Played == b.Played && a.Confidence == b.Confidence &&
		a.CallID == b.CallID && a.Name == b.Name && bytes.Equal(a.Arguments, b.Arguments) &&
		a.Output == b.Output && a.IsError == b.IsError
}

// context renders the chat context as it stands: what was said, what was
// played, and every committed result.
func (c *conductor) context() llm.ChatContext {
	return llm.ChatContext{Items: c.render(false, false)}
}

// render lists the chat: an assistant message still playing shows its
// planned text, and each run of tool calls is followed by their results in
// call order. For a request (forModel), calls still in flight get a
// provisional output and, if mark, the results shown are marked seen (and
// calls shown running, shownRunning); otherwise they have none yet.
func (c *conductor) render(forModel, mark bool) []llm.Item {
	items := make([]llm.Item, 0, len(c.chat.entries)*2)
	var run []*callState
	flush := func() {
		for _, cs := range run {
			it := llm.Item{Kind: llm.KindToolResult, CallID: cs.id(), Name: cs.rec.Tool}
			switch {
			case cs.answered():
				it.Output, it.IsError = cs.rec.Output, cs.rec.IsError
				if forModel && mark {
					cs.seen = true
				}
			case !forModel:
				continue
			case cs.detached():
				it.Output = llm.ProvisionalDetached
				cs.shownRunning = cs.shownRunning || mark
			case cs.rec.State == tools.StateDeferred:
				it.Output = llm.ProvisionalDeferred
				cs.shownRunning = cs.shownRunning || mark
			default:
				it.Output = llm.ProvisionalRunning
				cs.shownRunning = cs.shownRunning || mark
			}
			items = append(items, it)
		}
		run = run[:0]
	}
	for _, e := range c.chat.entries {
		if e.drop {
			continue
		}
		if e.call == nil {
			flush()
		}
		it := e.item
		if t := e.turn; t != nil {
			if t.unspoken {
				it.Text = c.allWords(t)
			} else {
				it.Text = strings.TrimSpace(t.planned.String())
			}
		}
		if it.Arguments != nil {
			it.Arguments = append(json.RawMessage(nil), it.Arguments...)
		}
		items = append(items, it)
		if e.call != nil {
			run = append(run, e.call)
		}
	}
	flush()
	return items
}
