package corpus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
)

var rates = []int{8000, 16000}

func TestGenerateCounts(t *testing.T) {
	t.Parallel()
	for _, rate := range rates {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			o := smallOptions(rate)
			clips := corpusFor(t, o)

			count := map[Kind]int{}
			noisy := map[Kind]int{}
			names := map[string]bool{}
			echoConds := map[string]int{}
			for _, c := range clips {
				count[c.Kind]++
				if c.Noise {
					noisy[c.Kind]++
				}
				if names[c.Name] {
					t.Errorf("duplicate name %q", c.Name)
				}
				names[c.Name] = true
				if !strings.HasPrefix(c.Name, string(c.Kind)+"/") {
					t.Errorf("%s: kind %q not in name", c.Name, c.Kind)
				}
				if c.Rate != rate {
					t.Errorf("%s: rate %d", c.Name, c.Rate)
				}
				if len(c.Far) != len(c.Near) || len(c.Far) == 0 {
					t.Errorf("%s: len(Far) %d, len(Near) %d", c.Name, len(c.Far), len(c.Near))
				}
				if c.NoEcho {
					if c.Delay != 0 || c.GainDB != NoEchoGainDB || c.EchoTaps != nil {
						t.Errorf("%s: no echo, yet delay %v gain %v taps %d", c.Name, c.Delay, c.GainDB, len(c.EchoTaps))
					}
				} else if !slices.Contains(echoDelays, c.Delay) || !slices.Contains(echoGains, c.GainDB) {
					t.Errorf("%s: delay %v gain %v outside the sets", c.Name, c.Delay, c.GainDB)
				}
				if !slices.Contains(agentLines, c.AgentText) {
					t.Errorf("%s: agent text %q", c.Name, c.AgentText)
				}
				// The agent starts 300 ms in; Far ends 600 ms after the last speech.
				if c.AgentSpan[0] != leadSilence {
					t.Errorf("%s: agent speech starts at %v, want %v", c.Name, c.AgentSpan[0], leadSilence)
				}
				last := max(c.AgentSpan[1], c.UserEnd)
				if got := dur(rate, len(c.Far)); (got - last - tailSilence).Abs() > time.Second/time.Duration(rate) {
					t.Errorf("%s: Far lasts %v, want last speech %v + %v", c.Name, got, last, tailSilence)
				}
				if d := c.AgentSpan[1] - c.AgentSpan[0]; d < 2*time.Second || d > 4*time.Second {
					t.Errorf("%s: agent speech lasts %v, want 2-4 s", c.Name, d)
				}

				switch c.Kind {
				case Echo:
					if !c.NoEcho {
						echoConds[fmt.Sprint(c.Delay, c.GainDB, c.Noise)]++
					} else if !c.Noise {
						t.Errorf("%s: echo-only clip without echo or noise", c.Name)
					}
					if c.UserText != "" || c.UserOnset != -1 || c.UserEnd != -1 {
						t.Errorf("%s: echo clip with user speech %q %v %v", c.Name, c.UserText, c.UserOnset, c.UserEnd)
					}
				case BargeIn, Backchannel:
					want := userLines
					if c.Kind == Backchannel {
						want = backchannelTexts()
					}
					if !slices.Contains(want, c.UserText) {
						t.Errorf("%s: user text %q", c.Name, c.UserText)
					}
					d := c.UserEnd - c.UserOnset
					lo, hi := 1400*time.Millisecond, 2600*time.Millisecond
					if c.Kind == Backchannel {
						lo, hi = 400*time.Millisecond, 800*time.Millisecond
					}
					if d < lo || d > hi {
						t.Errorf("%s: user speech %q lasts %v, want %v-%v", c.Name, c.UserText, d, lo, hi)
					}
				default:
					t.Errorf("%s: kind %q", c.Name, c.Kind)
				}
			}
			// Echo: every delay×gain condition with and without noise,
			// plus twice the sentences on a line without echo, noisy.
			want := map[Kind]int{Echo: 4*4*2*o.EchoSentences + 2*o.EchoSentences, BargeIn: o.BargeIns, Backchannel: o.Backchannels}
			wantNoisy := map[Kind]int{Echo: 4*4*o.EchoSentences + 2*o.EchoSentences, BargeIn: o.BargeIns / 2, Backchannel: o.Backchannels / 2}
			for k, n := range want {
				if count[k] != n {
					t.Errorf("%d %s clips, want %d", count[k], k, n)
				}
				if noisy[k] != wantNoisy[k] {
					t.Errorf("%d of %d %s clips noisy, want %d", noisy[k], n, k, wantNoisy[k])
				}
			}
			if len(echoConds) != 32 {
				t.Errorf("%d distinct echo conditions, want 32", len(echoConds))
			}
		})
	}
}

