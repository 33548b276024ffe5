package realtime

import (
	"strings"
	"time"
	"unicode"

	"github.com/holdline/holdline/llm"
)

// origin says who put an item in the server's conversation.
type origin int

const (
	byServer origin = iota // a response's output, or the caller's committed audio
	byUs                   // created by the client from the session's context
)

// mirrorItem is what the client knows of one item of the server's
// conversation.
type mirrorItem struct {
	id, kind, role, callID string
	origin                 origin
	text                   string // a message's text; a caller utterance's transcript
	samples                int    // audio the server sent for it, at Rate
	truncated              bool   // truncated, or recreated with the heard text
	// transcribing: the caller's audio, whose transcript is still to come.
	// It is kept through syncs, or the transcript might never arrive.
	transcribing bool
}

func (m mirrorItem) audioMs() int { return m.samples * 1000 / Rate }

// mirror is the client's copy of the server's conversation, in order.
type mirror struct{ items []mirrorItem }

func (m *mirror) index(id string) int {
	for i := range m.items {
		if m.items[i].id == id {
			return i
		}
	}
	return -1
}

func (m *mirror) get(id string) *mirrorItem {
	if i := m.index(id); i >= 0 {
		return &m.items[i]
	}
	return nil
}

// add records an item the server reports, after previous when known. An
// item the client created is already there and keeps its origin.
func (m *mirror) add(it mirrorItem, previous *string) {
	if cur := m.get(it.id); cur != nil {
		return
	}
	at := len(m.items)
	if previous != nil {
		if *previous == "" || *previous == "root" {
			at = 0
		} else if i := m.index(*previous); i >= 0 {
			at = i + 1
		}
	}
	m.items = append(m.items[:at], append([]mirrorItem{it}, m.items[at:]...)...)
}

func (m *mirror) remove(id string) {
	if i := m.index(id); i >= 0 {
		m.items = append(m.items[:i], m.items[i+1:]...)
	}
}

// matches says whether server item s holds context item it. A message
// the client created holds exactly its text; a caller utterance holds a
// context message that contains its transcript (the session may join two
// utterances into one turn); a spoken answer is matched by role, its text
// being the session's to settle.
func matches(it llm.Item, s mirrorItem) bool {
	switch it.Kind {
	case llm.KindMessage:
		if s.kind != "message" || s.role != string(it.Role) {
			return false
		}
		switch {
		case s.origin == byUs:
			return s.text == it.Text
		case it.Role == llm.RoleUser:
			return s.text != "" && strings.Contains(normalize(it.Text), normalize(s.text))
		}
		return true
	case llm.KindToolCall:
		return s.kind == "function_call" && s.callID == it.CallID
	case llm.KindToolResult:
		return s.kind == "function_call_output" && s.callID == it.CallID
	}
	return false
}

// normalize lowers case and keeps only letters, digits and single spaces,
// so that a transcript matches the text it became.
func normalize(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
		default:
			space = true
		}
	}
	return b.String()
}

// sync returns the client events that make the server's conversation hold
// the session's context, and updates the mirror as if they had been
// applied (the socket keeps them in order before the next response.create).
//
// The context is the truth: it holds what the caller heard and every tool
// result. Server items it lacks that the server made itself (output the
// caller never heard, calls from cancelled responses, audio whose
// transcript was ignored as echo) are deleted; an interrupted spoken answer
// is truncated to the milliseconds played; a text answer cut short is
// replaced by the words heard; context items the server lacks are created
// in order. Where the two disagree on an item the client made, everything
// from there is replaced. Called with c.mu held.
func (c *Client) sync(items []llm.Item) []clientEvent {
	var ours []llm.Item
	for _, it := range items {
		if it.Kind == llm.KindMessage && it.Text == "" {
			continue // nothing to say, nothing to keep
		}
		ours = append(ours, it)
	}
	srv := c.mirror.items
	var (
		ops        []clientEvent
		kept, held []mirrorItem
		i, j       int
	)
	del := func(s mirrorItem) {
		ops = append(ops, c.event(clientEvent{Type: "conversation.item.delete", ItemID: s.id}))
	}
	for ; i < len(ours); i++ {
		it := ours[i]
		for j < len(srv) && !matches(it, srv[j]) && srv[j].origin == byServer {
			if srv[j].transcribing {
				held = append(held, srv[j])
			} else {
				del(srv[j])
			}
			j++
		}
		if j >= len(srv) || !matches(it, srv[j]) {
			break
		}
		s := srv[j]
		j++
		if it.Kind == llm.KindMessage && it.Role == llm.RoleUser {
			// Further utterances the session joined into this turn.
			for j < len(srv) && srv[j].origin == byServer && matches(it, srv[j]) {
				kept = append(kept, s)
				s = srv[j]
				j++
			}
		}
		if it.Kind == llm.KindMessage && it.Role == llm.RoleAssistant && it.Interrupted && !s.truncated {
			s.truncated = true
			if s.samples > 0 {
				ms := min(max(int(it.Played/time.Millisecond), 0), s.audioMs())
				zero := 0
				ops = append(ops, c.event(clientEvent{Type: "conversation.item.truncate", ItemID: s.id, ContentIndex: &zero, AudioEndMs: &ms}))
			} else {
				// A text answer: the server's copy is longer than what
				// was heard. Put the heard words in its place.
				del(s)
				s = c.create(&ops, it, kept, held)
				s.truncated = true
			}
		}
		kept = append(kept, s)
	}
	for ; j < len(srv); j++ {
		if srv[j].transcribing && srv[j].origin == byServer {
			held = append(held, srv[j])
		} else {
			del(srv[j])
		}
	}
	for ; i < len(ours); i++ {
		kept = append(kept, c.create(&ops, ours[i], kept, held))
	}
	c.mirror.items = append(kept, held...)
	return ops
}

// create appends the conversation.item.create for it, placed after the
// last kept item, and returns its mirror entry.
func (c *Client) create(ops *[]clientEvent, it llm.Item, kept, held []mirrorItem) mirrorItem {
	m := mirrorItem{id: c.newID("item"), origin: byUs, text: it.Text}
	w := &wireItem{ID: m.id}
	switch it.Kind {
	case llm.KindMessage:
		m.kind, m.role = "message", string(it.Role)
		typ := "input_text"
		if it.Role == llm.RoleAssistant {
			typ = "output_text"
		}
		w.Type, w.Role, w.Content = "message", string(it.Role), []wireContent{{Type: typ, Text: it.Text}}
	case llm.KindToolCall:
		m.kind, m.callID = "function_call", it.CallID
		args := string(it.Arguments)
		if args == "" {
			args = "{}"
		}
		w.Type, w.CallID, w.Name, w.Arguments = "function_call", it.CallID, it.Name, args
	case llm.KindToolResult:
		m.kind, m.callID = "function_call_output", it.CallID
		w.Type, w.CallID, w.Output = "function_call_output", it.CallID, it.Output
	}
	e := clientEvent{Type: "conversation.item.create", Item: w}
	switch {
	case len(kept) > 0:
		e.PreviousItemID = kept[len(kept)-1].id
	case len(held) > 0:
		e.PreviousItemID = "root"
	}
	*ops = append(*ops, c.event(e))
	return m
}
