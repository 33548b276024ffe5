package engine

import "time"

// echoTailMargin is what echo may last beyond its delay once the output
// pauses: the room's decay and the frames in flight.
const echoTailMargin = 150 * time.Millisecond

// EchoTail is how long echo may last after the output pauses on a line
// whose echo comes back after delay: what InputJudge.SetEchoTail is given,
// by a call from its canceller's delay estimate, by the simulator from its
// scripted line's.
func EchoTail(delay time.Duration) time.Duration { return delay + echoTailMargin }