func TestGenerateDefaultsCount(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	plans := makePlans(o)
	count := map[Kind]int{}
	for _, p := range plans {
		count[p.Kind]++
	}
	if count[Echo] != 136 || count[BargeIn] != 144 || count[Backchannel] != 48 || o.Rate != 16000 {
		t.Errorf("default corpus: %v at %d Hz, want 136 echo, 144 barge_in, 48 backchannel at 16000 Hz", count, o.Rate)
	}
	// Balanced: each user line 12 times; 48 barge-ins on lines without
	// echo, 24 at each caller level; each delay×gain condition 6 times,
	// 3 at each caller level.
	users, conds, levels := map[string]int{}, map[string]int{}, map[string]int{}
	for _, p := range plans {
		if p.Kind == BargeIn {
			users[p.UserText]++
			if p.NoEcho {
				levels[fmt.Sprint("no echo ", p.UserLevelDB)]++
				continue
			}
			conds[fmt.Sprint(p.Delay, p.GainDB)]++
			levels[fmt.Sprint(p.Delay, p.GainDB, p.UserLevelDB)]++
		}
	}
	for u, n := range users {
		if n != 12 {
			t.Errorf("user line %q in %d barge-ins, want 12", u, n)
		}
	}
	if len(conds) != 16 {
		t.Errorf("%d delay×gain conditions in barge-ins, want 16", len(conds))
	}
	for c, n := range conds {
		if n != 6 {
			t.Errorf("condition %s in %d barge-ins, want 6", c, n)
		}
	}
	for c, n := range levels {
		want := 3
		if strings.HasPrefix(c, "no echo") {
			want = 24
		}
		if n != want {
			t.Errorf("condition and caller level %s in %d barge-ins, want %d", c, n, want)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	for _, o := range []Options{{Rate: 44100}, {Rate: 24000}, {BargeIns: -1}, {EchoSentences: -2}} {
		if _, err := Generate(context.Background(), o); err == nil || errors.Is(err, ErrTools) {
			t.Errorf("Generate(%+v): error %v, want an options error", o, err)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	t.Parallel()
	o := smallOptions(16000)
	a := corpusFor(t, o)

	// Same options, synthesised afresh into another cache: same bytes.
	o2 := o
	o2.CacheDir = t.TempDir()
	b, err := Generate(context.Background(), o2)
	if err != nil {
		t.Fatal(err)
	}
	// And again from that cache.
	c, err := Generate(context.Background(), o2)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range [][]Clip{b, c} {
		if len(other) != len(a) {
			t.Fatalf("%d clips, then %d", len(a), len(other))
		}
		for i := range a {
			x, y := a[i], other[i]
			if x.Name != y.Name || !slices.Equal(x.Far, y.Far) || !slices.Equal(x.Near, y.Near) ||
				x.UserOnset != y.UserOnset || x.UserEnd != y.UserEnd || x.AgentSpan != y.AgentSpan {
				t.Fatalf("clip %d differs between runs: %s / %s", i, x.Name, y.Name)
			}
		}
	}
	if n, err := os.ReadDir(o2.CacheDir); err != nil || len(n) == 0 {
		t.Errorf("cache dir has %d entries (%v)", len(n), err)
	}

	// Another seed: different draws.
	o3 := o
	o3.Seed++
	d, err := Generate(context.Background(), o3)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i := range a {
		if slices.Equal(a[i].Near, d[i].Near) {
			same++
		}
	}
	if same != 0 {
		t.Errorf("%d of %d clips identical with another seed", same, len(a))
	}
}

// TestEchoClips checks the echo-only clips from their audio alone: Near
// correlates with Far best at the clip's delay, and carries Far's energy
// scaled by the clip's gain.
func TestEchoClips(t *testing.T) {
	t.Parallel()
	for _, rate := range rates {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			for _, c := range corpusFor(t, smallOptions(rate)) {
				if c.Kind != Echo || c.NoEcho { // no echo: TestLinesLevelsVoices
					continue
				}
				far, near := toFloat(c.Far), toFloat(c.Near)
				cc := xcorr(near, far, samples(rate, 500*time.Millisecond))
				best := 0
				for k, v := range cc {
					if v > cc[best] {
						best = k
					}
				}
				if got := dur(rate, best); (got - c.Delay).Abs() > time.Millisecond {
					t.Errorf("%s: correlation peaks at %v, want %v", c.Name, got, c.Delay)
				}

				// Noise and dither, measured before the echo arrives, are
				// subtracted from Near's energy.
				quiet := samples(rate, c.AgentSpan[0]+c.Delay-25*time.Millisecond)
				noise := power(near[:quiet])
				echo := power(near)*float64(len(near)) - noise*float64(len(near))
				level := db(echo / (power(far) * float64(len(far))))
				t.Logf("%s: peak %v, level %.2f dB, background %.1f dBFS", c.Name, dur(rate, best), level, db(noise/fullScale/fullScale))
				// Without noise there is nothing to estimate: the level
				// must be exact.
				tol := 0.25
				if c.Noise {
					tol = 1.5
				}
				if math.Abs(level-c.GainDB) > tol {
					t.Errorf("%s: echo at %.2f dB, want %.0f±%.2f dB", c.Name, level, c.GainDB, tol)
				}
				wantNoise := ditherLevelDB
				if c.Noise {
					wantNoise = noiseLevelDB
				}
				if n := db(noise / fullScale / fullScale); math.Abs(n-wantNoise) > 4 {
					t.Errorf("%s: background at %.1f dBFS, want about %.0f", c.Name, n, wantNoise)
				}
			}
		})
	}
}

// TestOverlapClips checks barge-in and backchannel clips: the user starts
// inside the agent's speech, and Near holds nothing but echo until
// UserOnset, when its energy rises above the echo.
func TestOverlapClips(t *testing.T) {
	t.Parallel()
	for _, rate := range rates {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			for _, c := range corpusFor(t, smallOptions(rate)) {
				if c.Kind == Echo {
					continue
				}
				if c.UserOnset < c.AgentSpan[0]+minUserStart || c.UserOnset > c.AgentSpan[1]-minUserLead {
					t.Errorf("%s: user starts at %v, agent speaks %v", c.Name, c.UserOnset, c.AgentSpan)
				}
				if c.UserEnd <= c.UserOnset {
					t.Errorf("%s: user speech %v-%v", c.Name, c.UserOnset, c.UserEnd)
				}

				far, near := toFloat(c.Far), toFloat(c.Near)
				onset := samples(rate, c.UserOnset)
				w := samples(rate, 300*time.Millisecond)
				if c.NoEcho {
					// Nothing but noise and dither before the onset.
					if rise := db(power(near[onset:onset+w]) / power(near[onset-w:onset])); rise < 15 {
						t.Errorf("%s: Near rises by %.1f dB at UserOnset, want >= 15", c.Name, rise)
					}
					continue
				}
				// Fit the echo path over lags Delay-2ms..Delay+38ms on
				// everything before the user speaks.
				lo := samples(rate, c.Delay-2*time.Millisecond)
				taps := samples(rate, 40*time.Millisecond)
				res := echoResidual(far, near, lo, taps, lo+taps, onset-samples(rate, 5*time.Millisecond))

				before := power(res[onset-w : onset])
				after := power(res[onset : onset+w])
				nearBefore := power(near[onset-w : onset])
				rise := db(after / before)
				// The echo model must account for Near before the onset
				// (else there is more than echo in it), unless noise
				// is as loud as the echo.
				erle := db(nearBefore / before)
				t.Logf("%s: rise %.1f dB, echo removed %.1f dB", c.Name, rise, erle)
				if rise < 15 {
					t.Errorf("%s: Near rises by %.1f dB over the echo at UserOnset, want >= 15", c.Name, rise)
				}
				if !c.Noise && erle < 10 {
					t.Errorf("%s: Near before UserOnset is %.1f dB above the modelled echo: not echo alone", c.Name, erle)
				}
			}
		})
	}
}

