package sip_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/examples/booking"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/stt/pocketsphinx"
	"github.com/holdline/holdline/tts/espeak"
	"github.com/holdline/holdline/vad/corpus"
)

// voiceRMS is the RMS of pcm's voiced samples (louder than -40 dBFS).
func voiceRMS(pcm []int16) float64 {
	var sum float64
	n := 0
	for _, v := range pcm {
		if math.Abs(float64(v)) > 328 {
			sum += float64(v) * float64(v)
			n++
		}
	}
	return math.Sqrt(sum / float64(max(n, 1)))
}

// atLevel scales the caller's voice to levelDB relative to the agent's.
func atLevel(t *testing.T, caller []int16, levelDB float64) []int16 {
	t.Helper()
	out, err := exec.Command("espeak-ng", "--stdout", longAnswer).Output()
	if err != nil {
		t.Skipf("espeak-ng: %v", err)
	}
	agent, _, err := media.ReadWAV(bytesReader(out))
	if err != nil {
		t.Fatal(err)
	}
	g := voiceRMS(agent) / voiceRMS(caller) * math.Pow(10, levelDB/20)
	scaled := make([]int16, len(caller))
	for i, v := range caller {
		scaled[i] = int16(max(-32768, min(32767, float64(v)*g)))
	}
	return scaled
}

// lineTrials is how many calls each line condition gets:
// HOLDLINE_SIP_LINE_TRIALS, or one under make test.
func lineTrials(t *testing.T) int {
	t.Helper()
	v := os.Getenv("HOLDLINE_SIP_LINE_TRIALS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("HOLDLINE_SIP_LINE_TRIALS=%q: want a positive number", v)
	}
	return n
}

// phoneLine is a line condition: the echo it returns and the caller's
// level relative to the agent's.
type phoneLine struct {
	name    string
	delay   time.Duration
	gainDB  float64 // -200: no echo at all
	levelDB float64
}

var (
	cleanLine      = phoneLine{"no echo", 0, -200, 0}
	quietCaller    = phoneLine{"no echo and the caller 6 dB quieter", 0, -200, -6}
	nearEchoLine   = phoneLine{"echo -10 dB at 60 ms", 60 * time.Millisecond, -10, 0}
	strongEchoLine = phoneLine{"echo -6 dB at 120 ms", 120 * time.Millisecond, -6, 0}
)

// percentile is the p-th percentile of sorted durations (-1: none).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return -1
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(p*float64(len(sorted))))-1)].Round(time.Millisecond)
}

// Barge-in on every kind of phone line, timed at the caller: from the
// caller's onset to the agent's audio going silent on the line (a silence
// of 400 ms or more, timed at its first silent packet). A clean line (a
// digital trunk: none of the agent comes back) with a caller as loud as
// the agent and one 6 dB quieter, and lines that echo. Each trial is a
// fresh call, the caller speaking over the answer. HOLDLINE_SIP_LINE_TRIALS=20
// runs 20 calls per line and prints p50/p95; make test runs one each.
func TestCallerInterruptsOnEveryLine(t *testing.T) {
	trials := lineTrials(t)
	said := callerVoice(t, "Wait, I want to change the time of my booking please.")
	// espeak-ng starts with a little silence: the onset is the first loud
	// sample.
	lead := 0
	for lead < len(said) && math.Abs(float64(said[lead])) < 1000 {
		lead++
	}
	for _, pl := range []phoneLine{cleanLine, quietCaller, nearEchoLine, strongEchoLine} {
		t.Run(pl.name, func(t *testing.T) {
			voice := atLevel(t, said, pl.levelDB)
			var lat []time.Duration
			missed := 0
			for trial := range trials {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				line, rec := echoCallOn(t, ctx, pl.delay, pl.gainDB)
				for line.firstSound().IsZero() && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
				// Mid-answer, a little later each trial so the onset falls
				// at different points of the agent's words.
				time.Sleep(time.Until(line.firstSound().Add(2*time.Second + time.Duration(trial%10)*37*time.Millisecond)))
				// The caller starts with a loud packet of the agent's, so
				// there is always something to stop.
				line.sayWithAgentsNext(voice)
				for line.cueStart().IsZero() && ctx.Err() == nil {
					time.Sleep(5 * time.Millisecond)
				}
				onset := line.cueStart().Add(time.Duration(lead) * time.Second / 8000)
				for ctx.Err() == nil && !rec.find(events.TurnInterrupted, "") && !rec.find(events.PlayoutDone, longAnswer) {
					time.Sleep(10 * time.Millisecond)
				}
				cancel()
				cut, ok := rec.first(events.TurnInterrupted)
				if !ok {
					missed++
					t.Logf("trial %d: the agent did not stop for the caller: %v", trial, rec.kinds())
					continue
				}
				// The agent is silent at the caller from the end of its last
				// loud packet before the cut (the pause on suspicion comes
				// first; a packet or two in flight may follow the cut).
				silent := line.lastSoundBefore(cut.Time.Add(100 * time.Millisecond)).Add(20 * time.Millisecond)
				lat = append(lat, max(silent.Sub(onset), 0))
			}
			slices.Sort(lat)
			t.Logf("%s: %d trials, %d missed; onset to the agent silent at the caller p50 %v, p95 %v", pl.name, trials, missed, percentile(lat, 0.5), percentile(lat, 0.95))
			if missed > 0 {
				t.Errorf("%d of %d trials: the caller did not stop the agent", missed, trials)
			}
			// The target is a p95 of 300 ms; a single trial, run beside the
			// rest of the test suite on two cores, only has to show the
			// agent stopping for the caller without the level rule's
			// second of talking over them.
			limit := 300 * time.Millisecond
			if trials < 10 {
				limit = 600 * time.Millisecond
			}
			if p := percentile(lat, 0.95); p > limit {
				t.Errorf("p95 %v; want the agent silent within %v of the caller's onset", p, limit)
			}
		})
	}
}

