package silero

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
)

var rates = []int{media.Rate8k, media.Rate16k}

const sentence = "The quick brown fox jumps over the lazy dog. Please call me back tomorrow morning at nine."

// Thresholds. Measured with espeak-ng's voice: over the utterance, gaps
// between words included, 91-93% of windows are above 0.5; digital silence
// stays below 0.03, and white or pink noise at -20 and -30 dBFS below 0.11.
const (
	speechProb     = 0.5
	minSpeechShare = 0.85
	quietProb      = 0.3
)

func TestSpeech(t *testing.T) {
	for _, rate := range rates {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			const lead, trail = 500 * time.Millisecond, 1500 * time.Millisecond
			audio := speech(t, rate, sentence, lead, trail)
			d := newDetector(t, rate)
			probs := windows(t, d, audio)
			lv := levels(audio, d.window)

			// The utterance runs from the first to the last window with
			// some level; within it espeak leaves short gaps between words.
			first, last := -1, -1
			for i, l := range lv {
				if l > -40 {
					if first < 0 {
						first = i
					}
					last = i
				}
			}
			if first < 0 {
				t.Fatal("espeak-ng produced no audible speech")
			}
			high := 0
			for _, p := range probs[first : last+1] {
				if p > speechProb {
					high++
				}
			}
			share := float64(high) / float64(last+1-first)
			t.Logf("%d Hz: %d of %d speech windows (%.0f%%) above %.1f", rate, high, last+1-first, 100*share, speechProb)
			if share < minSpeechShare {
				t.Errorf("%.0f%% of speech windows above %.1f, want at least %.0f%%\n%v",
					100*share, speechProb, 100*minSpeechShare, probs[first:last+1])
			}

			// The silence before, and after the model's hangover (about
			// 200 ms), must read as silence.
			hang := media.SamplesFor(rate, 500*time.Millisecond) / d.window
			var quiet []float32
			quiet = append(quiet, probs[:first]...)
			quiet = append(quiet, probs[min(last+1+hang, len(probs)):]...)
			if len(quiet) < 20 {
				t.Fatalf("only %d silent windows around the speech", len(quiet))
			}
			for i, p := range quiet {
				if p >= quietProb {
					t.Errorf("silent window %d of %d around speech: probability %.3f, want < %.1f", i, len(quiet), p, quietProb)
				}
			}
		})
	}
}

func TestSilenceAndNoise(t *testing.T) {
	const dur = 3 * time.Second
	for _, rate := range rates {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			d := newDetector(t, rate)
			for _, c := range []struct {
				name  string
				audio []int16
			}{
				{"silence", make([]int16, media.SamplesFor(rate, dur))},
				{"white -30 dBFS", whiteNoise(rate, dur, -30, 1)},
				{"pink -30 dBFS", pinkNoise(rate, dur, -30, 1)},
				{"white -20 dBFS", whiteNoise(rate, dur, -20, 2)},
				{"pink -20 dBFS", pinkNoise(rate, dur, -20, 2)},
			} {
				d.Reset()
				probs := windows(t, d, c.audio)
				var peak, sum float32
				for _, p := range probs {
					peak = max(peak, p)
					sum += p
				}
				t.Logf("%d Hz %s: max %.3f, mean %.3f", rate, c.name, peak, sum/float32(len(probs)))
				if peak >= quietProb {
					t.Errorf("%s: max probability %.3f, want < %.1f\n%v", c.name, peak, quietProb, probs)
				}
			}
		})
	}
}

