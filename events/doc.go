// Package events is the recovery-event stream: every decision the session
// core makes (speech detected, barge-in, turn started or interrupted, what was
// played, tool states, model requests, provider errors) becomes one typed
// Event. Tests and the simulator check invariants on the stream; operators
// read it as JSONL.
//
// Publishing never blocks the session core: each subscriber has a bounded
// buffer, and a subscriber that falls behind loses events (counted and
// reported) rather than stalling the call.
package events
