package tools

// State is where a call stands. Every call ends in exactly one terminal
// state, which records what really happened.
type State string

// Call states.
const (
	StateRequested State = "requested"
	StateDeferred  State = "deferred"
	StateRunning   State = "running"

	StateSucceeded State = "succeeded"
	StateFailed    State = "failed"
	StateCancelled State = "cancelled"
	StateTimedOut  State = "timed_out"
	// StateUnknown is a mutation whose intent was recorded but whose
	// outcome was not (a crash in between).
	StateUnknown State = "unknown"
)

// Terminal reports whether s is a final state.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateTimedOut, StateUnknown:
		return true
	}
	return false
}
