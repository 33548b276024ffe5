package engine

import "github.com/holdline/holdline/tools"

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
