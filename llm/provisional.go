package llm

// Provisional outputs. Every tool call in a request's context has exactly
// one result right after it, because providers reject a call without an
// output; a call still in flight when a request goes out is shown with one
// of these as its output. When the call ends, its real result takes the
// provisional one's place, next to the call, and every later request
// carries it. A result the caller still needs to hear gets a request of
// its own (ReasonFollowUp or ReasonToolResult); one for a call that ended
// only because the caller cut in (cancelled, or never started) just rides
// along with the next request. A model shown a provisional output must not
// call the tool again for the same thing, nor tell the caller it failed.
const (
	// ProvisionalRunning is shown for a call that is running: the caller
	// spoke again before it finished.
	ProvisionalRunning = `{"status":"still running","note":"the result will follow when it is ready"}`
	// ProvisionalDetached is shown for a call run with the Detach policy
	// (a long job whose result comes whenever it is ready).
	ProvisionalDetached = `{"status":"running in the background","note":"the result will follow when it is ready; do not call it again"}`
	// ProvisionalDeferred is shown for a call with the Defer policy that
	// waits for the model's answer to finish playing before it starts.
	ProvisionalDeferred = `{"status":"waiting to start","note":"it starts once your reply has been spoken"}`
)

// IsProvisional reports whether output, a tool result's Output, is one the
// session shows for a call still in flight rather than the call's own
// result.
func IsProvisional(output string) bool {
	switch output {
	case ProvisionalRunning, ProvisionalDetached, ProvisionalDeferred:
		return true
	}
	return false
}