// TestLevels: agent and user speech at the same active level, as generated.
func TestLevels(t *testing.T) {
	t.Parallel()
	needTools(t, true, false)
	for _, rate := range rates {
		s := testSynth(t, rate)
		for _, tc := range []struct {
			v voice
			u utterance
		}{{agentVoice, plain(agentLines[0])}, {userVoice, plain(userLines[0])}, {userVoice, backchannels[3]}} {
			x, err := s.speak(context.Background(), tc.v, tc.u)
			if err != nil {
				t.Fatal(err)
			}
			sp, err := prepare(x, rate)
			if err != nil {
				t.Fatal(err)
			}
			if l := db(power(sp.x)) - db(fullScale*fullScale); l > speechLevelDB || l < speechLevelDB-6 {
				t.Errorf("%d Hz %s %q: overall level %.1f dBFS, want just under %v", rate, tc.v.name, tc.u.text, l, speechLevelDB)
			}
			if l := 20 * math.Log10(activeRMS(sp.x, rate)/fullScale); math.Abs(l-speechLevelDB) > 0.01 {
				t.Errorf("%d Hz %s %q: active level %.2f dBFS", rate, tc.v.name, tc.u.text, l)
			}
		}
	}
}

func testSynth(t *testing.T, rate int) *synthesizer {
	t.Helper()
	tools, err := findSynthTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &synthesizer{tools: tools, rate: rate, dir: testCache}
}

