// Package llm defines what the session core needs from a language model: a
// streaming, cancellable request that yields text and tool-call deltas, and
// the chat context (system, user, assistant, tool-call and tool-result items)
// the request carries.
//
// Providers live in subpackages or elsewhere; the scripted package has a
// deterministic model for tests and simulations.
package llm
