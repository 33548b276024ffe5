//go:build cgo

package pocketsphinx

import (
	"errors"
	"strings"
	"testing"
)

func TestMissingLibrary(t *testing.T) {
	_, err := openLib([]string{"libpocketsphinx-missing.so.9"}, []string{"libsphinxbase-missing.so.9"})
	if !errors.Is(err, ErrMissingLibrary) {
		t.Fatalf("got %v, want ErrMissingLibrary", err)
	}
	want := "pocketsphinx: libpocketsphinx-missing.so.9 or libsphinxbase-missing.so.9 not found: install the Debian packages pocketsphinx pocketsphinx-en-us"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
	t.Log(err)

	// Libraries that load but are not pocketsphinx.
	_, err = openLib([]string{"libm.so.6"}, []string{"libc.so.6"})
	if !errors.Is(err, ErrMissingLibrary) {
		t.Fatalf("got %v, want ErrMissingLibrary", err)
	}
	for _, s := range []string{"no symbol ps_args", aptPackages} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	t.Log(err)
}
