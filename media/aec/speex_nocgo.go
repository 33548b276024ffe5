//go:build !cgo

package aec

// Without cgo libspeexdsp cannot be loaded: New fails with ErrUnavailable
// and the rest is never reached.

type cLib struct{}

var errNoCgo = &unavailableError{"aec: built without cgo (CGO_ENABLED=0): " +
	"rebuild with cgo to load " + "libspeexdsp.so.1 (Debian package " + libPackage + ")"}

func loadLib() (*cLib, error) { return nil, errNoCgo }

func openLib([]string) (*cLib, error) { return nil, errNoCgo }

type speexState struct{}

func newSpeex(*cLib, int, int, int, bool, int, int) (speexState, error) {
	return speexState{}, errNoCgo
}

func (speexState) cancel(rec, play, out []int16) { copy(out, rec) }
func (speexState) reset()                        {}
func (speexState) free()                         {}
