package engine

// phase is where an agent turn is. A turn answers: its model streams and
// its audio plays, and either may finish first (all of an answer's audio
// can play out while the model is still naming tool calls). Once both
// have, it waits for its calls; then it has settled. A turn cut short
// finishes both at once.
type phase uint8

const (
	answering phase = iota // the model streams; the audio is being made or played
	streamed               // the model is done; the audio still plays
	voiced                 // the audio has played out; the model still streams
	answered               // both are done; its calls may still be running
	settled                // nothing of the turn is in flight
)

// progress is what can finish of a turn.
type progress uint8

const (
	modelFinished   progress = iota // the model's answer is complete
	playoutFinished                 // the turn's audio stopped: played out, or cut
	callsIn                         // every call's result is in (detached calls aside)
)

// phaseMoves is the one table of a turn's phases: from each phase, what
// finishing moves it where. Anything not in it leaves the phase as it is.
var phaseMoves = [...]map[progress]phase{
	answering: {modelFinished: streamed, playoutFinished: voiced},
	streamed:  {playoutFinished: answered},
	voiced:    {modelFinished: answered},
	answered:  {callsIn: settled},
	settled:   {},
}

func (p phase) String() string {
	return [...]string{"answering", "streamed", "voiced", "answered", "settled"}[p]
}

// finish records that something of the turn finished, moving it as
// phaseMoves says; it reports whether the turn moved.
func (t *turnState) finish(what progress) bool {
	next, ok := phaseMoves[t.phase][what]
	if ok {
		t.phase = next
	}
	return ok
}

// modelDone reports whether the turn's model answer is complete (or was
// cut).
func (t *turnState) modelDone() bool {
	return t.phase == streamed || t.phase >= answered
}

// playoutDone reports whether the turn's audio has stopped: all of it
// played, or cut.
func (t *turnState) playoutDone() bool {
	return t.phase == voiced || t.phase >= answered
}

// holdsFloor reports whether the turn's model stream or audio is still going.
func (t *turnState) holdsFloor() bool { return t.phase < answered }

// standing is what a turn's own results will lead to: a follow-up of its
// own, unless newer input came (the results ride along with the answer to
// it), or the caller cut into the turn itself.
type standing uint8

const (
	followUpDue  standing = iota // it will ask the model about its results once they are in
	followUpSent                 // it has asked
	superseded                   // newer input came after it began
	cutShort                     // the caller cut into it: its stream and audio stopped
)

// overtaking is what can happen to a turn's standing.
type overtaking uint8

const (
	followedUp  overtaking = iota // its follow-up went out
	newerInput                    // the caller's input, a reply asked for, a lost line
	interrupted                   // it was cut while it held the floor
)

// standingMoves is the one table of a turn's standings, as phaseMoves is
// of its phases.
var standingMoves = [...]map[overtaking]standing{
	followUpDue:  {followedUp: followUpSent, newerInput: superseded, interrupted: cutShort},
	followUpSent: {newerInput: superseded, interrupted: cutShort},
	superseded:   {interrupted: cutShort},
	cutShort:     {},
}

func (s standing) String() string {
	return [...]string{"follow_up_due", "follow_up_sent", "superseded", "cut_short"}[s]
}

// overtake records what happened to the turn, moving its standing as
// standingMoves says; it reports whether it moved.
func (t *turnState) overtake(what overtaking) bool {
	next, ok := standingMoves[t.standing][what]
	if ok {
		t.standing = next
	}
	return ok
}

// awaitsFollowUp reports whether the turn will ask the model about its own
// results once they are in: nobody has cut in since it began.
func (t *turnState) awaitsFollowUp() bool { return t.standing == followUpDue }

// wasCut reports whether the caller cut into the turn.
func (t *turnState) wasCut() bool { return t.standing == cutShort }

// overtaken reports whether newer input came after the turn began.
func (t *turnState) overtaken() bool { return t.standing >= superseded }
