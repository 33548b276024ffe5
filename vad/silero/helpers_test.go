package silero

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
)

// absent ends a test whose files or tools are missing: a failure when
// HOLDLINE_REQUIRE_MODELS=1 (as under "make test"), else a skip.
func absent(t testing.TB, err error) {
	t.Helper()
	need.Missing(t, err)
}

// errNoRuntime is set when ONNX Runtime cannot be loaded in this build.
var errNoRuntime error

// requireFiles locates the library and the model as New does and ends the
// test with absent if either is missing.
func requireFiles(t testing.TB) (lib, model string) {
	t.Helper()
	if errNoRuntime != nil {
		absent(t, errNoRuntime)
	}
	lib, err := libFile.resolve("", libName)
	if err == nil {
		_, err = libFile.check(lib)
	}
	if err != nil {
		absent(t, err)
	}
	model, err = modelFile.resolve("", modelName)
	if err == nil {
		_, err = modelFile.check(model)
	}
	if err != nil {
		absent(t, err)
	}
	return lib, model
}

// newDetector returns a Detector with the default files, closed when the
// test ends.
func newDetector(t testing.TB, rate int) *Detector {
	t.Helper()
	requireFiles(t)
	d, err := New(rate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

// speech synthesises text with espeak-ng at rate, with lead and trail of
// digital silence around it.
func speech(t testing.TB, rate int, text string, lead, trail time.Duration) []int16 {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		absent(t, err)
	}
	path := filepath.Join(t.TempDir(), "speech.wav")
	if out, err := exec.Command("espeak-ng", "-w", path, text).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	samples, from, err := media.ReadWAV(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	r, err := media.NewResampler(from, rate)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int16, media.SamplesFor(rate, lead), r.OutputLen(len(samples))+media.SamplesFor(rate, lead+trail))
	out = r.Process(out, samples)
	return append(out, make([]int16, media.SamplesFor(rate, trail))...)
}

// whiteNoise returns d of Gaussian white noise at an RMS level of dBFS.
func whiteNoise(rate int, d time.Duration, dBFS float64, seed uint64) []int16 {
	rng := rand.New(rand.NewPCG(seed, 1))
	rms := 32768 * math.Pow(10, dBFS/20)
	out := make([]int16, media.SamplesFor(rate, d))
	for i := range out {
		out[i] = sat(rng.NormFloat64() * rms)
	}
	return out
}

// pinkNoise returns d of pink (1/f) noise at an RMS level of dBFS, from
// white noise through Paul Kellet's economy filter.
func pinkNoise(rate int, d time.Duration, dBFS float64, seed uint64) []int16 {
	rng := rand.New(rand.NewPCG(seed, 2))
	x := make([]float64, media.SamplesFor(rate, d))
	var b0, b1, b2 float64
	sum := 0.0
	for i := range x {
		w := rng.NormFloat64()
		b0 = 0.99765*b0 + w*0.0990460
		b1 = 0.96300*b1 + w*0.2965164
		b2 = 0.57000*b2 + w*1.0526913
		x[i] = b0 + b1 + b2 + w*0.1848
		sum += x[i] * x[i]
	}
	gain := 32768 * math.Pow(10, dBFS/20) / math.Sqrt(sum/float64(len(x)))
	out := make([]int16, len(x))
	for i, v := range x {
		out[i] = sat(v * gain)
	}
	return out
}

func sat(v float64) int16 {
	return int16(max(min(math.Round(v), math.MaxInt16), math.MinInt16))
}

// windows feeds audio to d one model window at a time and returns each
// window's probability.
func windows(t testing.TB, d *Detector, audio []int16) []float32 {
	t.Helper()
	var probs []float32
	for i := 0; i+d.window <= len(audio); i += d.window {
		p, err := d.Detect(media.Frame{Samples: audio[i : i+d.window], SampleRate: d.rate})
		if err != nil {
			t.Fatal(err)
		}
		if p < 0 || p > 1 || math.IsNaN(float64(p)) {
			t.Fatalf("window %d: probability %v", len(probs), p)
		}
		probs = append(probs, p)
	}
	return probs
}

// levels returns the RMS level in dBFS of each whole window of audio.
func levels(audio []int16, window int) []float64 {
	var out []float64
	for i := 0; i+window <= len(audio); i += window {
		out = append(out, vad.Level(audio[i:i+window]))
	}
	return out
}