// TestVoicesDiffer: the agent's voice must not pass for the caller's.
func TestVoicesDiffer(t *testing.T) {
	t.Parallel()
	needTools(t, true, false)
	s := testSynth(t, 16000)
	pitch := func(v voice, lines []string) float64 {
		var all []float64
		for _, l := range lines {
			x, err := s.speak(context.Background(), v, plain(l))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, toFloat(x)...)
		}
		return medianPitch(all, 16000)
	}
	agent, user := pitch(agentVoice, agentLines[:3]), pitch(userVoice, userLines[:3])
	t.Logf("median pitch: agent %.0f Hz, user %.0f Hz", agent, user)
	if agent < 160 || user > 140 || agent < 1.5*user {
		t.Errorf("median pitch: agent %.0f Hz, user %.0f Hz; want a higher (female) agent and a lower (male) user", agent, user)
	}
}

func TestWriteWAV(t *testing.T) {
	clips := corpusFor(t, smallOptions(8000))
	dir := t.TempDir()
	c := clips[len(clips)-1]
	if err := c.WriteWAV(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]int16{"far.wav": c.Far, "near.wav": c.Near} {
		got, err := readWAVFile(filepath.Join(dir, filepath.FromSlash(c.Name), name), 8000)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s differs from the clip", name)
		}
	}
	for _, bad := range []string{"", "../x", "/abs", "a/../../b", "a//b"} {
		if err := (Clip{Name: bad, Rate: 8000}).WriteWAV(dir); err == nil {
			t.Errorf("WriteWAV with name %q: no error", bad)
		}
	}
}

// TestMissingTools: with an empty PATH, both entry points say what to install.
func TestMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Generate(context.Background(), Options{CacheDir: t.TempDir(), EchoSentences: 1})
	if !errors.Is(err, ErrTools) || !strings.Contains(err.Error(), "apt-get install espeak-ng sox") {
		t.Errorf("Generate: %v, want ErrTools naming espeak-ng sox", err)
	}
	_, err = Transcribe(context.Background(), 16000, [][]int16{make([]int16, 1600)}, []string{"yes"})
	if !errors.Is(err, ErrTools) || !strings.Contains(err.Error(), "apt-get install pocketsphinx pocketsphinx-en-us") {
		t.Errorf("Transcribe: %v, want ErrTools naming pocketsphinx pocketsphinx-en-us", err)
	}
}

func TestGenerateCanceled(t *testing.T) {
	needTools(t, true, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := smallOptions(16000)
	o.CacheDir = t.TempDir()
	if _, err := Generate(ctx, o); !errors.Is(err, context.Canceled) {
		t.Errorf("Generate with a canceled context: %v", err)
	}
}

// TestCachedAudioIsSoxOutput: a cached utterance reads back as a WAV at the
// corpus rate.
func TestCacheContents(t *testing.T) {
	corpusFor(t, smallOptions(8000))
	entries, err := filepath.Glob(filepath.Join(testCache, "*.wav"))
	if err != nil || len(entries) == 0 {
		t.Fatalf("no cached WAVs (%v)", err)
	}
	f, err := os.Open(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, r, err := media.ReadWAV(f); err != nil || (r != 8000 && r != 16000) {
		t.Errorf("cached %s: rate %d, %v", entries[0], r, err)
	}
}

// The parts of Near add up to it, so a simulation that pauses the output
// can rebuild the microphone from what was really played.
func TestPartsMakeNear(t *testing.T) {
	needTools(t, true, false)
	clips, err := Generate(context.Background(), Options{Rate: 16000, Seed: 3, EchoSentences: 1, BargeIns: 2, Backchannels: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clips {
		delay := int(c.Delay * time.Duration(c.Rate) / time.Second)
		var worst float64
		for k := range c.Near {
			acc := float64(c.Background[k])
			if c.User != nil {
				acc += float64(c.User[k])
			}
			for j, g := range c.EchoTaps {
				if p := k - delay - j; p >= 0 && g != 0 {
					acc += g * float64(c.Far[p])
				}
			}
			worst = max(worst, math.Abs(acc-float64(c.Near[k])))
		}
		if worst > 3 {
			t.Errorf("%s: parts differ from Near by up to %.1f", c.Name, worst)
		}
	}
}
