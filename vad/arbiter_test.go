package vad

import (
	"slices"
	"testing"
	"time"
)

const step = 20 * time.Millisecond

// feed pushes n frames of prob and returns the decisions that were not
// NoAction, with the audio time at which each was made.
type made struct {
	at time.Duration
	d  Decision
}

func feed(a *Arbiter, prob float32, d time.Duration, audible bool) []made {
	agent := AgentSilent
	if audible {
		agent = AgentAudible
	}
	return feedAgent(a, prob, d, agent)
}

func feedAgent(a *Arbiter, prob float32, d time.Duration, agent Agent) []made {
	var out []made
	for range int(d / step) {
		if dec := a.Frame(prob, step, agent); dec.Action != NoAction {
			out = append(out, made{a.Elapsed(), dec})
		}
	}
	return out
}

func TestArbiterTurnTakingWhileAgentSilent(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	feed(a, 0, 200*time.Millisecond, false)
	got := feed(a, 0.9, 400*time.Millisecond, false)
	if len(got) != 1 || got[0].d.Action != SpeechStart || got[0].d.Onset != 200*time.Millisecond {
		t.Fatalf("speech with the agent silent: %+v, want one speech_start with onset 200ms", got)
	}
	got = feed(a, 0, time.Second, false)
	if len(got) != 1 || got[0].d.Action != SpeechStop || got[0].at != 600*time.Millisecond+DefaultMinSilence {
		t.Fatalf("silence: %+v, want speech_stop %v after the speech", got, DefaultMinSilence)
	}
}

func TestArbiterEchoBelowRaisedThresholdIsIgnored(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	// 0.6 starts a turn when the agent is silent...
	if got := feed(NewArbiter(ArbiterConfig{}), 0.6, time.Second, false); len(got) != 1 || got[0].d.Action != SpeechStart {
		t.Fatalf("0.6 with the agent silent: %+v, want speech_start", got)
	}
	// ...but not while the agent is audible.
	if got := feed(a, 0.6, 3*time.Second, true); len(got) != 0 {
		t.Fatalf("0.6 while the agent speaks: %+v, want nothing", got)
	}
	// Short loud blips while the agent speaks are ignored too.
	for range 10 {
		if got := append(feed(a, 0.95, DefaultSpeakingMinSpeech-step, true), feed(a, 0.1, 100*time.Millisecond, true)...); len(got) != 0 {
			t.Fatalf("blips shorter than the minimum: %+v, want nothing", got)
		}
	}
}

