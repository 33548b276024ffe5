package tools

import "context"

// Playout lets a tool wait for the agent's spoken preamble ("let me check
// that") to finish before it acts: a tool that transfers or ends the call
// must not cut the agent off mid-sentence.
type Playout interface {
	// WaitPlayout returns when the audio of the turn that made the call has
	// played out (or been cut), or with an error when ctx is done first.
	WaitPlayout(ctx context.Context) error
}

type playoutKey struct{}

// WithPlayout returns a copy of ctx carrying p. The session attaches the turn
// that made the call.
func WithPlayout(ctx context.Context, p Playout) context.Context {
	return context.WithValue(ctx, playoutKey{}, p)
}

// WaitPlayout waits on the Playout attached to ctx. With none attached (a
// tool run outside a session, in a test say) there is nothing to wait for
// and it returns nil at once.
func WaitPlayout(ctx context.Context) error {
	p, _ := ctx.Value(playoutKey{}).(Playout)
	if p == nil {
		return nil
	}
	return p.WaitPlayout(ctx)
}

// CallInfo describes the call being run.
type CallInfo struct {
	ID   string // the call's id, as the model gave it or the session assigned it
	Name string // the tool's name
	// Epoch is the agent turn that made the call; a result that arrives after
	// the turn was superseded is judged against it.
	Epoch uint64
	// IdempotencyKey is the same for every call of this tool with the same
	// arguments in this session. Pass it on to the system the tool acts on
	// (a payment API's Idempotency-Key header, a booking's client
	// reference) so that even a retry outside the session's control does
	// the thing once.
	IdempotencyKey string
}

type callInfoKey struct{}

// WithCallInfo returns a copy of ctx carrying ci. The session attaches it to
// every call it runs.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoFrom returns the CallInfo attached to ctx, if any. Tools use it to
// make a mutation idempotent (the call ID as an idempotency key) or to log.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}
