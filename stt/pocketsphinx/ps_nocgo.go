//go:build !cgo

package pocketsphinx

import "unsafe"

// Without cgo pocketsphinx cannot be loaded: New fails with
// ErrMissingLibrary and the rest is never reached.

type cLib struct{}

const maxArgs = 48

var errNoCgo = &missingError{"pocketsphinx: built without cgo (CGO_ENABLED=0): rebuild with cgo to load " +
	psLibNames[0] + " (Debian packages " + aptPackages + ")", ErrMissingLibrary}

func loadLib() (*cLib, error) { return nil, errNoCgo }

func openLib(_, _ []string) (*cLib, error) { return nil, errNoCgo }

type decoder struct{ ps unsafe.Pointer }

func newDecoder(*cLib, []string) (*decoder, error) { return nil, errNoCgo }
func (*decoder) start() error                      { return errNoCgo }
func (*decoder) process([]int16) error             { return errNoCgo }
func (*decoder) processWhole([]int16) error        { return errNoCgo }
func (*decoder) hyp() string                       { return "" }
func (*decoder) end() (string, error)              { return "", errNoCgo }
func (*decoder) decode([]int16) (string, error)    { return "", errNoCgo }
func (*decoder) free()                             {}