func TestArbiterConfirmsSpeechThatOutlivesTheEcho(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	feed(a, 0.1, time.Second, true)
	got := feed(a, 0.9, 3*time.Second, true)
	// A sound shorter than ShortSound may be a backchannel or a cough:
	// its length confirms it at ShortSound from the onset.
	within := DefaultShortSound - DefaultSpeakingMinSpeech + DefaultResumeQuiet + DefaultWordsWait
	want := []made{
		{time.Second + DefaultSpeakingMinSpeech, Decision{Action: Suspect, Reason: ReasonOverAgent, Onset: time.Second, Within: within}},
		{time.Second + DefaultShortSound, Decision{Action: Confirm, Reason: ReasonSpeechContinued, Onset: time.Second}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("caller over the agent:\n got %+v\nwant %+v", got, want)
	}
	if !a.Speaking() {
		t.Fatal("after a confirmed barge-in the caller should hold the floor")
	}
	got = feed(a, 0, time.Second, false)
	if len(got) != 1 || got[0].d.Action != SpeechStop {
		t.Fatalf("after the barge-in ends: %+v, want speech_stop", got)
	}
}

func TestArbiterResumesWhenSpeechDiesWithTheOutput(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	got := feed(a, 0.9, 200*time.Millisecond, true) // suspect at DefaultSpeakingMinSpeech
	if len(got) != 1 || got[0].d.Action != Suspect {
		t.Fatalf("loud echo: %+v, want suspect", got)
	}
	// The output paused: the echo dies within the echo tail. Speech that
	// lasts no longer than that is not the caller.
	got = append(got, feed(a, 0.9, 200*time.Millisecond, false)...)
	got = append(got, feed(a, 0.05, time.Second, false)...)
	// Once the line has been quiet for ResumeQuiet past the tail, the
	// words are asked for; none come, and it resumes after WordsWait.
	wantAt := DefaultSpeakingMinSpeech + DefaultEchoTail + DefaultResumeQuiet
	if len(got) != 3 || got[1].d.Action != AwaitWords || got[1].at != wantAt ||
		got[2].d.Action != Resume || got[2].d.Reason != ReasonNotConfirmed || got[2].at != wantAt+DefaultWordsWait {
		t.Fatalf("echo that stops with the output: %+v, want await_words at %v, resume not_confirmed %v later", got, wantAt, DefaultWordsWait)
	}
	// The recogniser's empty final resumes at once.
	a3 := NewArbiter(ArbiterConfig{})
	feed(a3, 0.9, 200*time.Millisecond, true)
	feed(a3, 0.05, DefaultEchoTail, false) // awaiting words
	if d := a3.NoWords(); d.Action != Resume || d.Reason != ReasonNotConfirmed {
		t.Fatalf("an empty final: %+v, want resume not_confirmed", d)
	}
	// One long sound is not suspected again without a break.
	a2 := NewArbiter(ArbiterConfig{})
	feed(a2, 0.9, 200*time.Millisecond, true)
	if d, _ := a2.Transcript("mm-hmm", "", AgentAudible); d.Action != Resume {
		t.Fatalf("backchannel: %+v, want resume", d)
	}
	if got = feed(a2, 0.9, 3*time.Second, true); len(got) != 0 {
		t.Fatalf("the same sound going on: %+v, want no new suspicion", got)
	}
	got = append(feed(a2, 0.1, 40*time.Millisecond, true), feed(a2, 0.9, 200*time.Millisecond, true)...)
	if len(got) != 1 || got[0].d.Action != Suspect {
		t.Fatalf("after a break: %+v, want a new suspicion", got)
	}
}

func TestArbiterWithoutResumeConfirmsAtOnce(t *testing.T) {
	a := NewArbiter(ArbiterConfig{NoResume: true})
	got := feed(a, 0.9, 300*time.Millisecond, true)
	if len(got) != 1 || got[0].d.Action != Confirm || got[0].d.Reason != ReasonOverAgent || got[0].at != DefaultSpeakingMinSpeech {
		t.Fatalf("no resume: %+v, want confirm at %v", got, DefaultSpeakingMinSpeech)
	}
}

func TestArbiterTranscriptCheck(t *testing.T) {
	const played = "I can book a table for four at seven tonight"
	suspected := func(cfg ArbiterConfig) *Arbiter {
		a := NewArbiter(cfg)
		if got := feed(a, 0.9, 200*time.Millisecond, true); len(got) != 1 || got[0].d.Action != Suspect {
			t.Fatalf("setup: %+v", got)
		}
		return a
	}
	for _, tc := range []struct {
		name, text string
		want       Action
		reason     string
		keep       bool
	}{
		{"a backchannel resumes", "Uh-huh.", Resume, ReasonBackchannel, false},
		{"a two-word backchannel resumes", "got it", Resume, ReasonBackchannel, false},
		{"the agent's own words resume", "table for four at seven", Resume, ReasonEchoTranscript, false},
		{"words that ask for the floor confirm", "wait, make it Friday", Confirm, ReasonTranscript, true},
		{"one unknown word waits", "Friday", NoAction, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := suspected(ArbiterConfig{})
			d, keep := a.Transcript(tc.text, played, AgentAudible)
			if d.Action != tc.want || d.Reason != tc.reason || keep != tc.keep {
				t.Fatalf("Transcript(%q) = %+v keep=%v, want %v %q keep=%v", tc.text, d, keep, tc.want, tc.reason, tc.keep)
			}
		})
	}

	t.Run("with ConfirmWords the caller's words confirm", func(t *testing.T) {
		a := suspected(ArbiterConfig{ConfirmWords: 2})
		if d, keep := a.Transcript("wait, make it Friday", played, AgentAudible); d.Action != Confirm || d.Reason != ReasonTranscript || !keep {
			t.Fatalf("got %+v keep=%v, want confirm by transcript", d, keep)
		}
		if d, _ := suspected(ArbiterConfig{ConfirmWords: 2}).Transcript("Friday", played, AgentAudible); d.Action != NoAction {
			t.Fatalf("one word: got %+v, want nothing yet", d)
		}
	})
	t.Run("with ConfirmWords words the VAD missed confirm while the agent speaks", func(t *testing.T) {
		a := NewArbiter(ArbiterConfig{ConfirmWords: 2})
		feed(a, 0.2, time.Second, true)
		d, keep := a.Transcript("hold on please", played, AgentAudible)
		if d.Action != Confirm || d.Reason != ReasonTranscript || !keep || d.Onset != time.Second {
			t.Fatalf("got %+v keep=%v, want confirm by transcript at 1s", d, keep)
		}
	})
	t.Run("echo heard while the agent speaks is dropped", func(t *testing.T) {
		a := NewArbiter(ArbiterConfig{})
		feed(a, 0.2, time.Second, true)
		if d, keep := a.Transcript("book a table", played, AgentAudible); d.Action != NoAction || d.Reason != ReasonEchoTranscript || keep {
			t.Fatalf("got %+v keep=%v, want dropped as echo", d, keep)
		}
	})
	t.Run("a late final of a resumed backchannel is dropped, a later turn is kept", func(t *testing.T) {
		a := suspected(ArbiterConfig{})
		feed(a, 0.05, time.Second, false) // resumes
		if _, keep := a.Transcript("yeah", played, AgentSilent); keep {
			t.Fatal("late backchannel kept")
		}
		feed(a, 0.05, 3*time.Second, false)
		if _, keep := a.Transcript("yeah", played, AgentSilent); !keep {
			t.Fatal("a yes to a question, long after, was dropped")
		}
	})
	t.Run("words over the agent that the voice did not confirm are dropped", func(t *testing.T) {
		// What pocketsphinx made of a noisy "yeah" over the echo.
		const junk = "five a patio on yeah"
		a := suspected(ArbiterConfig{})
		feed(a, 0.05, time.Second, true) // the suspicion is ruled out
		if d, keep := a.Transcript(junk, played, AgentAudible); keep || d.Reason != ReasonUnconfirmed {
			t.Fatalf("after a resume: got %+v keep=%v, want dropped as unconfirmed", d, keep)
		}
		if d, keep := a.Transcript(junk, played, AgentTurn); keep || d.Reason != ReasonUnconfirmed {
			t.Fatalf("after a resume, agent between sentences: got %+v keep=%v, want dropped", d, keep)
		}
		b := NewArbiter(ArbiterConfig{})
		feed(b, 0.2, time.Second, true) // never a suspicion
		if d, keep := b.Transcript(junk, played, AgentAudible); keep || d.Reason != ReasonUnconfirmed {
			t.Fatalf("no suspicion: got %+v keep=%v, want dropped", d, keep)
		}
		if _, keep := b.Transcript(junk, played, AgentTurn); !keep {
			t.Fatal("words while the agent is thinking, not speaking, were dropped")
		}
		if _, keep := b.Transcript(junk, played, AgentSilent); !keep {
			t.Fatal("words once the agent is silent were dropped")
		}
	})
	t.Run("transcripts while the agent is silent are the caller's", func(t *testing.T) {
		a := NewArbiter(ArbiterConfig{})
		if d, keep := a.Transcript("table for four", played, AgentSilent); d.Action != NoAction || !keep {
			t.Fatalf("got %+v keep=%v", d, keep)
		}
	})
}

