package cli

import (
	"fmt"

	"github.com/holdline/holdline/vad/corpus"
	"github.com/holdline/holdline/vad/eval"
)

// recordingsOf turns synthesised clips into what a recording of them would
// hold, for --export and --open-loop: the microphone as it heard the agent
// play on uninterrupted (Near), what the agent played (Far), and each
// clip's earlier turn with the echo the microphone heard of it, so that
// the canceller is warmed as it is on the synthesised scenes.
func recordingsOf(clips []corpus.Clip, scenes []eval.Scene) []corpus.Recording {
	out := make([]corpus.Recording, len(clips))
	for i, c := range clips {
		out[i] = corpus.Recording{
			ID: c.Name, Kind: c.Kind, Rate: c.Rate,
			Mic: c.Near, Reference: c.Far,
			UserOnset: c.UserOnset, GainDB: c.GainDB,
			AgentText: c.AgentText, UserText: c.UserText,
			UserLevelDB: c.UserLevelDB, UserVoice: c.Voice,
		}
		if sc := scenes[i]; len(sc.Before) > 0 {
			out[i].EarlierReference, out[i].EarlierMic = sc.Before, sc.HeardBefore()
		}
	}
	return out
}

// scenesOfRecordings turns recordings into evaluation scenes played from
// the recorded microphone.
func scenesOfRecordings(recs []corpus.Recording) []eval.Scene {
	out := make([]eval.Scene, len(recs))
	for i, r := range recs {
		out[i] = eval.Scene{
			Name: r.ID, Kind: eval.Kind(r.Kind), Rate: r.Rate,
			Agent: r.Reference, AgentText: r.AgentText,
			Mic:       r.Mic,
			UserOnset: r.UserOnset, GainDB: r.GainDB,
			NoEcho:      r.GainDB <= corpus.NoEchoGainDB,
			UserLevelDB: r.UserLevelDB, Voice: r.UserVoice,
			Before: r.EarlierReference, BeforeMic: r.EarlierMic,
		}
	}
	return out
}

// checkTexts makes sure the transcript check can work on recs. Pocketsphinx
// listens on a grammar of the corpus's words, as it does on the synthesised
// corpus: without the agent's words it cannot tell them from the caller's,
// and without the caller's it forces an interruption into the words it has
// (the agent's, "uh-huh"), which rules the interruption out. Figures
// measured so would be wrong, not just rougher.
func checkTexts(recs []corpus.Recording) error {
	var first *corpus.Recording
	missing := 0
	for i := range recs {
		r := &recs[i]
		if r.AgentText == "" || (r.Kind != corpus.Echo && r.UserText == "") {
			if first == nil {
				first = r
			}
			missing++
		}
	}
	if missing == 0 {
		return nil
	}
	what := "agent_text"
	if first.AgentText != "" {
		what = "caller_text"
	}
	return fmt.Errorf("bargein-eval: %d of %d clips lack agent_text or caller_text (clip %q has no %s): "+
		"the transcript check recognises the corpus's words only; give agent_text for every clip and caller_text "+
		"for barge_in and backchannel clips, or run with --no-transcripts", missing, len(recs), first.ID, what)
}
