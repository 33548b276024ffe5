package corpus

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// These tests need no external tools.

func TestNoise(t *testing.T) {
	for _, rate := range rates {
		r := rand.New(rand.NewPCG(1, 2))
		n := 10 * rate
		x := noise(r, n, rate, noiseLevelDB)
		if l := db(power(x) / fullScale / fullScale); math.Abs(l-noiseLevelDB) > 0.01 {
			t.Errorf("%d Hz: noise at %.2f dBFS, want %v", rate, l, noiseLevelDB)
		}
		// Steady but not constant: half-second levels within a few dB,
		// and not all the same.
		w := rate / 2
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := 0; i+w <= n; i += w {
			l := db(power(x[i : i+w]))
			lo, hi = min(lo, l), max(hi, l)
		}
		if hi-lo < 1 || hi-lo > 7 {
			t.Errorf("%d Hz: half-second noise levels span %.1f dB, want 1-7", rate, hi-lo)
		}
		// Pink-ish: the lower half of the band carries more energy than
		// the upper half (equal for white noise).
		low := biquad(x, lowpass(float64(rate)/4, rate))
		if ratio := db(power(low) / (power(x) - power(low))); ratio < 3 {
			t.Errorf("%d Hz: lower half-band only %.1f dB above the upper", rate, ratio)
		}
		// Deterministic.
		y := noise(rand.New(rand.NewPCG(1, 2)), n, rate, noiseLevelDB)
		if !slices.Equal(x, y) {
			t.Errorf("%d Hz: noise differs for the same seed", rate)
		}
	}
}

func TestDither(t *testing.T) {
	x := dither(rand.New(rand.NewPCG(5, 6)), 100000, ditherLevelDB)
	if l := db(power(x) / fullScale / fullScale); math.Abs(l-ditherLevelDB) > 0.1 {
		t.Errorf("dither at %.2f dBFS, want %v", l, ditherLevelDB)
	}
	q := toInt16(x)
	zeros := 0
	for _, v := range q {
		if v == 0 {
			zeros++
		}
	}
	if zeros > len(q)/10 {
		t.Errorf("%d of %d dither samples round to zero", zeros, len(q))
	}
}

func TestRoomResponse(t *testing.T) {
	for _, rate := range rates {
		for seed := range uint64(50) {
			taps := roomResponse(rand.New(rand.NewPCG(seed, 0)), rate)
			if taps[0] != (tap{0, 1}) || len(taps) < 4 || len(taps) > 6 {
				t.Fatalf("taps %v", taps)
			}
			direct, rest := 1.0, 0.0
			for _, tp := range taps[1:] {
				if ms := 1000 * float64(tp.lag) / float64(rate); ms < 9.9 || ms > 30 {
					t.Errorf("reflection at %.1f ms", ms)
				}
				if math.Abs(tp.gain) > 0.35 {
					t.Errorf("reflection gain %.2f", tp.gain)
				}
				rest += tp.gain * tp.gain
			}
			if direct < 2*rest {
				t.Errorf("direct path carries %.0f%% of the energy", 100*direct/(direct+rest))
			}
		}
	}
}

func TestEchoOf(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	far := toInt16(noise(r, 16000, 16000, -20))
	taps := roomResponse(r, 16000)
	for _, g := range echoGains {
		e := echoOf(far, taps, 960, g, 16000+2000)
		// Energies, not powers: the echo runs on past Far.
		level := db(power(e) * float64(len(e)) / (power(toFloat(far)) * float64(len(far))))
		if math.Abs(level-g) > 0.01 {
			t.Errorf("gain %v: echo at %.3f dB", g, level)
		}
		for i := range 960 {
			if e[i] != 0 {
				t.Fatalf("gain %v: echo before the delay at %d", g, i)
			}
		}
	}
	// Cut off at n.
	if e := echoOf(far, taps, 960, -6, 1000); len(e) != 1000 {
		t.Errorf("len %d", len(e))
	}
}

func TestActiveRMSAndSpan(t *testing.T) {
	// A 1 s tone at -20 dBFS RMS between 1 s silences: the active level
	// ignores the silences, the span finds the tone.
	rate := 16000
	x := make([]float64, 3*rate)
	a := dbToAmp(-20) * math.Sqrt2
	for i := rate; i < 2*rate; i++ {
		x[i] = a * math.Sin(2*math.Pi*440*float64(i)/float64(rate))
	}
	if l := 20 * math.Log10(activeRMS(x, rate)/fullScale); math.Abs(l+20) > 0.01 {
		t.Errorf("active level %.2f dBFS, want -20", l)
	}
	on, off, ok := span(x, onsetThreshold)
	if !ok || (on-rate) > 2 || (2*rate-off) > 20 {
		t.Errorf("span %d-%d (%v), want about %d-%d", on, off, ok, rate, 2*rate)
	}
	if _, _, ok := span(make([]float64, 10), onsetThreshold); ok {
		t.Error("span of silence")
	}
	if activeRMS(make([]float64, 100), rate) != 0 {
		t.Error("active level of silence")
	}
}

