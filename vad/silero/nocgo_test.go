//go:build !cgo

package silero

import "errors"

func init() {
	errNoRuntime = errors.New("silero: built without cgo (CGO_ENABLED=0), so ONNX Runtime cannot be loaded")
}
