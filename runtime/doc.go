// Package runtime is the session core: one conductor goroutine per call that
// owns all session state (floor, epochs, chat context, tool calls) and never
// waits. Edges — the model stream, speech synthesis, the paced audio output,
// tool bodies, speech recognition — run in goroutines of their own, post
// timestamped inputs to the conductor's mailbox and obey its commands
// (start, cancel, flush). An edge that hangs can delay only its own result,
// and every such result has a deadline.
//
// Every agent turn gets an epoch. Barge-in cancels the turn's context, flushes
// the output up to its epoch and truncates the assistant message to the words
// that were actually played; anything an old epoch produces later is dropped
// where it is met. A Turn exposes Interrupted, PlayoutStopped and Settled as
// separate signals, and Turn.WaitPlayout returns ErrInterrupted the moment the
// turn is interrupted.
package runtime