func TestArbiterEchoTailFollowsTheDelayEstimate(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	a.SetEchoTail(600 * time.Millisecond)
	if c := a.Config(); c.EchoTail != 600*time.Millisecond {
		t.Fatalf("config after SetEchoTail: %+v", c)
	}
	feed(a, 0.9, 200*time.Millisecond, true)
	// Echo lasting 550 ms after the pause must not confirm.
	got := append(feed(a, 0.9, 560*time.Millisecond, false), feed(a, 0, time.Second, false)...)
	if len(got) == 0 || got[len(got)-1].d.Action != Resume || slices.ContainsFunc(got, func(m made) bool { return m.d.Action == Confirm }) {
		t.Fatalf("long echo tail: %+v, want a resume and no confirm", got)
	}
}

func TestWords(t *testing.T) {
	got := Words("Uh-huh, don't -- STOP! 7pm")
	want := []string{"uh-huh", "don't", "stop", "7pm"}
	if !slices.Equal(got, want) {
		t.Fatalf("Words = %q, want %q", got, want)
	}
}

func TestArbiterFrameAllocatesNothing(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		a.Frame(float32(i%50)/50, step, Agent(i/50%3))
	})
	if allocs != 0 {
		t.Fatalf("Frame allocates %v per call", allocs)
	}
}

