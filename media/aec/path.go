package aec

import (
	"fmt"
	"math"
	"time"

	"github.com/holdline/holdline/media/aec/levelrule"
)

// EchoState is what the canceller has found out about the line's echo.
type EchoState int32

// Echo states.
const (
	// EchoUnknown: not enough of the agent has been played to tell. The
	// level rule assumes a line returning echo 6 dB down.
	EchoUnknown EchoState = iota
	// EchoNone: the agent's audio has not come back; the line (a digital
	// trunk, a carrier stream, a headset) has no echo to speak of, and
	// nothing the caller says is taken for it.
	EchoNone
	// EchoPresent: the agent's audio comes back, at the delay and gain
	// measured.
	EchoPresent
)

func (s EchoState) String() string {
	switch s {
	case EchoUnknown:
		return "unknown"
	case EchoNone:
		return "none"
	case EchoPresent:
		return "present"
	}
	return fmt.Sprintf("EchoState(%d)", int32(s))
}

// EchoPath is the line's echo as measured: none, or its delay (as Delay
// counts it) and its gain relative to what was played.
type EchoPath struct {
	State  EchoState
	Delay  time.Duration
	GainDB float64
}

// Evidence for the echo path.
const (
	// noEchoDB: near audio this far below the far end that can echo in
	// it, over far-active frames, means the line returns no echo worth
	// the name (an echo that weak is below what the detector hears); a
	// noisy line stays unmeasured rather than be taken for a clean one.
	noEchoDB = -30.0
	// noEchoAfter is how much far-active audio must have been heard,
	// beyond the longest delay searched, before a line can be judged to
	// have no echo: any echo would have arrived by then.
	noEchoAfter = 300 * time.Millisecond
	// gainFloorDB bounds the level rule on a line whose echo is
	// measured very weak.
	gainFloorDB = -40.0
)

var noEchoRatio = math.Pow(10, noEchoDB/10)

// EchoPath reports what the canceller has measured of the line's echo.
func (c *Canceller) EchoPath() EchoPath {
	p := EchoPath{State: EchoState(c.pathState.Load())}
	if p.State == EchoPresent {
		p.Delay, _ = c.Delay()
		p.GainDB = math.Float64frombits(c.pathGain.Load())
	}
	return p
}

// weighPath adds one frame's evidence about the echo path: the near and
// far powers of far-active frames. A line whose near end stays far below
// the far end, once any echo would have arrived, has none; a delay lock
// (accept) says it has one, whatever came before.
func (c *Canceller) weighPath(active bool, nearPow, farPow float64) {
	if !active || EchoState(c.pathState.Load()) != EchoUnknown {
		return
	}
	const a = 0.1
	c.pathNear += a * (nearPow - c.pathNear)
	c.pathFar += a * (farPow - c.pathFar)
	c.pathFrames++
	if c.pathFrames >= c.pathNeeds && c.pathNear < c.pathFar*noEchoRatio {
		c.pathState.Store(int32(EchoNone))
	}
}

// measureGain records the echo's gain at the locked delay d, in samples.
func (c *Canceller) measureGain(d int64) {
	g, ok := c.est.gainAt(d)
	if !ok {
		return
	}
	c.pathGain.Store(math.Float64bits(max(g, gainFloorDB)))
	c.pathState.Store(int32(EchoPresent))
}

// echoOnlyRatioFor is the level rule in force: how much quieter than the
// loudest far audio that can echo in it a frame must be to be taken for
// echo alone, as a power ratio; 0 when nothing is taken for echo.
func (c *Canceller) echoOnlyRatioFor() float64 {
	path, gain := levelrule.Unknown, 0.0
	switch EchoState(c.pathState.Load()) {
	case EchoNone:
		path = levelrule.None
	case EchoPresent:
		path, gain = levelrule.Present, math.Float64frombits(c.pathGain.Load())
	}
	db, ok := levelrule.Rule(path, gain, c.converged)
	if !ok {
		return 0
	}
	return math.Pow(10, db/10)
}