// TestFrameSizes feeds the same audio as exact windows and in frames of
// other sizes: the windows, and so the probabilities, must be the same.
func TestFrameSizes(t *testing.T) {
	for _, rate := range rates {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			audio := speech(t, rate, "Hello, is anybody there?", 300*time.Millisecond, 300*time.Millisecond)
			d := newDetector(t, rate)
			want := windows(t, d, audio)

			ms := func(n int) int { return media.SamplesFor(rate, time.Duration(n)*time.Millisecond) }
			for _, size := range []int{ms(10), ms(20), ms(30), 1, 97, d.window - 1, d.window + 1, ms(100), ms(1000)} {
				d.Reset()
				done := 0 // windows completed so far
				for i := 0; i < len(audio); i += size {
					frame := audio[i:min(i+size, len(audio))]
					k := (d.pending + len(frame)) / d.window
					got, err := d.Detect(media.Frame{Samples: frame, SampleRate: rate})
					if err != nil {
						t.Fatal(err)
					}
					var exp float32
					switch {
					case k > 0:
						// The highest of the windows this frame completed.
						for _, p := range want[done : done+k] {
							exp = max(exp, p)
						}
					case done > 0:
						exp = want[done-1]
					}
					done += k
					if got != exp {
						t.Fatalf("frames of %d samples: frame at sample %d (window %d): got %v, want %v",
							size, i, done, got, exp)
					}
					if done > 0 && d.prob != want[done-1] {
						t.Fatalf("frames of %d samples: window %d has probability %v, want %v",
							size, done-1, d.prob, want[done-1])
					}
				}
				if done != len(want) {
					t.Fatalf("frames of %d samples: %d windows, want %d", size, done, len(want))
				}
			}
		})
	}
}

func TestReset(t *testing.T) {
	audio := speech(t, media.Rate16k, "Reset me", 200*time.Millisecond, 200*time.Millisecond)
	d := newDetector(t, media.Rate16k)
	first := windows(t, d, audio)
	// Leave half a window buffered to check Reset drops it too.
	if _, err := d.Detect(media.Frame{Samples: audio[:d.window/2], SampleRate: d.rate}); err != nil {
		t.Fatal(err)
	}
	d.Reset()
	second := windows(t, d, audio)
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("after Reset, window %d: %v, want %v", i, second[i], first[i])
		}
	}
}

// TestConcurrent runs a Detector per goroutine, as a server does per call:
// each must give the probabilities a lone Detector gives.
func TestConcurrent(t *testing.T) {
	audio := speech(t, media.Rate16k, "One stream each", 200*time.Millisecond, 200*time.Millisecond)
	want := windows(t, newDetector(t, media.Rate16k), audio)
	var wg sync.WaitGroup
	got := make([][]float32, 4)
	dets := make([]*Detector, len(got))
	for i := range dets {
		dets[i] = newDetector(t, media.Rate16k)
	}
	for i, d := range dets {
		wg.Go(func() {
			n := media.SamplesFor(d.rate, 20*time.Millisecond)
			for j := 0; j+n <= len(audio); j += n {
				before := d.pending
				if _, err := d.Detect(media.Frame{Samples: audio[j : j+n], SampleRate: d.rate}); err != nil {
					t.Error(err)
					return
				}
				if d.pending < before+n {
					got[i] = append(got[i], d.prob)
				}
			}
		})
	}
	wg.Wait()
	for i := range got {
		if len(got[i]) != len(want) {
			t.Fatalf("goroutine %d: %d windows, want %d", i, len(got[i]), len(want))
		}
		for j := range want {
			if got[i][j] != want[j] {
				t.Fatalf("goroutine %d, window %d: %v, want %v", i, j, got[i][j], want[j])
			}
		}
	}
}

func TestAllocs(t *testing.T) {
	for _, rate := range rates {
		d := newDetector(t, rate)
		audio := whiteNoise(rate, time.Second, -30, 3)
		n := media.SamplesFor(rate, 20*time.Millisecond)
		i := 0
		allocs := testing.AllocsPerRun(200, func() {
			if i+n > len(audio) {
				i = 0
			}
			if _, err := d.Detect(media.Frame{Samples: audio[i : i+n], SampleRate: rate}); err != nil {
				t.Fatal(err)
			}
			i += n
		})
		t.Logf("%d Hz: %v allocations per 20 ms frame", rate, allocs)
		if allocs != 0 {
			t.Errorf("%d Hz: %v allocations per Detect, want 0", rate, allocs)
		}
	}
}