func TestArbiterSpeechInAPauseOfTheAgentsTurnInterrupts(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	feed(a, 0.1, time.Second, true)
	// Between the agent's words nothing it played can be heard: the
	// plain activation threshold counts, and no echo tail is waited out.
	got := feedAgent(a, 0.6, 2*time.Second, AgentTurn)
	within := DefaultShortSound - DefaultSpeakingMinSpeech + DefaultResumeQuiet + DefaultWordsWait
	want := []made{
		{time.Second + DefaultSpeakingMinSpeech, Decision{Action: Suspect, Reason: ReasonOverAgent, Onset: time.Second, Within: within}},
		{time.Second + DefaultShortSound, Decision{Action: Confirm, Reason: ReasonSpeechContinued, Onset: time.Second}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("caller in a pause of the agent's turn:\n got %+v\nwant %+v", got, want)
	}
	// The same speech with no turn under way is ordinary turn-taking.
	b := NewArbiter(ArbiterConfig{})
	if got := feedAgent(b, 0.6, time.Second, AgentSilent); len(got) != 1 || got[0].d.Action != SpeechStart {
		t.Fatalf("with no turn under way: %+v, want speech_start", got)
	}
}

func TestArbiterDoesNotResumeOverTheCallersVoice(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	feed(a, 0.1, time.Second, true)
	feed(a, 0.9, DefaultSpeakingMinSpeech, true) // suspected
	// The caller pauses after a word, for less than ResumeQuiet, and goes
	// on: one utterance, confirmed on its length.
	got := feedAgent(a, 0.9, 500*time.Millisecond, AgentTurn)
	got = append(got, feedAgent(a, 0.1, DefaultResumeQuiet-step, AgentTurn)...)
	got = append(got, feedAgent(a, 0.9, time.Second, AgentTurn)...)
	want := time.Second + DefaultShortSound
	if len(got) != 1 || got[0].d.Action != Confirm || got[0].at != want {
		t.Fatalf("speech with a short break: %+v, want only a confirm at %v", got, want)
	}
}

// A short sound over the agent (a backchannel, a cough) is judged by its
// words: the arbiter asks for them when it ends, and resumes unless they
// ask for the floor.
func TestArbiterJudgesAShortSoundByItsWords(t *testing.T) {
	const played = "I can book a table for four at seven tonight"
	shortSound := func(t *testing.T, cfg ArbiterConfig) (*Arbiter, []made) {
		t.Helper()
		a := NewArbiter(cfg)
		feed(a, 0.1, time.Second, true)
		// A 600 ms "uh-huh" on a line with no echo (a pause of the
		// agent's words as far as the arbiter can tell).
		got := feedAgent(a, 0.9, 600*time.Millisecond, AgentTurn)
		got = append(got, feedAgent(a, 0.05, DefaultResumeQuiet, AgentTurn)...)
		return a, got
	}
	t.Run("it ends: the words are awaited", func(t *testing.T) {
		_, got := shortSound(t, ArbiterConfig{})
		end := time.Second + 600*time.Millisecond + DefaultResumeQuiet
		if len(got) != 2 || got[0].d.Action != Suspect || got[1].d.Action != AwaitWords || got[1].at != end {
			t.Fatalf("%+v, want suspect then await_words at %v", got, end)
		}
	})
	for _, tc := range []struct {
		name, text string
		want       Action
		reason     string
		keep       bool
	}{
		{"a backchannel resumes", "uh huh", Resume, ReasonBackchannel, false},
		{"a misheard backchannel resumes", "o'clock", Resume, ReasonShortSound, false},
		{"a word that asks for the floor confirms", "stop", Confirm, ReasonTranscript, true},
		{"a floor word after a filler confirms", "oh, wait", Confirm, ReasonTranscript, true},
		{"a floor word after a backchannel confirms", "okay, stop", Confirm, ReasonTranscript, true},
		{"a floor word inside other words does not", "are stop", Resume, ReasonShortSound, false},
		{"a floor word after no confirms", "no, wait", Confirm, ReasonTranscript, true},
		{"no alone does not", "no", Resume, ReasonShortSound, false},
		{"words that do not ask for the floor resume", "the a", Resume, ReasonShortSound, false},
		{"the agent's own words resume", "seven tonight", Resume, ReasonEchoTranscript, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := shortSound(t, ArbiterConfig{})
			d, keep := a.Transcript(tc.text, played, AgentTurn)
			if d.Action != tc.want || d.Reason != tc.reason || keep != tc.keep {
				t.Fatalf("Transcript(%q) = %+v keep=%v, want %v %q keep=%v", tc.text, d, keep, tc.want, tc.reason, tc.keep)
			}
		})
	}
	t.Run("no words within WordsWait: resumed", func(t *testing.T) {
		a, _ := shortSound(t, ArbiterConfig{})
		got := feedAgent(a, 0.05, time.Second, AgentTurn)
		end := time.Second + 600*time.Millisecond + DefaultResumeQuiet + DefaultWordsWait
		if len(got) != 1 || got[0].d.Action != Resume || got[0].d.Reason != ReasonNotConfirmed || got[0].at != end {
			t.Fatalf("%+v, want resume not_confirmed at %v", got, end)
		}
	})
	t.Run("no recogniser: no words can rule it out, so it is a turn once it outlasts the tail", func(t *testing.T) {
		_, got := shortSound(t, ArbiterConfig{WordsWait: -1})
		at := time.Second + DefaultSpeakingMinSpeech + DefaultConfirmSpeech
		if len(got) < 2 || got[1].d.Action != Confirm || got[1].at != at {
			t.Fatalf("%+v, want a confirm at %v", got, at)
		}
	})
	t.Run("the caller goes on while the words are awaited: its length decides", func(t *testing.T) {
		a, _ := shortSound(t, ArbiterConfig{})
		got := feedAgent(a, 0.9, time.Second, AgentTurn)
		if len(got) != 1 || got[0].d.Action != Confirm || got[0].d.Reason != ReasonSpeechContinued {
			t.Fatalf("%+v, want a confirm", got)
		}
	})
}

