package aec

import "errors"

// ErrUnavailable is wrapped by the error [New] returns when libspeexdsp
// cannot be loaded. The message says what to install; test for it with
// errors.Is to run without echo cancellation.
var ErrUnavailable = errors.New("aec: libspeexdsp unavailable")

// The library is looked up under these names, in order: the runtime
// package ships the first, the -dev package adds the second.
var libNames = []string{"libspeexdsp.so.1", "libspeexdsp.so"}

// libPackage is the Debian package that provides libNames[0].
const libPackage = "libspeexdsp1"

// unavailableError keeps its own message while wrapping ErrUnavailable.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string { return e.msg }
func (e *unavailableError) Unwrap() error { return ErrUnavailable }
