//go:build cgo

package silero

import (
	"fmt"
	"os"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// The ONNX Runtime environment is process-wide in onnxruntime_go: one
// library, loaded once.
var env struct {
	sync.Mutex
	path string      // library loaded, "" if none or loaded by someone else
	info os.FileInfo // of path, to recognise it under another name
	// The last failed attempt: the same path fails again with the same
	// error without another dlopen; a different path is tried afresh.
	failPath string
	failErr  error
}

// initRuntime loads the ONNX Runtime library at path (checked to exist)
// unless it is loaded. It must succeed before any tensor or session is
// made.
func initRuntime(path string, info os.FileInfo) error {
	env.Lock()
	defer env.Unlock()
	if ort.IsInitialized() {
		if env.path == "" || env.path == path || os.SameFile(env.info, info) {
			// Loaded by us, or by another package of this process: use it.
			return nil
		}
		return fmt.Errorf("silero: ONNX Runtime is already loaded from %s in this process; cannot also load %s",
			env.path, path)
	}
	if env.failErr != nil && env.failPath == path {
		return env.failErr
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(); err != nil {
		env.failPath = path
		env.failErr = unavailable(err,
			`silero: cannot load the %s %s: %v: it must be ONNX Runtime 1.24 or later for this platform; delete it and run "make models" (%s), or set %s`,
			libFile.what, path, err, libFile.origin, libFile.env)
		return env.failErr
	}
	env.path, env.info = path, info
	env.failPath, env.failErr = "", nil
	return nil
}

// model holds what ONNX Runtime knows of: a session and the tensors it
// reads and writes, whose Go backing slices are filled and read in place.
// It is apart from Detector so that a Detector dropped without Close can
// be freed by a cleanup.
type model struct {
	session *ort.AdvancedSession
	in      *ort.Tensor[float32] // "input" [1, context+window]
	state   *ort.Tensor[float32] // "state" [2, 1, 128]
	sr      *ort.Scalar[int64]   // "sr", the sample rate, shape []
	out     *ort.Tensor[float32] // "output" [1, 1], the speech probability
	stateN  *ort.Tensor[float32] // "stateN" [2, 1, 128], the next state
}

// newModel loads the library at libPath if need be, and the model at
// modelPath for a stream at rate, taking inputLen samples per run.
func newModel(libPath string, libInfo os.FileInfo, modelPath string, rate, inputLen int) (_ *model, err error) {
	if err := initRuntime(libPath, libInfo); err != nil {
		return nil, err
	}
	m := new(model)
	defer func() {
		if err != nil {
			m.destroy()
		}
	}()
	if m.in, err = ort.NewEmptyTensor[float32](ort.NewShape(1, int64(inputLen))); err != nil {
		return nil, fmt.Errorf("silero: creating tensors: %w", err)
	}
	if m.state, err = ort.NewEmptyTensor[float32](ort.NewShape(2, 1, 128)); err != nil {
		return nil, fmt.Errorf("silero: creating tensors: %w", err)
	}
	// Set once: Scalar.Set replaces the Go value without updating the
	// tensor ONNX Runtime reads.
	if m.sr, err = ort.NewScalar(int64(rate)); err != nil {
		return nil, fmt.Errorf("silero: creating tensors: %w", err)
	}
	if m.out, err = ort.NewEmptyTensor[float32](ort.NewShape(1, 1)); err != nil {
		return nil, fmt.Errorf("silero: creating tensors: %w", err)
	}
	if m.stateN, err = ort.NewEmptyTensor[float32](ort.NewShape(2, 1, 128)); err != nil {
		return nil, fmt.Errorf("silero: creating tensors: %w", err)
	}

	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("silero: session options: %w", err)
	}
	defer opts.Destroy()
	// One window is little work: a thread pool would cost more than it
	// saves, and a server runs many streams side by side.
	if err = opts.SetIntraOpNumThreads(1); err == nil {
		if err = opts.SetInterOpNumThreads(1); err == nil {
			err = opts.SetExecutionMode(ort.ExecutionModeSequential)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("silero: session options: %w", err)
	}

	m.session, err = ort.NewAdvancedSession(modelPath,
		[]string{"input", "state", "sr"}, []string{"output", "stateN"},
		[]ort.Value{m.in, m.state, m.sr}, []ort.Value{m.out, m.stateN}, opts)
	if err != nil {
		return nil, unavailable(err,
			"silero: cannot load the %s %s: %v: the file may be damaged; delete it and %s",
			modelFile.what, modelPath, err, modelFile.hint())
	}
	return m, nil
}

// input returns the slice backing the model's input, to be filled in place.
func (m *model) input() []float32 { return m.in.GetData() }

// run runs the model on its input and carries the state over to the next
// run. It allocates nothing.
func (m *model) run() (float32, error) {
	if err := m.session.Run(); err != nil {
		return 0, err
	}
	copy(m.state.GetData(), m.stateN.GetData())
	return m.out.GetData()[0], nil
}

func (m *model) resetState() { clear(m.state.GetData()) }

// destroy frees the session and the tensors; it may be called on a model
// partly made, and twice.
func (m *model) destroy() {
	// The session first: it refers to the tensors.
	if m.session != nil {
		m.session.Destroy()
	}
	for _, t := range []*ort.Tensor[float32]{m.in, m.state, m.out, m.stateN} {
		if t != nil {
			t.Destroy()
		}
	}
	if m.sr != nil {
		m.sr.Destroy()
	}
	*m = model{}
}