// However the caller's sound comes and goes, the verdict comes by the
// suspicion's Within.
func TestArbiterVerdictComesWithinItsBound(t *testing.T) {
	for _, pattern := range [][2]int{{1, 1}, {3, 9}, {9, 9}, {1, 12}, {7, 3}} {
		a := NewArbiter(ArbiterConfig{})
		a.SetEchoTail(450 * time.Millisecond)
		feed(a, 0.1, time.Second, true)
		got := feed(a, 0.9, DefaultSpeakingMinSpeech, true)
		if len(got) != 1 || got[0].d.Action != Suspect {
			t.Fatalf("setup: %+v", got)
		}
		due := got[0].at + got[0].d.Within
		var verdict *made
		for i := 0; verdict == nil && i < 500; i++ {
			prob := float32(0.05)
			if i%(pattern[0]+pattern[1]) < pattern[0] {
				prob = 0.9
			}
			for _, m := range feedAgent(a, prob, step, AgentTurn) {
				if m.d.Action == Confirm || m.d.Action == Resume {
					verdict = &m
				}
			}
		}
		if verdict == nil || verdict.at > due {
			t.Errorf("sound on %d frames, off %d: verdict %+v, due by %v", pattern[0], pattern[1], verdict, due)
		}
	}
}

func TestArbiterRunHoldsThroughTheQuieterPartsOfWords(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	feed(a, 0.1, time.Second, true)
	// Started above the raised threshold, a run goes on above the plain
	// one...
	got := append(feed(a, 0.9, 2*step, true), feed(a, 0.6, DefaultSpeakingMinSpeech, true)...)
	if len(got) != 1 || got[0].d.Action != Suspect || got[0].d.Onset != time.Second {
		t.Fatalf("0.9 then 0.6: %+v, want a suspicion with onset 1s", got)
	}
	// ...but cannot start there.
	b := NewArbiter(ArbiterConfig{})
	feed(b, 0.1, time.Second, true)
	if got := feed(b, 0.6, time.Second, true); len(got) != 0 {
		t.Fatalf("0.6 alone: %+v, want nothing", got)
	}
}

