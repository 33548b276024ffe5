package engine

import "github.com/holdline/holdline/tools"

// Agent is what the core knows of an agent: its name, its instructions and
// its tools, and what a key press means to it. The providers that make
// it talk (a model, a voice, a recogniser) are the edges' business:
// runtime.Agent has them, and runtime.New describes it to the core.
type Agent struct {
	// Name identifies the agent in events, states and handoffs.
	Name string
	// Instructions are the system prompt of every model request.
	Instructions string
	// Tools the model may call; their names must differ.
	Tools []*tools.Tool
	// DTMFEventOnly leaves a key the caller pressed an event alone; by
	// default it is also a user turn, written as DTMFText says.
	DTMFEventOnly bool
	// Phrases are what callers say to the agent: a turn whose words are
	// one of them is complete (Config.EndpointingMin).
	Phrases []string
}

// DTMFText is the user turn a key press becomes (see Agent.DTMFEventOnly).
func DTMFText(digit rune) string { return "Pressed " + string(digit) }