// On lines that echo (the canceller learning them from the greeting on),
// nobody speaking: the agent's whole answer plays, never cut by its own
// echo. HOLDLINE_SIP_LINE_TRIALS=20 runs 20 calls per line.
func TestEchoAloneCutsNoGreeting(t *testing.T) {
	trials := lineTrials(t)
	for _, pl := range []phoneLine{nearEchoLine, strongEchoLine} {
		t.Run(pl.name, func(t *testing.T) {
			cut, paused := 0, 0
			for trial := range trials {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				_, rec := echoCallOn(t, ctx, pl.delay, pl.gainDB)
				for ctx.Err() == nil && !rec.find(events.TurnInterrupted, "") && !rec.find(events.PlayoutDone, longAnswer) {
					time.Sleep(20 * time.Millisecond)
				}
				cancel()
				if rec.find(events.TurnInterrupted, "") || !rec.find(events.PlayoutDone, longAnswer) {
					cut++
					t.Logf("trial %d: the answer was cut: %v", trial, rec.kinds())
				}
				if _, ok := rec.first(events.BargeInSuspected); ok {
					paused++
				}
			}
			t.Logf("%s, echo alone: %d of %d answers cut, %d paused at least once", pl.name, cut, trials, paused)
			if cut > 0 {
				t.Errorf("%d of %d answers cut by their own echo", cut, trials)
			}
		})
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// shortSound is something a caller says or does over the agent that is not
// a turn: a backchannel in one of the corpus's voices, or a cough.
type shortSound struct {
	name    string
	pcm     []int16 // 8 kHz, from its first loud sample to its last
	levelDB float64
}

// backchannelSounds are the corpus's backchannels ("uh-huh", "yeah",
// "okay", "mm-hmm", "right"), 0.4-0.8 s each, in its three voices, at the
// levels the corpus gives them (as loud as the agent, or 6 dB quieter).
func backchannelSounds(t *testing.T) []shortSound {
	t.Helper()
	clips, err := corpus.Generate(context.Background(), corpus.Options{Rate: media.Rate8k, EchoSentences: 1, BargeIns: 1, Backchannels: 15})
	if err != nil {
		t.Skipf("corpus: %v", err)
	}
	var out []shortSound
	for _, c := range clips {
		if c.Kind != corpus.Backchannel {
			continue
		}
		at := func(d time.Duration) int { return int(d.Seconds() * 8000) }
		pcm := slices.Clone(c.User[at(c.UserOnset):min(len(c.User), at(c.UserEnd))])
		out = append(out, shortSound{name: c.UserText + " (" + c.Voice + ")", pcm: pcm, levelDB: c.UserLevelDB})
	}
	if len(out) == 0 {
		t.Fatal("the corpus has no backchannels")
	}
	return out
}

// cough is corpus.Cough at 8 kHz.
func cough() shortSound { return shortSound{name: "cough", pcm: corpus.Cough(media.Rate8k)} }

// loudSpan is the first and last loud samples of pcm.
func loudSpan(pcm []int16) (from, to int) {
	from, to = -1, -1
	for i, v := range pcm {
		if math.Abs(float64(v)) >= 1000 {
			if from < 0 {
				from = i
			}
			to = i
		}
	}
	return from, to
}

// Backchannels and coughs over the agent, on a clean line and on one that
// echoes, with the recogniser `holdline serve --agent booking` runs
// (pocketsphinx on the booking phrases): none cuts the agent's answer, it
// resumes soon after the sound ends (the resume gap: from the sound's end
// to the agent's next loud packet, at the caller), and no sound leaves
// more than a second of silence. HOLDLINE_SIP_LINE_TRIALS=20 runs 20
// backchannels and 20 coughs per line (make test: one of each, on the
// clean line).
func TestBackchannelsAndCoughsDoNotCutTheAgent(t *testing.T) {
	trials := lineTrials(t)
	sounds := backchannelSounds(t)
	lines := []phoneLine{cleanLine, strongEchoLine}
	if trials == 1 {
		lines = lines[:1]
	}
	for _, pl := range lines {
		for _, kind := range []string{"backchannels", "coughs"} {
			t.Run(pl.name+"/"+kind, func(t *testing.T) {
				var gaps, silences []time.Duration
				cuts := 0
				for trial := range trials {
					s := cough()
					if kind == "backchannels" {
						s = sounds[trial%len(sounds)]
					}
					from, to := loudSpan(s.pcm)
					voice := atLevel(t, s.pcm, s.levelDB)
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					line, rec := echoCallWith(t, ctx, pl.delay, pl.gainDB, func(rec *recorder) sip.AgentFunc {
						return func(context.Context) (*runtime.Agent, func(), error) {
							voice, err := espeak.New(espeak.WithSampleRate(8000))
							if err != nil {
								return nil, nil, err
							}
							ears, err := pocketsphinx.New(pocketsphinx.WithPhrases(booking.Phrases...))
							if err != nil {
								return nil, nil, err
							}
							return speakingAgent(rec, longAnswer, voice, ears), nil, nil
						}
					})
					for line.firstSound().IsZero() && ctx.Err() == nil {
						time.Sleep(10 * time.Millisecond)
					}
					time.Sleep(time.Until(line.firstSound().Add(2*time.Second + time.Duration(trial%10)*37*time.Millisecond)))
					line.sayWithAgentsNext(voice)
					for line.cueStart().IsZero() && ctx.Err() == nil {
						time.Sleep(5 * time.Millisecond)
					}
					onset := line.cueStart().Add(time.Duration(from) * time.Second / 8000)
					end := line.cueStart().Add(time.Duration(to+1) * time.Second / 8000)
					// The verdict comes within ShortSound and the waits
					// after it; two and a half seconds see it and the
					// agent's words after it.
					time.Sleep(time.Until(end.Add(2500 * time.Millisecond)))
					cancel()
					if rec.find(events.TurnInterrupted, "") {
						cuts++
						t.Logf("trial %d, %s: the agent's turn was cut: %v", trial, s.name, rec.kinds())
						continue
					}
					back := line.firstSoundAfter(end)
					if back.IsZero() {
						t.Errorf("trial %d, %s: the agent never spoke again: %v", trial, s.name, rec.kinds())
						continue
					}
					gaps = append(gaps, back.Sub(end))
					silences = append(silences, line.longestQuiet(onset.Add(-200*time.Millisecond), back.Add(20*time.Millisecond)))
				}
				slices.Sort(gaps)
				slices.Sort(silences)
				t.Logf("%s, %s: %d of %d cut the agent's turn; resume gap p50 %v, p95 %v; longest silence p50 %v, max %v",
					pl.name, kind, cuts, trials, percentile(gaps, 0.5), percentile(gaps, 0.95), percentile(silences, 0.5), percentile(silences, 1))
				if cuts*10 > trials {
					t.Errorf("%d of %d %s cut the agent's turn; want at most 1 in 10", cuts, trials, kind)
				}
				if p := percentile(gaps, 0.95); p > 500*time.Millisecond {
					t.Errorf("resume gap p95 %v; want at most 500 ms", p)
				}
				if m := percentile(silences, 1); m > time.Second {
					t.Errorf("a silence of %v at the caller; want none over a second", m)
				}
			})
		}
	}
}
