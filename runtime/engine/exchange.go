package engine

import (
	"slices"
	"strings"

	"github.com/holdline/holdline/tools"
)

// Exchange follows the agent's answer to one input (runtime.Session.Ask):
// its turns, from the first that input starts, until the agent is next
// idle. The core keeps it up to date as it takes inputs.
type Exchange struct {
	from  uint64       // the exchange's first epoch
	turns []*turnState // its turns, in epoch order; kept after they settle
	done  bool
	c     *conductor
}

// Answer is what came of an exchange: see runtime.Reply, which is the same.
type Answer struct {
	Said        string
	Heard       string
	Interrupted bool
	Calls       []tools.Call
}

// Follow starts an exchange with the next turn. Call it just before
// handling the input that the exchange answers, so that nothing the agent
// does in answer can be missed.
func (k *Core) Follow() *Exchange {
	ex := &Exchange{from: k.c.turns.epoch + 1, c: k.c}
	k.c.exchanges = append(k.c.exchanges, ex)
	return ex
}

// Done reports whether the agent has come to idle since the exchange
// began: its answer is complete.
func (ex *Exchange) Done() bool { return ex.done }

// Answer reads the exchange's turns as they stand: complete once Done,
// as far as it got otherwise (the session ended first).
func (ex *Exchange) Answer() Answer {
	c := ex.c
	var r Answer
	var said, heard []string
	for _, t := range ex.turns {
		said = appendText(said, t.planned.String())
		played := t.handle.PlayedText()
		if !t.playoutDone() {
			played = c.playedText(t, c.edges.Played(t.epoch))
		}
		heard = appendText(heard, played)
		r.Interrupted = r.Interrupted || t.wasCut()
		for _, cs := range t.calls {
			r.Calls = append(r.Calls, copyCall(cs.rec))
		}
	}
	r.Said, r.Heard = strings.Join(said, " "), strings.Join(heard, " ")
	return r
}

// follow keeps the exchanges under way up to date after an input; those
// that have come to idle are done.
func (c *conductor) follow() {
	if len(c.exchanges) == 0 {
		return
	}
	// A turn starts in one input and settles in a later one, so looking
	// at the turns after every input sees each of them.
	for _, ex := range c.exchanges {
		for _, t := range c.turns.live {
			if t.epoch >= ex.from && (len(ex.turns) == 0 || t.epoch > ex.turns[len(ex.turns)-1].epoch) {
				ex.turns = append(ex.turns, t)
			}
		}
	}
	if c.link.idle {
		for _, ex := range c.exchanges {
			ex.done = true
		}
		clear(c.exchanges)
		c.exchanges = c.exchanges[:0]
	}
}

func appendText(texts []string, text string) []string {
	if text = strings.TrimSpace(text); text != "" {
		texts = append(texts, text)
	}
	return texts
}

// copyCall copies a ledger record, so that the answer shares nothing with
// the core.
func copyCall(c *tools.Call) tools.Call {
	out := *c
	out.Args = slices.Clone(c.Args)
	if c.Late != nil {
		late := *c.Late
		out.Late = &late
	}
	return out
}
