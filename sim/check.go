package sim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

// check runs the invariants and the scenario's expectations on a finished
// run. The invariants are judged from what the edges saw (the requests the
// model received, the bodies that ran, the audio that played), not from the
// core's own account.
func (r *run) check() {
	r.out.Context = r.core.ChatContext()
	r.out.ToolRuns = r.edges.toolRuns
	r.out.Requests = len(r.edges.requests)
	calls := r.core.Calls()
	byID := make(map[string]tools.Call, len(calls))
	for _, c := range calls {
		byID[c.ID] = c
	}
	r.checkCalls(calls)
	r.checkAnswered("the final context", r.out.Context.Items)
	for i, req := range r.edges.requests {
		r.checkAnswered(fmt.Sprintf("request %d (at %v)", i+1, req.at), req.items)
	}
	r.checkPlayout()
	r.checkDelivered()
	r.checkInferences()
	r.checkStall(byID)
	r.checkUncommitted()
	if !r.sc.invariantsOnly {
		r.checkExpect()
	}
}

// checkUncommitted: no tool body ran for a turn that was never committed
// (a speculative answer discarded), except reads declared to be safe to
// start early.
func (r *run) checkUncommitted() {
	turns := map[uint64]bool{}
	sp := &r.out.Speculation
	for _, e := range r.out.Events {
		switch {
		case e.Kind == events.TurnStarted:
			turns[e.Epoch] = true
		case e.Kind == events.UserTurn && e.Reason == "speech":
			sp.Turns++
		case e.Kind == events.SpeculationUsed:
			sp.Used++
			sp.Won += e.Delay
		case e.Kind == events.SpeculationDiscarded:
			sp.Discarded++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(r.edges.runs)) {
		tr := r.edges.runs[id]
		if turns[tr.epoch] {
			continue
		}
		sp.EarlyBodies++
		if !tr.tool.Speculative() {
			r.violate("the body of %s (call %s) ran for turn %d, which was never committed", tr.tool.Name(), id, tr.epoch)
		}
	}
}

// checkCalls: every call reached exactly one terminal state and was
// committed.
func (r *run) checkCalls(calls []tools.Call) {
	terminals := map[string]int{}
	for _, e := range r.out.Events {
		if e.Kind == events.ToolTerminal {
			terminals[e.CallID]++
		}
	}
	for _, c := range calls {
		if c.State == tools.StateUnknown && c.Epoch == 0 {
			continue // restored from a journal, not made in this run
		}
		switch {
		case !c.State.Terminal():
			r.violate("call %s (%s) never reached a terminal state: %s", c.ID, c.Tool, c.State)
		case terminals[c.ID] != 1:
			r.violate("call %s (%s) reported %d terminal states; want exactly one", c.ID, c.Tool, terminals[c.ID])
		case !c.Committed:
			r.violate("call %s (%s) ended %s but its result never reached the context", c.ID, c.Tool, c.State)
		}
	}
}

// checkAnswered: every call in items is followed by exactly one result, the
// results in call order, and no result answers a call that is not there.
func (r *run) checkAnswered(where string, items []llm.Item) {
	var open []string // calls awaiting results, in order
	seen := map[string]bool{}
	for _, it := range items {
		switch it.Kind {
		case llm.KindToolCall:
			open = append(open, it.CallID)
		case llm.KindToolResult:
			switch {
			case seen[it.CallID]:
				r.violate("%s: call %s has more than one result", where, it.CallID)
			case len(open) == 0 || !slices.Contains(open, it.CallID):
				r.violate("%s: result for call %s, which is not an open call before it", where, it.CallID)
			case open[0] != it.CallID:
				r.violate("%s: result for call %s comes before the result for call %s; want call order", where, it.CallID, open[0])
			}
			seen[it.CallID] = true
			if i := slices.Index(open, it.CallID); i >= 0 {
				open = slices.Delete(open, i, i+1)
			}
		default:
			if len(open) > 0 {
				r.violate("%s: call %s has no result before the next message", where, open[0])
				open = open[:0]
			}
		}
	}
	if len(open) > 0 {
		r.violate("%s: call %s has no result", where, open[0])
	}
}

// checkPlayout: the assistant messages in the context are exactly what the
// caller heard, turn by turn.
func (r *run) checkPlayout() {
	var said []string
	for _, it := range r.out.Context.Items {
		if it.Kind == llm.KindMessage && it.Role == llm.RoleAssistant && it.Text != "" {
			said = append(said, it.Text)
		}
	}
	var heard []string
	epochs := slices.Sorted(func(yield func(uint64) bool) {
		for _, ep := range r.edges.player.order {
			if !yield(ep) {
				return
			}
		}
	})
	for _, ep := range epochs {
		if h := r.edges.player.heard(r.sched.now(), ep); h != "" {
			heard = append(heard, h)
		}
	}
	if !slices.Equal(said, heard) {
		r.violate("context does not match playout: the context says the agent said %q; the caller heard %q", said, heard)
	}
}

// checkDelivered: never silent. Every answer no one cut into was heard to
// its last word, or the context holds the note that names the words the
// caller did not hear.
func (r *run) checkDelivered() {
	interrupted := map[uint64]bool{}
	for _, e := range r.out.Events {
		if e.Kind == events.TurnInterrupted {
			interrupted[e.Epoch] = true
		}
	}
	var notes [][]string
	for _, it := range r.out.Context.Items {
		if lost, ok := engine.IsUndeliveredNote(it.Text); ok && it.Role == llm.RoleSystem {
			notes = append(notes, strings.Fields(lost))
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(r.edges.gens)) {
		g := r.edges.gens[ep]
		if g.text == "" || interrupted[ep] || g.discarded {
			continue
		}
		words := strings.Fields(g.text)
		heard := len(strings.Fields(r.edges.player.heard(r.sched.now(), ep)))
		if heard >= len(words) {
			continue
		}
		rest := words[heard:]
		if !slices.ContainsFunc(notes, func(n []string) bool { return slices.Equal(n, rest) }) {
			r.violate("silent: turn %d's answer %q was heard only up to %q and no note in the context says the caller missed %q",
				ep, g.text, strings.Join(words[:heard], " "), strings.Join(rest, " "))
		}
	}
}

// checkInferences: every result that is owed an answer (all but calls
// ended by the interruption itself) reaches the model in some request after
// it was committed, and no request goes out with nothing new in it (one
// inference per result, not two).
func (r *run) checkInferences() {
	shown := map[[2]string]bool{} // call id, output
	users := 0
	for i, req := range r.edges.requests {
		n, fresh := 0, false
		for _, it := range req.items {
			switch {
			case it.Kind == llm.KindMessage && it.Role == llm.RoleUser:
				n++
			case it.Kind == llm.KindToolResult && !llm.IsProvisional(it.Output):
				k := [2]string{it.CallID, it.Output}
				fresh = fresh || !shown[k]
				shown[k] = true
			}
		}
		if i > 0 && n <= users && !fresh {
			r.violate("request %d (at %v) has nothing new for the model: no new user input, no new result", i+1, req.at)
		}
		users = max(users, n)
	}
	for _, c := range r.core.Calls() {
		if !c.Committed || c.State == tools.StateCancelled || c.Epoch == 0 {
			continue
		}
		if !shown[[2]string{c.ID, c.Output}] {
			r.violate("the result of call %s (%s, %s) never reached the model", c.ID, c.Tool, c.State)
		}
	}
}

// checkStall: whenever the runtime has what it needs to act (injected
// input, a finished user turn, a committed result with the floor free) the
// model request that carries it goes out within max_stall.
func (r *run) checkStall(byID map[string]tools.Call) {
	limit := r.sc.Expect.MaxStall
	firstWith := func(from time.Duration, has func(llm.Item) bool) (time.Duration, bool) {
		for _, req := range r.edges.requests {
			if req.carries() < from {
				continue
			}
			for _, it := range req.items {
				if has(it) {
					return req.carries(), true
				}
			}
		}
		return 0, false
	}
	for _, e := range r.out.Events {
		if e.Kind != events.UserTurn {
			continue
		}
		text := e.Text
		at, ok := firstWith(e.At, func(it llm.Item) bool {
			return it.Kind == llm.KindMessage && it.Role == llm.RoleUser && it.Text == text
		})
		if !ok || at-e.At > limit {
			r.violate("stall: the user turn %q finished at %v but no request carried it within %v", text, e.At, limit)
		}
	}
	ignored := map[string]bool{}
	for _, e := range r.out.Events {
		if e.Kind == events.TranscriptIgnored {
			ignored[e.Text] = true
		}
	}
	for i, u := range r.sc.User {
		// A noise has no words; words the arbiter ruled out (a
		// backchannel, unconfirmed words over the agent) are no turn.
		text := u.Say + u.Backchannel
		if !u.Spoken() || ignored[text] {
			continue
		}
		ready := r.userReady(u)
		if !r.isolated(i, ready+limit) {
			continue
		}
		// Not before the caller stopped (within the frame the detector
		// hears in); words it did not take for a barge-in over the agent
		// may end the turn as soon as the recogniser has them.
		stopped := u.At + soundLength(u) - frameLen/2
		found := false
		for _, e := range r.out.Events {
			if e.Kind == events.UserTurn && e.Text == text && e.At >= stopped && e.At <= ready+limit {
				found = true
				break
			}
		}
		if !found {
			r.violate("stall: the caller finished %q (turn complete at %v) but the turn did not end within %v", text, ready, limit)
		}
	}
	// A result is ready for the model once its turn's other calls are in
	// too (a detached call waits for nobody and nobody waits for it).
	turnDone := map[uint64]time.Duration{}
	for _, e := range r.out.Events {
		if e.Kind == events.ToolCommitted {
			if byID[e.CallID].Policy != tools.Detach {
				turnDone[byID[e.CallID].Epoch] = max(turnDone[byID[e.CallID].Epoch], e.At)
			}
		}
	}
	lastCommit := map[string]uint64{}
	for _, e := range r.out.Events {
		if e.Kind == events.ToolCommitted {
			lastCommit[e.CallID] = e.Seq
		}
	}
	busy := r.busyIntervals()
	for _, e := range r.out.Events {
		// A result amended by a late outcome is judged from its last
		// commit: what the model must finally hear.
		if e.Kind != events.ToolCommitted || lastCommit[e.CallID] != e.Seq {
			continue
		}
		c := byID[e.CallID]
		if c.State == tools.StateCancelled {
			continue
		}
		ready := e.At
		if c.Policy != tools.Detach && e.Reason == "" {
			ready = turnDone[c.Epoch]
		}
		free := freeAfter(ready, busy)
		if free > r.out.End {
			continue // the floor never came free: the hang check speaks for it
		}
		at, ok := firstWith(e.At, func(it llm.Item) bool {
			return it.Kind == llm.KindToolResult && it.CallID == c.ID && it.Output == c.Output
		})
		if !ok || at > free+limit {
			r.violate("stall: the result of call %s (%s) was ready at %v and the floor was free at %v, but no request carried it within %v",
				c.ID, c.Tool, ready, free, limit)
		}
	}
}

// userReady is when a spoken action's turn is complete: its silence has
// lasted the endpointing and its transcript is in.
func (r *run) userReady(u UserAction) time.Duration {
	speech := soundLength(u)
	if u.Noise != "" {
		// No words: the turn the detector opened is dropped once the
		// recogniser's deadline has passed.
		return u.At + speech + r.sc.VAD.Endpointing + engine.DefaultTranscriptTimeout
	}
	transcript := u.At + speech + r.sc.STT.Latency
	// The silence the words call for, as the core judges them.
	vad := r.sc.VAD
	cfg := engine.Config{Endpointing: vad.Endpointing, EndpointingMin: vad.EndpointingMin, EndpointingMax: vad.EndpointingMax}
	if vad.EndpointingMax > 0 {
		cfg.Endpointing = min(max(vad.Endpointing, vad.EndpointingMin), vad.EndpointingMax)
	}
	silence := cfg.EndpointFor(u.Say+u.Backchannel, nil)
	if speech > r.sc.VAD.Onset {
		return max(u.At+speech+silence, transcript)
	}
	return transcript + silence
}

// isolated reports whether no other caller action falls within user action
// i's span up to until, so its turn is its own.
func (r *run) isolated(i int, until time.Duration) bool {
	u := r.sc.User[i]
	for j, o := range r.sc.User {
		if j == i {
			continue
		}
		oEnd := o.At
		if o.Inject == "" {
			oEnd = r.userReady(o)
		}
		if o.At <= until && oEnd >= u.At {
			return false
		}
	}
	for _, f := range r.sc.Faults {
		if f.Kind == "transport_drop" && f.At <= until && f.At >= u.At {
			return false
		}
	}
	return true
}

type interval struct{ from, to time.Duration }

// busyIntervals is when the floor is taken: the caller speaking or ending
// a turn, the agent generating or playing, the line down.
func (r *run) busyIntervals() []interval {
	var out []interval
	for _, u := range r.sc.User {
		if u.Inject == "" {
			out = append(out, interval{u.At, r.userReady(u)})
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(r.edges.gens)) {
		if g := r.edges.gens[ep]; !g.discarded {
			end := g.ended
			if end < 0 {
				end = r.out.End + time.Hour
			}
			out = append(out, interval{g.started, end})
		}
	}
	// A turn whose own calls are still out will ask the model about
	// them, and its follow-up shows any other result due then too: one
	// answer, not two. Not so for a turn the caller has moved on from.
	policy := map[string]tools.Policy{}
	for _, c := range r.core.Calls() {
		policy[c.ID] = c.Policy
	}
	asked, done := map[uint64]time.Duration{}, map[uint64]time.Duration{}
	var turnsAt []time.Duration
	for _, e := range r.out.Events {
		switch {
		case e.Kind == events.UserTurn:
			turnsAt = append(turnsAt, e.At)
		case e.Kind == events.ToolRequested && policy[e.CallID] != tools.Detach:
			if _, ok := asked[e.Epoch]; !ok {
				asked[e.Epoch] = e.At
			}
		case e.Kind == events.ToolCommitted && policy[e.CallID] != tools.Detach:
			done[e.Epoch] = max(done[e.Epoch], e.At)
		}
	}
	for ep, from := range asked {
		to, ok := done[ep]
		if !ok || slices.ContainsFunc(turnsAt, func(t time.Duration) bool { return t > from && t < to }) {
			continue
		}
		out = append(out, interval{from, to})
	}
	for _, f := range r.sc.Faults {
		if f.Kind != "transport_drop" {
			continue
		}
		end := r.out.End + time.Hour
		for _, u := range r.sc.User {
			if u.At >= f.At && u.At < end {
				end = u.At
			}
		}
		out = append(out, interval{f.At, end})
	}
	return out
}

// freeAfter is the first instant at or after t that no interval covers.
func freeAfter(t time.Duration, busy []interval) time.Duration {
	for moved := true; moved; {
		moved = false
		for _, b := range busy {
			if b.from <= t && t < b.to {
				t, moved = b.to, true
			}
		}
	}
	return t
}

// checkExpect checks the scenario's own expectations.
func (r *run) checkExpect() {
	x := r.sc.Expect
	for _, name := range sortedKeys(x.ToolRuns) {
		if got := r.edges.toolRuns[name]; got != x.ToolRuns[name] {
			r.violate("expect.tool_runs: %s ran %d times; want %d", name, got, x.ToolRuns[name])
		}
	}
	for _, name := range sortedKeys(x.ToolRunsMax) {
		if got := r.edges.toolRuns[name]; got > x.ToolRunsMax[name] {
			r.violate("expect.tool_runs_max: %s ran %d times; want at most %d", name, got, x.ToolRunsMax[name])
		}
	}
	if len(x.FinalContextContains) > 0 {
		var all strings.Builder
		for _, it := range r.out.Context.Items {
			all.WriteString(it.Text)
			all.WriteByte('\n')
			all.WriteString(it.Output)
			all.WriteByte('\n')
		}
		for _, want := range x.FinalContextContains {
			if !strings.Contains(all.String(), want) {
				r.violate("expect.final_context_contains: %q is not in the final context", want)
			}
		}
	}
	for i, ev := range x.Events {
		r.checkEvent(i, ev)
	}
}

func (r *run) checkEvent(i int, x EventExpect) {
	from := r.reference(x.After)
	to := time.Duration(1<<63 - 1)
	if x.Within > 0 {
		to = from + x.Within
	}
	n := 0
	for _, e := range r.out.Events {
		if string(e.Kind) != x.Kind || e.At < from || e.At > to {
			continue
		}
		if x.Tool != "" && e.Tool != x.Tool || x.State != "" && e.State != x.State || x.Reason != "" && e.Reason != x.Reason {
			continue
		}
		n++
	}
	desc := describeExpect(x)
	switch {
	case x.Count >= 0 && n != x.Count:
		r.violate("expect.events.%d (line %d): %s: %d matching events; want %d", i, x.Line, desc, n, x.Count)
	case x.Count < 0 && n == 0:
		r.violate("expect.events.%d (line %d): %s: no matching event", i, x.Line, desc)
	}
}

// reference is the time an `after` names.
func (r *run) reference(after string) time.Duration {
	what, idx, ok := strings.Cut(after, ".")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(idx)
	if err != nil {
		return 0
	}
	switch what {
	case "user":
		return r.sc.User[n].At
	case "fault":
		return r.sc.Faults[n].At
	}
	return 0
}

func describeExpect(x EventExpect) string {
	var b strings.Builder
	b.WriteString(x.Kind)
	for _, f := range [][2]string{{"tool", x.Tool}, {"state", x.State}, {"reason", x.Reason}} {
		if f[1] != "" {
			fmt.Fprintf(&b, " %s=%s", f[0], f[1])
		}
	}
	if x.Within > 0 {
		fmt.Fprintf(&b, " within %v", x.Within)
	}
	if x.After != "" {
		fmt.Fprintf(&b, " after %s", x.After)
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