// Before the agent has played anything of its turn, the caller has heard
// nothing to answer with a backchannel: speech is their turn, confirmed
// once ConfirmSpeech of it is heard, however short.
func TestArbiterSpeechBeforeTheAgentPlaysIsATurn(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	feedAgent(a, 0.1, time.Second, AgentThinking)
	got := feedAgent(a, 0.9, 400*time.Millisecond, AgentThinking)
	want := time.Second + DefaultSpeakingMinSpeech + DefaultConfirmSpeech
	if len(got) != 2 || got[0].d.Action != Suspect || got[1].d.Action != Confirm || got[1].at != want {
		t.Fatalf("%+v, want a suspicion, then a confirm at %v", got, want)
	}
}

// A caller who pauses after a few words ("Just a moment, ...") is taking
// the floor: the sound after the pause continues the first one, and its
// length counts from the first onset. After a backchannel it does not.
func TestArbiterSoundSoonAfterAShortSoundContinuesIt(t *testing.T) {
	for _, tc := range []struct {
		words   string
		confirm bool
	}{
		{"just a moment", true},
		{"uh-huh", false},
	} {
		t.Run(tc.words, func(t *testing.T) {
			a := NewArbiter(ArbiterConfig{})
			feedAgent(a, 0.1, time.Second, AgentTurn)
			feedAgent(a, 0.9, 600*time.Millisecond, AgentTurn)
			feedAgent(a, 0.05, DefaultResumeQuiet, AgentTurn) // await_words
			if d, _ := a.Final(tc.words, "", AgentTurn); d.Action != Resume {
				t.Fatalf("the first sound: %+v, want a resume", d)
			}
			got := feedAgent(a, 0.05, 100*time.Millisecond, AgentTurn)
			got = append(got, feedAgent(a, 0.9, 600*time.Millisecond, AgentTurn)...)
			confirmed := slices.ContainsFunc(got, func(m made) bool { return m.d.Action == Confirm })
			if !confirmed && tc.confirm {
				t.Fatalf("the sound after it: %+v; want a confirm on its length", got)
			}
			// The same with a second chunk too short to outlast the echo
			// tail by ConfirmSpeech: its words, not a backchannel, decide.
			b := NewArbiter(ArbiterConfig{})
			feedAgent(b, 0.1, time.Second, AgentAudible)
			feedAgent(b, 0.9, 600*time.Millisecond, AgentAudible)
			feedAgent(b, 0.05, DefaultResumeQuiet+2*step, AgentAudible) // await_words
			if d, _ := b.Final(tc.words, "", AgentAudible); d.Action != Resume {
				t.Fatalf("the first sound, on an echoing line: %+v, want a resume", d)
			}
			feedAgent(b, 0.05, 100*time.Millisecond, AgentAudible)
			feedAgent(b, 0.9, 500*time.Millisecond, AgentAudible)
			feedAgent(b, 0.05, 2*DefaultResumeQuiet, AgentAudible)
			if d, _ := b.Final("at ten", "", AgentAudible); (d.Action == Confirm) != tc.confirm {
				t.Fatalf("the short second chunk's words: %+v, want confirmed %v", d, tc.confirm)
			}
			if confirmed != tc.confirm {
				t.Fatalf("the sound after it: %+v; confirmed %v, want %v", got, confirmed, tc.confirm)
			}
			if tc.confirm && got[0].d.Onset != time.Second {
				t.Errorf("onset %v, want the first sound's, 1s", got[0].d.Onset)
			}
		})
	}
}

// A caller who goes on the moment the output resumes after their short
// sound is heard at once: the quiet before the resume was the break
// between the two sounds.
func TestArbiterSoundRightAtTheResumeIsSuspected(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	feedAgent(a, 0.1, time.Second, AgentAudible)
	feedAgent(a, 0.9, 600*time.Millisecond, AgentAudible)
	feedAgent(a, 0.05, DefaultEchoTail+2*step, AgentAudible) // await_words
	if d, _ := a.Final("just a moment", "", AgentAudible); d.Action != Resume {
		t.Fatalf("the first sound: %+v, want a resume", d)
	}
	got := feedAgent(a, 0.9, time.Second, AgentAudible)
	if len(got) == 0 || got[0].d.Action != Suspect {
		t.Fatalf("speech from the first frame after the resume: %+v, want a suspicion", got)
	}
}
