package silero

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/vad"
)

// Errors from New and Detect besides those wrapping ErrUnavailable.
var (
	// ErrSampleRate is wrapped by New for a rate other than 8 or 16 kHz, and
	// by Detect for a frame at another rate than the Detector's.
	ErrSampleRate = errors.New("silero: wrong sample rate")
	// ErrClosed is returned by Detect after Close.
	ErrClosed = errors.New("silero: detector is closed")
)

// Option configures [New].
type Option func(*config)

type config struct {
	lib, model string
}

// WithLibrary sets the path of the ONNX Runtime shared library. The default
// is $HOLDLINE_ONNXRUNTIME_LIB, else libonnxruntime.so.1 in
// $HOLDLINE_MODELS_DIR, else ~/.cache/holdline/libonnxruntime.so.1.
//
// The library is loaded once per process: after a successful New, every
// later one must name the same file (or leave the default that found it).
func WithLibrary(path string) Option { return func(c *config) { c.lib = path } }

// WithModel sets the path of the Silero VAD v5 ONNX model. The default is
// $HOLDLINE_SILERO_MODEL, else silero_vad.onnx in $HOLDLINE_MODELS_DIR,
// else ~/.cache/holdline/silero_vad.onnx.
func WithModel(path string) Option { return func(c *config) { c.model = path } }

// Detector is a [vad.Detector] running Silero VAD on one audio stream. It
// holds an ONNX Runtime session, which Close frees.
type Detector struct {
	rate    int
	window  int    // samples the model takes per run
	context int    // samples of the previous window prepended to the next one
	m       *model // nil once closed
	cleanup runtime.Cleanup

	in      []float32 // the model's input: context, then the window being filled
	pending int       // samples of the window filled so far
	prob    float32   // of the latest window
}

var _ vad.Detector = (*Detector)(nil)

// New returns a Detector for a stream at rate, 8000 or 16000 Hz, loading
// ONNX Runtime (once per process) and the model. If either file is missing
// or cannot be loaded, the error wraps [ErrUnavailable] and says how to get
// it. The caller must Close the Detector.
func New(rate int, opts ...Option) (*Detector, error) {
	var window, context int
	switch rate {
	case media.Rate16k:
		window, context = 512, 64
	case media.Rate8k:
		window, context = 256, 32
	default:
		return nil, fmt.Errorf("%w: %d Hz, want 8000 or 16000", ErrSampleRate, rate)
	}

	var c config
	for _, o := range opts {
		o(&c)
	}
	libPath, err := libFile.resolve(c.lib, libName)
	if err != nil {
		return nil, err
	}
	modelPath, err := modelFile.resolve(c.model, modelName)
	if err != nil {
		return nil, err
	}
	// Missing files are reported by name here rather than by whatever
	// ONNX Runtime makes of them.
	libInfo, err := libFile.check(libPath)
	if err != nil {
		return nil, err
	}
	if _, err := modelFile.check(modelPath); err != nil {
		return nil, err
	}

	m, err := newModel(libPath, libInfo, modelPath, rate, context+window)
	if err != nil {
		return nil, err
	}
	d := &Detector{
		rate:    rate,
		window:  window,
		context: context,
		m:       m,
		in:      m.input(),
	}
	// A run on silence checks that the model is Silero VAD v5 and takes
	// ONNX Runtime's first-run allocations out of the audio path.
	if _, err := d.infer(); err != nil {
		m.destroy()
		return nil, unavailable(err,
			"silero: %s is not a Silero VAD v5 model (inputs input, state, sr; outputs output, stateN): %v: %s",
			modelPath, err, modelFile.hint())
	}
	d.Reset()
	d.cleanup = runtime.AddCleanup(d, (*model).destroy, m)
	return d, nil
}

// Detect implements [vad.Detector]. f must be at the Detector's rate and
// may be of any length: samples are buffered into the model's windows of
// 32 ms (512 samples at 16 kHz, 256 at 8 kHz). Detect returns the
// probability of the window that f completed or, if f completed several,
// the highest of them; if f completed none, the probability of the latest
// window before it (0 before the first).
//
// So a 20 ms frame is judged with up to 32 ms of delay. Steady-state calls
// allocate nothing.
func (d *Detector) Detect(f media.Frame) (float32, error) {
	if len(f.Samples) == 0 || f.SampleRate <= 0 {
		return 0, vad.ErrEmptyFrame
	}
	if d.m == nil {
		return 0, ErrClosed
	}
	if f.SampleRate != d.rate {
		return 0, fmt.Errorf("%w: frame at %d Hz, detector at %d Hz", ErrSampleRate, f.SampleRate, d.rate)
	}
	best, ran := float32(0), false
	for s := f.Samples; len(s) > 0; {
		n := copyScaled(d.in[d.context+d.pending:], s)
		s = s[n:]
		d.pending += n
		if d.pending < d.window {
			break
		}
		p, err := d.infer()
		if err != nil {
			return d.prob, fmt.Errorf("silero: running the model: %w", err)
		}
		if !ran || p > best {
			best, ran = p, true
		}
	}
	if !ran {
		return d.prob, nil
	}
	return best, nil
}

// copyScaled converts PCM16 samples to floats in [-1, 1) as the model
// wants them, filling as much of dst as src allows.
func copyScaled(dst []float32, src []int16) int {
	n := min(len(dst), len(src))
	for i, v := range src[:n] {
		dst[i] = float32(v) * (1.0 / 32768)
	}
	return n
}

// infer runs the model on the full window in d.in and readies the next.
func (d *Detector) infer() (float32, error) {
	d.pending = 0
	p, err := d.m.run()
	if err != nil {
		return 0, err
	}
	// The next window is preceded by the last samples of this one.
	copy(d.in[:d.context], d.in[len(d.in)-d.context:])
	d.prob = p
	return p, nil
}

// Reset clears the recurrent state and the buffered samples, as if the
// Detector were new: use it when the stream is cut (a new call on a pooled
// Detector, say).
func (d *Detector) Reset() {
	if d.m == nil {
		return
	}
	d.m.resetState()
	clear(d.in)
	d.pending = 0
	d.prob = 0
}

// Close frees the ONNX Runtime session and tensors. Closing twice is a
// no-op; Detect after Close returns [ErrClosed]. The ONNX Runtime library
// stays loaded for other Detectors.
func (d *Detector) Close() error {
	if d.m == nil {
		return nil
	}
	d.cleanup.Stop()
	d.m.destroy()
	d.m = nil
	d.in = nil
	return nil
}
