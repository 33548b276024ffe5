package engine

// agentTurns are the agent's turns: the epoch counter, and the turns not
// yet settled.
type agentTurns struct {
	epoch uint64
	// agentEpoch is the epoch at which the current agent took over: a
	// reply asked for while no turn has started since is its greeting.
	agentEpoch uint64
	live       []*turnState // not yet settled, in epoch order
}
