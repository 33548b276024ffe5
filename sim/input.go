package sim

import (
	"math"
	"time"

	"github.com/holdline/holdline/media/aec/levelrule"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/vad"
)

// The simulated caller's audio, as the caller-audio stage sees it after
// the echo canceller: a speech score per 20 ms frame (what the detector
// would say) and the recogniser's transcripts. Both go through
// engine.InputJudge, the barge-in arbiter a call runs, on the virtual
// clock.
const (
	// frameLen is the caller audio frame.
	frameLen = 20 * time.Millisecond
	// soundScore is the detector's score of a frame holding the caller's
	// voice or a noise: the energy detector, the default, hears loudness,
	// so a cough scores like a word.
	soundScore = 0.9
	// echoPassesJudge is the echo gain above which the canceller's level
	// judge, before it knows the line, cannot tell the echo from a caller.
	echoPassesJudge = levelrule.EchoOnlyDB
	// farTail is how long after the agent's audio the canceller still
	// counts the far end as active (its filter's tail).
	farTail = 20 * time.Millisecond
	// noiseDuration is a noise's length when the file gives none.
	noiseDuration = 300 * time.Millisecond
)

// input is the caller-audio edge. It judges frames only while something
// can change (a sound, echo, or a decision pending); between, a single
// frame of silence as long as the gap keeps the arbiter's audio time equal
// to the call's.
type input struct {
	r      *run
	judge  *engine.InputJudge
	sounds []sound
	// judged is the audio time judged so far; tick is the next frame's
	// work while frames are running.
	judged time.Duration
	tick   engine.Timer
}

type sound struct {
	from, to time.Duration
	levelDB  float64 // relative to the agent's voice
}

// minSilence is the detector's hangover for a scenario: the silence that
// ends speech, in whole frames. The scenario's endpointing counts from the
// end of speech, so the core's own endpointing timer takes the rest.
func minSilence(sc *Scenario) time.Duration {
	least := sc.VAD.Endpointing
	if sc.VAD.EndpointingMin > 0 {
		least = min(least, sc.VAD.EndpointingMin)
	}
	d := min(vad.DefaultMinSilence, least/2)
	return max(d/frameLen*frameLen, time.Nanosecond)
}

func newInput(r *run) *input {
	sc := r.sc
	onset := max(sc.VAD.Onset, time.Nanosecond) // 0 would mean the default
	cfg := engine.InputConfig{
		Segmenter: vad.SegmenterConfig{MinSpeech: onset, MinSilence: minSilence(sc)},
		BargeIn:   vad.ArbiterConfig{SpeakingMinSpeech: onset},
		EchoFree:  sc.Line.EchoFree,
	}
	in := &input{r: r, judge: engine.NewInputJudge(cfg)}
	if sc.Line.Echo != nil {
		// A call's canceller finds the delay within its first seconds.
		in.judge.SetEchoTail(engine.EchoTail(sc.Line.Echo.Delay))
	}
	return in
}

// schedule puts the caller's sounds and transcripts on the clock.
func (in *input) schedule() {
	for _, u := range in.r.sc.User {
		if u.Inject != "" {
			continue
		}
		s := sound{from: u.At, to: u.At + soundLength(u), levelDB: u.LevelDB}
		in.sounds = append(in.sounds, s)
		in.r.sched.at(s.from, srcUser, in.wake)
		if u.Spoken() {
			text := u.Say + u.Backchannel
			in.r.sched.at(s.to+in.r.sc.STT.Latency, srcSTT, func() { in.transcript(text) })
		}
	}
}

// soundLength is how long a caller's sound lasts.
func soundLength(u UserAction) time.Duration {
	switch {
	case u.Duration > 0:
		return u.Duration
	case u.Noise != "":
		return noiseDuration
	}
	return speechLength(u)
}

// wake starts the frames, if they are not running, with the frame that
// ends on the next frame boundary after now.
func (in *input) wake() {
	if in.tick != nil {
		return
	}
	now := in.r.sched.now()
	next := (now/frameLen + 1) * frameLen
	in.tick = in.r.sched.at(next, srcUser, in.frame)
}

// outputResumed: the agent's voice is back, and with it any echo.
func (in *input) outputResumed() {
	if in.echoCounts() {
		in.wake()
	}
}