func TestFrameErrors(t *testing.T) {
	d := newDetector(t, media.Rate16k)
	for _, f := range []media.Frame{
		{},
		{SampleRate: media.Rate16k},
		{Samples: make([]int16, 320)},
	} {
		if _, err := d.Detect(f); !errors.Is(err, vad.ErrEmptyFrame) {
			t.Errorf("Detect(%d samples at %d Hz) = %v, want vad.ErrEmptyFrame", len(f.Samples), f.SampleRate, err)
		}
	}
	_, err := d.Detect(media.Frame{Samples: make([]int16, 160), SampleRate: media.Rate8k})
	if !errors.Is(err, ErrSampleRate) || !strings.Contains(err.Error(), "8000") {
		t.Errorf("8 kHz frame to a 16 kHz detector: %v, want ErrSampleRate naming the rate", err)
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	d.Reset() // must not crash
	if _, err := d.Detect(media.Frame{Samples: make([]int16, 320), SampleRate: media.Rate16k}); !errors.Is(err, ErrClosed) {
		t.Errorf("Detect after Close: %v, want ErrClosed", err)
	}
}

func TestUnsupportedRate(t *testing.T) {
	for _, rate := range []int{0, -1, 24000, 44100, 48000} {
		if _, err := New(rate); !errors.Is(err, ErrSampleRate) {
			t.Errorf("New(%d) = %v, want ErrSampleRate", rate, err)
		}
	}
}

// checkUnavailable checks err is the clear error New gives for a missing or
// broken file.
func checkUnavailable(t *testing.T, err error, mention ...string) {
	t.Helper()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want an error wrapping ErrUnavailable", err)
	}
	for _, s := range append([]string{"make models"}, mention...) {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestMissingLibrary(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libonnxruntime.so.1")
	_, err := New(media.Rate16k, WithLibrary(lib))
	checkUnavailable(t, err, lib, "ONNX Runtime library not found", "onnxruntime-node@1.30.0", "HOLDLINE_ONNXRUNTIME_LIB")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v does not wrap fs.ErrNotExist", err)
	}
	t.Log(err)

	_, err = New(media.Rate16k, WithLibrary(dir))
	checkUnavailable(t, err, dir, "not a regular file")
}

func TestMissingModel(t *testing.T) {
	// The files are checked before either is loaded, so any file will do
	// as the library here.
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib.so")
	if err := os.WriteFile(lib, []byte("not loaded"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "silero_vad.onnx")
	_, err := New(media.Rate8k, WithLibrary(lib), WithModel(model))
	checkUnavailable(t, err, model, "Silero VAD model not found", "@livekit/agents-plugin-silero", "HOLDLINE_SILERO_MODEL")
	t.Log(err)
}

func TestGarbageModel(t *testing.T) {
	requireFiles(t)
	rng := rand.New(rand.NewPCG(7, 7))
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"random.onnx":    garbage,
		"empty.onnx":     nil,
		"truncated.onnx": garbage[:3],
		// A valid ONNX model that is not Silero's: y = Identity(x).
		"identity.onnx": identityModel(),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := New(media.Rate16k, WithModel(path))
		if err == nil {
			d.Close()
			t.Errorf("%s: New succeeded", name)
			continue
		}
		checkUnavailable(t, err, path)
		t.Logf("%s: %v", name, err)
	}
}

// TestGarbageLibrary loads a library that is no library. ONNX Runtime is
// loaded once per process, so this runs in a child process of its own.
func TestGarbageLibrary(t *testing.T) {
	if errNoRuntime != nil {
		absent(t, errNoRuntime)
	}
	if os.Getenv("SILERO_TEST_CHILD") == "1" {
		garbageLibraryChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGarbageLibrary$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "SILERO_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Skipf("child skipped:\n%s", out)
	}
	t.Logf("child:\n%s", out)
}

func garbageLibraryChild(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libonnxruntime.so.1")
	if err := os.WriteFile(lib, []byte("\x7fELF but not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The library fails to load before the model is read.
	model := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(model, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(media.Rate16k, WithLibrary(lib), WithModel(model))
	checkUnavailable(t, err, lib, "cannot load the ONNX Runtime library")
	t.Log(err)
	// The same failure each time, without trying again.
	_, again := New(media.Rate16k, WithLibrary(lib), WithModel(model))
	if again != err {
		t.Errorf("second attempt: %v, want the same error %v", again, err)
	}

	// Another library may still be tried, and then it is the one loaded.
	real, _ := requireFiles(t)
	d, err := New(media.Rate16k, WithLibrary(real))
	if err != nil {
		t.Fatalf("after a failed library, the right one: %v", err)
	}
	d.Close()
	_, err = New(media.Rate16k, WithLibrary(lib))
	if err == nil || !strings.Contains(err.Error(), "already loaded") {
		t.Errorf("another library once one is loaded: %v, want an \"already loaded\" error", err)
	}
	// The one loaded, named through a symbolic link, is fine.
	link := filepath.Join(t.TempDir(), "link.so")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	d, err = New(media.Rate16k, WithLibrary(link))
	if err != nil {
		t.Fatalf("the loaded library by another name: %v", err)
	}
	d.Close()
}

func TestDefaultPaths(t *testing.T) {
	t.Setenv("HOME", "/home/h")
	t.Setenv(envModelsDir, "")
	t.Setenv(envLib, "")
	t.Setenv(envModel, "")
	check := func(env, name, want string) {
		t.Helper()
		if got, err := defaultPath(env, name); err != nil || got != want {
			t.Errorf("defaultPath(%s) = %q, %v; want %q", env, got, err, want)
		}
	}
	check(envLib, libName, "/home/h/.cache/holdline/libonnxruntime.so.1")
	check(envModel, modelName, "/home/h/.cache/holdline/silero_vad.onnx")
	t.Setenv(envModelsDir, "/models")
	check(envLib, libName, "/models/libonnxruntime.so.1")
	check(envModel, modelName, "/models/silero_vad.onnx")
	t.Setenv(envLib, "/lib/ort.so")
	t.Setenv(envModel, "/m/vad.onnx")
	check(envLib, libName, "/lib/ort.so")
	check(envModel, modelName, "/m/vad.onnx")

	// New uses them: a missing file is reported at the default path.
	t.Setenv(envLib, "/nonexistent/ort.so")
	_, err := New(media.Rate16k)
	checkUnavailable(t, err, "/nonexistent/ort.so")
}

// identityModel returns a minimal ONNX model, y = Identity(x) for x a
// float32 [1], encoded by hand (field numbers from onnx.proto).
func identityModel() []byte {
	dim := pbVarint(nil, 1, 1)                                      // Dimension.dim_value
	tensor := pbBytes(pbVarint(nil, 1, 1), 2, pbBytes(nil, 1, dim)) // elem_type FLOAT, shape [1]
	typ := pbBytes(nil, 1, tensor)                                  // TypeProto.tensor_type
	valueInfo := func(name string) []byte {
		return pbBytes(pbBytes(nil, 1, []byte(name)), 2, typ)
	}
	var node []byte
	node = pbBytes(node, 1, []byte("x"))
	node = pbBytes(node, 2, []byte("y"))
	node = pbBytes(node, 4, []byte("Identity"))
	var graph []byte
	graph = pbBytes(graph, 1, node)
	graph = pbBytes(graph, 2, []byte("identity"))
	graph = pbBytes(graph, 11, valueInfo("x"))
	graph = pbBytes(graph, 12, valueInfo("y"))
	var model []byte
	model = pbVarint(model, 1, 7) // ir_version
	model = pbBytes(model, 7, graph)
	return pbBytes(model, 8, pbVarint(nil, 2, 13)) // opset_import version 13
}

// pbVarint appends a varint field to b.
func pbVarint(b []byte, field int, v uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(b, uint64(field<<3)), v)
}

// pbBytes appends a length-delimited field to b.
func pbBytes(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field<<3|2))
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
