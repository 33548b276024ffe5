package tools

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Outcome is how a call ended.
type Outcome struct {
	State   State  `json:"state"`
	Output  string `json:"output,omitempty"` // what the model is shown
	IsError bool   `json:"is_error,omitempty"`
}

// Call is the ledger's record of one tool call. Its JSON form is part of
// a session snapshot (package handoff).
type Call struct {
	ID     string          `json:"id"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"args,omitempty"`
	Key    string          `json:"key"` // idempotency key: the same for the same tool and canonical arguments
	Effect Effect          `json:"effect"`
	Policy Policy          `json:"policy"`
	Epoch  uint64          `json:"epoch"` // the agent turn that made the call

	State   State  `json:"state"`
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"is_error,omitempty"`

	// Ran reports that the body started. A call that ends without it never
	// touched the world.
	Ran             bool `json:"ran,omitempty"`
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// ReusedFrom names the earlier call whose outcome this call was given
	// instead of running (at most once for mutations).
	ReusedFrom string `json:"reused_from,omitempty"`
	// Late is an outcome the body reported after the call had already
	// ended (it was abandoned at its deadline and finished anyway). The
	// terminal state stands, but a repeated call is judged by Late: it is
	// what really happened.
	Late *Outcome `json:"late,omitempty"`
	// Committed reports that the result entered the chat context.
	Committed bool `json:"committed,omitempty"`
}

// Ledger records every call of a session and its progress. Reports about a
// call may arrive in any order (a cancel before the start, a result after
// the cancel, a start after the end); whatever the order, the call reaches
// exactly one terminal state, which records what really happened.
//
// A Ledger is owned by one goroutine (the session core) and is not safe for
// concurrent use.
type Ledger struct {
	session string
	calls   map[string]*Call
	order   []*Call
	byKey   map[string][]*Call
}

// NewLedger returns an empty ledger for the session; the session id is part
// of every idempotency key.
func NewLedger(session string) *Ledger {
	return &Ledger{session: session, calls: map[string]*Call{}, byKey: map[string][]*Call{}}
}

// Request records a new call. A call id the ledger has seen is an error:
// ids are how results find their calls.
func (l *Ledger) Request(id, tool string, args json.RawMessage, effect Effect, policy Policy, epoch uint64) (*Call, error) {
	if _, dup := l.calls[id]; dup {
		return nil, fmt.Errorf("tools: ledger: call id %q already recorded", id)
	}
	c := &Call{
		ID: id, Tool: tool, Args: slices.Clone(args), Effect: effect, Policy: policy, Epoch: epoch,
		Key:   IdempotencyKey(l.session, tool, args),
		State: StateRequested,
	}
	l.add(c)
	return c, nil
}

func (l *Ledger) add(c *Call) {
	l.calls[c.ID] = c
	l.order = append(l.order, c)
	l.byKey[c.Key] = append(l.byKey[c.Key], c)
}

// Get returns the call with the given id.
func (l *Ledger) Get(id string) (*Call, bool) {
	c, ok := l.calls[id]
	return c, ok
}

// Len returns the number of calls recorded.
func (l *Ledger) Len() int { return len(l.order) }

// Calls returns copies of every call, in the order they were requested.
func (l *Ledger) Calls() []Call {
	out := make([]Call, len(l.order))
	for i, c := range l.order {
		out[i] = *c
		out[i].Args = slices.Clone(c.Args)
		if c.Late != nil {
			late := *c.Late
			out[i].Late = &late
		}
	}
	return out
}

// Defer records that the call waits for its turn's preamble. Only a call
// not yet started can be deferred; it reports whether the state changed.
func (l *Ledger) Defer(id string) bool {
	c := l.calls[id]
	if c == nil || c.State != StateRequested {
		return false
	}
	c.State = StateDeferred
	return true
}

// Start records that the call's body began. A start reported after the call
// ended (the end overtook it) still counts as a run.
func (l *Ledger) Start(id string) bool {
	c := l.calls[id]
	if c == nil {
		return false
	}
	c.Ran = true
	if c.State.Terminal() {
		return false
	}
	c.State = StateRunning
	return true
}

// RequestCancel records that the call was asked to stop. It ends nothing by
// itself: a running body decides by how it returns.
func (l *Ledger) RequestCancel(id string) bool {
	c := l.calls[id]
	if c == nil || c.State.Terminal() || c.CancelRequested {
		return false
	}
	c.CancelRequested = true
	return true
}

// Finish records how the call ended and reports whether this made it
// terminal. The first terminal report stands; a later one that differs is
// kept as Late. A non-terminal state in o is an error of the caller and is
// ignored.
func (l *Ledger) Finish(id string, o Outcome) bool {
	c := l.calls[id]
	if c == nil || !o.State.Terminal() {
		return false
	}
	if c.State.Terminal() {
		if o.State != c.State || o.Output != c.Output {
			late := o
			c.Late = &late
		}
		return false
	}
	c.State, c.Output, c.IsError = o.State, o.Output, o.IsError
	return true
}

// Reuse ends the call with the outcome of an earlier call with the same key.
func (l *Ledger) Reuse(id string, from *Call) bool {
	c := l.calls[id]
	if c == nil || c.State.Terminal() {
		return false
	}
	o := from.Outcome()
	c.State, c.Output, c.IsError = o.State, o.Output, o.IsError
	c.ReusedFrom = from.ID
	return true
}

// Amend replaces the output of an ended call: the model is to be told
// something it was not (a late outcome). The state stands.
func (l *Ledger) Amend(id, output string) {
	if c := l.calls[id]; c != nil && c.State.Terminal() {
		c.Output = output
	}
}

// Commit records that the call's result entered the chat context.
func (l *Ledger) Commit(id string) {
	if c := l.calls[id]; c != nil && c.State.Terminal() {
		c.Committed = true
	}
}

// Outcome is what the call really did: the late outcome when the body
// finished after being given up on, the terminal one otherwise.
func (c *Call) Outcome() Outcome {
	if c.Late != nil {
		return *c.Late
	}
	return Outcome{State: c.State, Output: c.Output, IsError: c.IsError}
}

// Decision is what to do with a mutation about to run, given the calls
// before it with the same idempotency key.
type Decision int

// Decisions, from [Ledger.Decide].
const (
	// Run: nothing with this key happened yet, or it failed or never ran.
	Run Decision = iota
	// Reuse: an earlier call did it; give this call that outcome.
	Reuse
	// Join: an earlier call is running it now; this call gets its outcome.
	Join
	// Reconcile: an earlier call's outcome is unknown (abandoned at its
	// deadline, or cut by a crash); find out before doing anything.
	Reconcile
)

var decisionNames = [...]string{"run", "reuse", "join", "reconcile"}

func (d Decision) String() string {
	if int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return "Decision(" + strconv.Itoa(int(d)) + ")"
}

// Decide says whether call id may run, judged against the other calls with
// its key, and returns the call the decision is about (nil for Run). A
// success anywhere wins (the thing was done); then a call running now; then
// an unknown outcome. Failures and calls that never ran do not count: trying
// again is what the caller wants.
func (l *Ledger) Decide(id string) (Decision, *Call) {
	c := l.calls[id]
	if c == nil {
		return Run, nil
	}
	var running, unknown *Call
	for _, p := range l.byKey[c.Key] {
		if p == c || p.ReusedFrom != "" {
			continue
		}
		o := p.Outcome()
		switch {
		case o.State == StateSucceeded:
			return Reuse, p
		case p.State == StateRunning:
			running = p
		case (o.State == StateTimedOut || o.State == StateUnknown) && p.Ran:
			unknown = p
		}
	}
	if running != nil {
		return Join, running
	}
	if unknown != nil {
		return Reconcile, unknown
	}
	return Run, nil
}

// Resolve records what reconciliation found out about an unknown call: the
// outcome it really had. It stays in its terminal state, as with any late
// outcome, and future decisions follow the finding.
func (l *Ledger) Resolve(id string, o Outcome) {
	if c := l.calls[id]; c != nil {
		late := o
		c.Late = &late
	}
}

// Restore adds calls whose intent was written ahead but whose outcome never
// was (the process died while they ran): they are unknown, and a repeat of
// one is reconciled, never run blindly. Records already in the ledger are
// skipped.
func (l *Ledger) Restore(records []Record) {
	for _, r := range records {
		if _, ok := l.calls[r.CallID]; ok {
			continue
		}
		key := r.Key
		if key == "" {
			key = IdempotencyKey(l.session, r.Tool, r.Args)
		}
		l.add(&Call{
			ID: r.CallID, Tool: r.Tool, Args: slices.Clone(r.Args), Key: key,
			Effect: Mutation, Policy: Defer, State: StateUnknown, Ran: true, Committed: true,
			Output:  "error: the outcome of this call is unknown: the session was interrupted while it ran",
			IsError: true,
		})
	}
}

// Load adds calls recorded elsewhere (a snapshot of another session
// process) as they are, in order. A call whose id the ledger already has is
// skipped, as is one that is not terminal: the caller first settles those
// by what the journal knows ([Settle]).
func (l *Ledger) Load(calls []Call) {
	for _, c := range calls {
		if _, ok := l.calls[c.ID]; ok || !c.State.Terminal() {
			continue
		}
		c.Args = slices.Clone(c.Args)
		if c.Late != nil {
			late := *c.Late
			c.Late = &late
		}
		if c.Key == "" {
			c.Key = IdempotencyKey(l.session, c.Tool, c.Args)
		}
		l.add(&c)
	}
}

// Settle returns c brought to a terminal state for a session resumed
// without it running, by what the session's journal says of it: the
// outcome the journal recorded, if any; otherwise a mutation whose intent
// was written, or whose body had started, is unknown (never to be run
// again blindly), and any other call ended without effect, so the model
// may ask again. A terminal call is returned as it is.
func Settle(c Call, journal []Record) Call {
	if c.State.Terminal() {
		return c
	}
	intent := false
	for _, r := range journal {
		if r.CallID != c.ID {
			continue
		}
		if r.State.Terminal() {
			c.State, c.Output, c.IsError, c.Ran = r.State, r.Output, r.IsError, true
			return c
		}
		intent = true
	}
	if c.Effect == Mutation && (intent || c.Ran || c.State == StateRunning) {
		c.State, c.Ran, c.IsError = StateUnknown, true, true
		c.Output = "error: the outcome of this call is unknown: the session was interrupted while it ran"
		return c
	}
	c.State, c.IsError = StateCancelled, true
	c.Output = "error: this call did not complete: the session moved before it ran; call it again if it is still needed"
	return c
}

// IdempotencyKey is the key of a call of tool with args in session: the
// same whenever the arguments are the same as JSON values, whatever their
// key order or spacing.
func IdempotencyKey(session, tool string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(session))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(Canonical(args))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Canonical returns args in a canonical JSON form: object keys sorted, no
// insignificant space, each number in one exact form (see canonicalNumber). Empty args are the empty object;
// args that are not valid JSON are returned compacted as far as possible, so
// that identical garbage still gets identical keys.
func Canonical(args json.RawMessage) []byte {
	if len(bytes.TrimSpace(args)) == 0 {
		return []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return bytes.TrimSpace(args)
	}
	var buf bytes.Buffer
	writeCanonical(&buf, v)
	return buf.Bytes()
}

func writeCanonical(buf *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			b, _ := json.Marshal(k)
			buf.Write(b)
			buf.WriteByte(':')
			writeCanonical(buf, v[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeCanonical(buf, x)
		}
		buf.WriteByte(']')
	case json.Number:
		buf.WriteString(canonicalNumber(v.String()))
	default:
		b, _ := json.Marshal(v)
		buf.Write(b)
	}
}

// canonicalNumber writes a JSON number literal in one form per value, exactly:
// 2, 2.0 and 2e0 are one number to a booking system, and an order number
// beyond float64's 53 bits must stay itself. Integers up to 21 digits are
// written out, as are decimals with fewer than 7 leading zeros; other values
// take the exponent form d.ddde±N.
func canonicalNumber(lit string) string {
	s, neg := strings.CutPrefix(lit, "-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expText)
		if err != nil || e > 1e6 || e < -1e6 {
			return lit
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	var out string
	switch point := len(digits) + exp; {
	case exp >= 0 && point <= 21:
		out = digits + strings.Repeat("0", exp)
	case exp < 0 && point > 0:
		out = digits[:point] + "." + digits[point:]
	case exp < 0 && point > -6:
		out = "0." + strings.Repeat("0", -point) + digits
	default:
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		e := point - 1
		if e >= 0 {
			out += "e+" + strconv.Itoa(e)
		} else {
			out += "e-" + strconv.Itoa(-e)
		}
	}
	if neg {
		out = "-" + out
	}
	return out
}
