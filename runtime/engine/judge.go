package engine

import (
	"time"

	"github.com/holdline/holdline/vad"
)

// InputJudge is the caller-audio stage without the audio: the barge-in
// arbiter, what it is told about the agent's output, and what its decisions
// tell the conductor. A live session runs one per call behind its echo
// canceller and detector; the simulator runs one on scripted scores and
// transcripts, so a scenario's caller is judged as a call's is. It is not
// safe for concurrent use.
type InputJudge struct {
	arb      *vad.Arbiter
	echoFree bool
	// turn says a turn of the agent's held the floor at the last frame
	// (Agent).
	turn bool
}

// NewInputJudge returns the judge cfg describes: its BargeIn settings with
// its Segmenter, and EchoFree.
func NewInputJudge(cfg InputConfig) *InputJudge {
	bc := cfg.BargeIn
	bc.Segmenter = cfg.Segmenter
	return &InputJudge{arb: vad.NewArbiter(bc), echoFree: cfg.EchoFree}
}

// Agent says what the agent's output is doing as the caller's audio hears
// it: audible says its voice may be in the frame (the echo canceller's far
// end was active), turn that a turn of the agent's holds the floor, played
// that some of that turn's audio has played. A caller whose device removes
// the agent's voice (EchoFree) never hears it.
func (j *InputJudge) Agent(audible, turn, played bool) vad.Agent {
	j.turn = turn
	switch {
	case audible && !j.echoFree:
		return vad.AgentAudible
	case turn && played:
		return vad.AgentTurn
	case turn:
		return vad.AgentThinking
	}
	return vad.AgentSilent
}

// Frame judges one frame's speech score, d long, and returns the arbiter's
// decision and the input it means for the conductor (nil for none).
func (j *InputJudge) Frame(prob float32, d time.Duration, agent vad.Agent) (vad.Decision, Input) {
	dec := j.arb.Frame(prob, d, agent)
	return dec, j.decisionInput(dec)
}

// Transcript judges a recognition result, given the words the agent played
// lately, and returns the arbiter's decision and the inputs for the
// conductor in order: the decision's, then the transcript as the caller's
// words or as ignored (a backchannel, the agent's own words, words the
// voice activity did not confirm).
func (j *InputJudge) Transcript(text string, final bool, played string, agent vad.Agent) (vad.Decision, []Input) {
	judge := j.arb.Transcript
	if final {
		judge = j.arb.Final
	}
	dec, keep := judge(text, played, agent)
	if final && !j.Judging(text) {
		dec = j.arb.NoWords()
	}
	var ins []Input
	if in := j.decisionInput(dec); in != nil {
		ins = append(ins, in)
	}
	if dec.Action == vad.Confirm && dec.Ended > 0 {
		// A short sound confirmed by its words has ended already: the
		// arbiter would have said so after MinSilence of quiet.
		silence := j.arb.Config().Segmenter.MinSilence
		ins = append(ins, UserSpeechStopped{Ago: max(dec.Ended-silence, 0), Silence: min(dec.Ended, silence)})
	}
	if final && !keep && dec.Reason == vad.ReasonBackchannel && !j.turn {
		// A backchannel keeps a speaking agent going; once its turn is
		// over the same words ("yes", "okay", "sure") answer it: the
		// sound began in the echo tail of its last words, which is all
		// that made them look like talk over it.
		keep = true
	}
	switch {
	case keep:
		ins = append(ins, UserTranscript{Text: text, Final: final})
	case dec.Reason != "":
		ins = append(ins, TranscriptIgnored{Text: text, Final: final, Reason: dec.Reason})
	case final && !j.Judging(text):
		// An utterance without words: the conductor may be waiting for
		// its final to end the caller's turn.
		ins = append(ins, UserTranscript{Final: true})
	}
	return dec, ins
}

// Judging reports whether a transcript of text would be judged against
// what the agent played: only words are.
func (j *InputJudge) Judging(text string) bool { return len(vad.Words(text)) > 0 }

// SetEchoTail sets how long echo may last after the output pauses (the
// echo canceller's delay estimate plus a margin).
func (j *InputJudge) SetEchoTail(d time.Duration) { j.arb.SetEchoTail(d) }

// NoRecognizer tells the judge no recogniser listens to the caller: a
// short sound over the agent resumes it as soon as it ends, with no wait
// for words that cannot come.
func (j *InputJudge) NoRecognizer() { j.arb.SetWordsWait(-1) }

// EchoTail is how long echo may last after the output pauses.
func (j *InputJudge) EchoTail() time.Duration { return j.arb.Config().EchoTail }

// Quiet reports whether the judge has nothing pending: the caller does not
// hold the floor and no suspicion waits for a verdict. Frames of silence
// change nothing then but the passing of time.
func (j *InputJudge) Quiet() bool { return !j.arb.Speaking() && !j.arb.Suspecting() }

// decisionInput is what an arbiter decision tells the conductor.
func (j *InputJudge) decisionInput(d vad.Decision) Input {
	switch d.Action {
	case vad.SpeechStart:
		return UserSpeechStarted{}
	case vad.SpeechStop:
		return UserSpeechStopped{Silence: j.arb.Config().Segmenter.MinSilence}
	case vad.Suspect:
		return BargeInSuspected{Reason: d.Reason, Verdict: d.Within}
	case vad.Confirm:
		return BargeInConfirmed{Reason: d.Reason}
	case vad.Resume:
		return BargeInResumed{Reason: d.Reason}
	}
	return nil
}