func TestSaturate(t *testing.T) {
	got := toInt16([]float64{0.4, 0.5, -0.5, 1e6, -1e6, 32767.4, -32768.6})
	want := []int16{0, 1, -1, 32767, -32768, 32767, -32768}
	if !slices.Equal(got, want) {
		t.Errorf("toInt16: %v, want %v", got, want)
	}
}

func TestParseHypseg(t *testing.T) {
	in := "u000001 S 0 T -10158 A -9484 L -674 0 -1024 0 wait 37 0 0 (NULL) 38 -350 -337 <sil> 57 -2792 0 actually 111 0 0 (NULL) 112 -1495 0 friday(2) 251 -230 -337 <sil> 285\n" +
		"u000002 S 0 T -719 A -382 L -337 0 -382 -337 <sil> 300\n"
	got, err := parseHypseg(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Word{
		{"wait", 0, 370 * time.Millisecond},
		{"actually", 570 * time.Millisecond, 1110 * time.Millisecond},
		{"friday", 1120 * time.Millisecond, 2510 * time.Millisecond},
	}
	if !slices.Equal(got["u000001"], want) {
		t.Errorf("got %v, want %v", got["u000001"], want)
	}
	if w, ok := got["u000002"]; !ok || len(w) != 0 {
		t.Errorf("silence: %v %v", w, ok)
	}
	for _, bad := range []string{"u1 S 0 T 0 A 0 L 0", "u1 S 0 T 0 A 0 L 0 0 1 2 w", "u1 S 0 T 0 A 0 L 0 x 1 2 w 5"} {
		if _, err := parseHypseg(strings.NewReader(bad)); err == nil {
			t.Errorf("parseHypseg(%q): no error", bad)
		}
	}
}

func TestCleanWord(t *testing.T) {
	for in, want := range map[string]string{
		"word": "word", "word(2)": "word", "uh-huh": "uh-huh", "don't(3)": "don't",
		"(NULL)": "", "<sil>": "", "<s>": "", "</s>": "", "[NOISE]": "", "++BREATH++": "",
	} {
		got, ok := cleanWord(in)
		if got != want || ok != (want != "") {
			t.Errorf("cleanWord(%q) = %q, %v", in, got, ok)
		}
	}
}

func TestVocabulary(t *testing.T) {
	clips := []Clip{
		{AgentText: "I can book a table, for FOUR.", UserText: "Wait, actually — don't!"},
		{AgentText: "A table for four?"},
	}
	got := Vocabulary(clips)
	want := []string{"a", "actually", "book", "can", "don't", "for", "four", "i", "mm-hmm", "okay", "right", "table", "uh-huh", "wait", "yeah"}
	if !slices.Equal(got, want) {
		t.Errorf("Vocabulary:\n got %v\nwant %v", got, want)
	}
	if g := normaliseVocab([]string{"Yes", "yes", " no ", "a|b", "<sil>", ""}); !slices.Equal(g, []string{"no", "yes"}) {
		t.Errorf("normaliseVocab: %v", g)
	}
	if g := jsgf([]string{"no", "yes"}); !strings.Contains(g, "= <word>*;") || !strings.Contains(g, "<word> = no | yes;") {
		t.Errorf("grammar:\n%s", g)
	}
}

// TestResamplerDelay checks resamplerDelay against media.Resampler: an
// impulse comes out of to16k where it went in.
func TestResamplerDelay(t *testing.T) {
	for _, rate := range []int{8000, 22050, 24000, 48000} {
		x := make([]int16, rate/10)
		x[rate/20] = 20000
		y, err := to16k(x, rate)
		if err != nil {
			t.Fatal(err)
		}
		if want := (len(x)*psRate + rate - 1) / rate; len(y) != want {
			t.Errorf("%d Hz: %d samples out, want %d", rate, len(y), want)
		}
		peak := 0
		for i, v := range y {
			if v > y[peak] {
				peak = i
			}
		}
		if want := float64(rate/20) * psRate / float64(rate); math.Abs(float64(peak)-want) > 1 {
			t.Errorf("%d Hz: impulse at %d, want %.1f", rate, peak, want)
		}
	}
}

func TestPlansStable(t *testing.T) {
	// Changing one kind's count leaves the other kinds' clips alone.
	a := makePlans(Options{Rate: 16000, Seed: 3, EchoSentences: 1, BargeIns: 10, Backchannels: 5})
	b := makePlans(Options{Rate: 16000, Seed: 3, EchoSentences: 2, BargeIns: 10, Backchannels: 7})
	pick := func(ps []plan, k Kind) []string {
		var out []string
		for _, p := range ps {
			if p.Kind == k {
				out = append(out, p.Name+" "+p.AgentText+" "+p.UserText)
			}
		}
		return out
	}
	if !slices.Equal(pick(a, BargeIn), pick(b, BargeIn)) {
		t.Error("barge-in clips changed with the other counts")
	}
}
