package engine

import "time"

// floor is who holds the floor, from the caller's side: whether they are
// speaking, the silence that ends their turn (endpointing), a pause of the
// agent's output while a suspected barge-in is judged, and what the agent
// said last, which the caller may still hear as echo.
type floor struct {
	userSpeaking bool

	// paused: a suspected barge-in holds the output until a verdict, or
	// until pauseID's deadline.
	paused     bool
	pauseTimer Timer
	pauseID    uint64

	// endpointTimer runs the silence that ends the caller's turn
	// (endpointID), or then the wait for its final transcript
	// (transcriptID).
	endpointTimer Timer
	endpointID    uint64
	transcriptID  uint64
	// silentSince is when the caller's latest silence began.
	silentSince time.Time

	// timerID numbers the timers, so that one that fires after it was
	// stopped or replaced is known and ignored.
	timerID uint64

	// lastPlayed is the text of the latest turn whose playout stopped,
	// for telling the agent's echo from the caller.
	lastPlayed   string
	lastPlayedAt time.Time
}