// frame judges the frame that ends now.
func (in *input) frame() {
	in.tick = nil
	now := in.r.sched.now()
	from := now - frameLen
	if gap := from - in.judged; gap > 0 {
		in.judge.Frame(0, gap, in.agent(in.judged, from))
	}
	in.judged = now
	_, decided := in.judge.Frame(in.score(from, now), frameLen, in.agent(from, now))
	if decided != nil {
		in.r.handle(decided)
	}
	if in.busy(now) {
		in.tick = in.r.sched.at(now+frameLen, srcUser, in.frame)
	}
}

// busy reports whether the next frame can change anything.
func (in *input) busy(now time.Duration) bool {
	if !in.judge.Quiet() || in.echoCounts() && in.r.edges.player.playingWithin(now, now-in.echoDelay()-frameLen, now+frameLen) {
		return true
	}
	for _, s := range in.sounds {
		if s.from < now+frameLen && s.to > now-frameLen {
			return true
		}
	}
	// A sound starting later wakes the frames, and so does audio queued
	// later while the echo counts (echoFrom).
	return false
}

// echoFrom wakes the frames when audio queued to play from start can echo.
func (in *input) echoFrom(start time.Duration) {
	if in.echoCounts() {
		in.r.sched.at(max(start, in.r.sched.now()), srcUser, in.wake)
	}
}

// score is the detector's score of the frame [from, to): the caller's
// sound if it fills half the frame and the canceller's level rule does not
// take it for echo, else the echo that gets past the canceller, else
// silence.
func (in *input) score(from, to time.Duration) float32 {
	for _, s := range in.sounds {
		if min(s.to, to)-max(s.from, from) >= frameLen/2 {
			if in.takenForEcho(s.levelDB, from, to) {
				break
			}
			return soundScore
		}
	}
	if in.echoCounts() {
		d := in.echoDelay()
		if in.r.edges.player.playingWithin(to, from-d, to-d) {
			return soundScore
		}
	}
	return 0
}

// echoCounts reports whether the line's echo can reach the detector: it is
// loud enough to pass the canceller's level judge, and the canceller has
// not yet heard enough of the agent to remove it.
func (in *input) echoCounts() bool {
	e := in.r.sc.Line.Echo
	if e == nil || e.GainDB <= echoPassesJudge || math.IsNaN(e.GainDB) {
		return false
	}
	return in.r.edges.player.playedTotal(in.r.sched.now()) < e.Learn
}

// pathEvidence is how much of the agent's audio the canceller hears
// before it knows the line: that it has no echo (the audio did not come
// back), or the echo's delay and gain.
const pathEvidence = 800 * time.Millisecond

// takenForEcho applies the canceller's level rule (levelrule.Rule) to a
// caller's sound levelDB relative to the agent's voice, in the frame
// [from, to): what the canceller knows of the scripted line by then, and
// whether it has learnt it (its filter converged).
func (in *input) takenForEcho(levelDB float64, from, to time.Duration) bool {
	if !in.r.edges.player.playingWithin(to, from-in.echoDelay()-farTail, to) {
		return false
	}
	heard := in.r.edges.player.playedTotal(to)
	e := in.r.sc.Line.Echo
	path, gain := levelrule.Unknown, 0.0
	switch {
	case heard < pathEvidence:
	case e == nil:
		path = levelrule.None
	default:
		path, gain = levelrule.Present, e.GainDB
	}
	rule, ok := levelrule.Rule(path, gain, e != nil && heard >= e.Learn)
	return ok && levelDB <= rule
}

func (in *input) echoDelay() time.Duration {
	if e := in.r.sc.Line.Echo; e != nil {
		return e.Delay
	}
	return 0
}

// agent is what the agent's output did during [from, to) as the arbiter
// is told: audible when its audio (delayed by the line) may be in the
// frame, as the canceller's far-end activity says on a call.
func (in *input) agent(from, to time.Duration) vad.Agent {
	audible := in.r.edges.player.playingWithin(to, from-in.echoDelay()-farTail, to)
	return in.judge.Agent(audible, in.r.core.Speaking(), in.r.core.Played())
}

// transcript hands the recogniser's final transcript to the judge.
func (in *input) transcript(text string) {
	now := in.r.sched.now()
	played := ""
	if in.judge.Judging(text) {
		played = in.r.core.RecentlyPlayed()
	}
	_, inputs := in.judge.Transcript(text, true, played, in.agent(now-frameLen, now))
	for _, i := range inputs {
		in.r.handle(i)
	}
	// A verdict may be pending on frames again (or no longer).
	if !in.judge.Quiet() {
		in.wake()
	}
}
