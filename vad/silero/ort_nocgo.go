//go:build !cgo

package silero

import "os"

// Without cgo, onnxruntime_go does not build and ONNX Runtime cannot be
// loaded: New reports Silero as unavailable, so that callers fall back to
// another detector as when the files are missing.

type model struct{}

func newModel(libPath string, _ os.FileInfo, _ string, _, _ int) (*model, error) {
	return nil, unavailable(nil,
		"silero: cannot load the %s %s: this program was built without cgo (CGO_ENABLED=0), which loading ONNX Runtime needs; rebuild with CGO_ENABLED=1",
		libFile.what, libPath)
}

func (*model) input() []float32      { return nil }
func (*model) run() (float32, error) { return 0, nil }
func (*model) resetState()           {}
func (*model) destroy()              {}
