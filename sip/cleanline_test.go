package sip_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/media"
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

// Barge-in on a clean phone line (a digital trunk: none of the agent comes
// back), timed at the caller: from the caller's onset to the agent's audio
// going silent on the line (a silence of 400 ms or more, timed at its
// first silent packet), for a caller as loud as the agent and one 6 dB
// quieter. HOLDLINE_SIP_CLEAN_TRIALS=20 runs 20 calls per level and prints
// p50/p95; make test runs one each.
func TestCallerInterruptsOnACleanPhoneLine(t *testing.T) {
	trials := 1
	if v := os.Getenv("HOLDLINE_SIP_CLEAN_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HOLDLINE_SIP_CLEAN_TRIALS=%q: want a positive number", v)
		}
		trials = n
	}
	said := callerVoice(t, "Wait, I want to change the time of my booking please.")
	// espeak-ng starts with a little silence: the onset is the first loud
	// sample.
	lead := 0
	for lead < len(said) && math.Abs(float64(said[lead])) < 1000 {
		lead++
	}
	for _, level := range []float64{0, -6} {
		t.Run(fmt.Sprintf("caller %+.0f dB", level), func(t *testing.T) {
			voice := atLevel(t, said, level)
			var lat []time.Duration
			missed := 0
			for trial := range trials {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				line, rec := echoCallOn(t, ctx, 0, -200) // no echo at all
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
			pct := func(p float64) time.Duration {
				if len(lat) == 0 {
					return -1
				}
				return lat[min(len(lat)-1, int(math.Ceil(p*float64(len(lat))))-1)].Round(time.Millisecond)
			}
			t.Logf("clean line, caller %+.0f dB: %d trials, %d missed; onset to the agent silent at the caller p50 %v, p95 %v", level, trials, missed, pct(0.5), pct(0.95))
			if missed > 0 {
				t.Errorf("%d of %d trials: the caller %+.0f dB did not stop the agent", missed, trials, level)
			}
			// The target is a p95 of 300 ms; a single trial, run beside the
			// rest of the test suite on two cores, only has to show the
			// agent stopping for the caller without the level rule's
			// second of talking over them.
			limit := 300 * time.Millisecond
			if trials < 10 {
				limit = 600 * time.Millisecond
			}
			if p := pct(0.95); p > limit {
				t.Errorf("p95 %v; want the agent silent within %v of the caller's onset", p, limit)
			}
		})
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
