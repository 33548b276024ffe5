package tools

import (
	"context"
	"encoding/json"
)

// Policy says what happens to a call when the user interrupts the turn that
// made it.
type Policy string

// Interrupt policies.
const (
	// Complete keeps the call running and keeps its result: the next
	// request to the model sees it. The default for a [Read].
	Complete Policy = "complete"
	// Cancel cancels the call's context. A body that stops is recorded
	// cancelled; one that finishes anyway is recorded as it finished, and
	// the model is told what really happened.
	Cancel Policy = "cancel"
	// Defer holds a mutation until the model response that asked for it
	// has finished and its spoken preamble has played out, both without
	// interruption. A caller who says "wait!" during "let me book that"
	// stops the booking: the call is recorded as not executed and the model
	// is told so. The default for a [Mutation].
	Defer Policy = "defer"
	// Detach is for long-running work: the turn does not wait for the call,
	// the model is told it is running, and the result, whenever it lands,
	// is committed and gets an inference of its own once the floor is free.
	Detach Policy = "detach"
)

// DefaultPolicy is the policy of a tool built without [WithInterruptPolicy].
func DefaultPolicy(e Effect) Policy {
	if e == Read {
		return Complete
	}
	return Defer
}

func (p Policy) valid() bool {
	switch p {
	case Complete, Cancel, Defer, Detach:
		return true
	}
	return false
}

// ParsePolicy returns the policy named s.
func ParsePolicy(s string) (Policy, bool) {
	p := Policy(s)
	return p, p.valid()
}

// A Reconciler finds out whether a mutation whose outcome is unknown took
// effect: it asks the system the tool acts on (by the call's idempotency key,
// say). It runs under the tool's deadline.
type Reconciler func(ctx context.Context, call CallInfo, args json.RawMessage) (Reconciliation, error)

// Reconciliation is a Reconciler's finding.
type Reconciliation struct {
	// Done reports that the action took effect; Output is then its result
	// as the model should see it.
	Done   bool
	Output string
}
