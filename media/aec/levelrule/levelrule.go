// Package levelrule is the echo canceller's level rule: while the agent's
// voice can echo in a frame of the caller's audio, a frame quieter than
// that voice by the rule's margin is taken for echo alone. Package aec
// applies it to the levels it measures on a call; the simulator (package
// sim) applies it to a scripted line, so that a scenario's echo is judged
// by the rule a call's is. It is pure arithmetic, free of cgo.
package levelrule

// Path is what the canceller knows of the line's echo.
type Path int

// What the canceller can know of the line's echo.
const (
	// Unknown: not enough of the agent has been played to tell.
	Unknown Path = iota
	// None: the agent's audio does not come back; nothing the caller
	// says is taken for echo.
	None
	// Present: the agent's audio comes back at a measured gain.
	Present
)

const (
	// EchoOnlyDB is the rule before the canceller's filter has
	// converged: a line returns its echo at least 6 dB down (the G.168
	// assumption network cancellers make), and 3 dB of that is margin.
	EchoOnlyDB = -3.0
	// ConvergedEchoDB bounds the rule once the filter has converged:
	// the output's residual echo is lower still, by the filter's
	// enhancement (ConvergedDB or more).
	ConvergedEchoDB = -15.0
	// ConvergedDB is the echo return loss enhancement of a converged
	// filter.
	ConvergedDB = 12.0
	// MarginDB is how much louder than the measured echo a frame must be
	// to be the caller before the filter converges: the gain is fitted
	// to the direct path, and a room's reflections and speech's swings
	// from frame to frame put some echo frames above it (with 6 dB the
	// corpus's first turns paused on echo 48% of the time instead of
	// 42%). The rule is never stricter than the one for an unmeasured
	// line.
	MarginDB = 9.0
)

// Rule returns the level rule in force, in dB below the loudest far audio
// that can echo in a frame, for a line whose echo is path (at gainDB when
// Present) and a filter that has converged or not; ok is false when
// nothing is taken for echo.
func Rule(path Path, gainDB float64, converged bool) (db float64, ok bool) {
	switch path {
	case None:
		return 0, false
	case Present:
		db = min(gainDB+MarginDB, EchoOnlyDB)
		if converged {
			db = min(db-ConvergedDB, ConvergedEchoDB)
		}
		return db, true
	}
	if converged {
		return ConvergedEchoDB, true
	}
	return EchoOnlyDB, true
}
