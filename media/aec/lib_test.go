//go:build cgo

package aec

import (
	"errors"
	"strings"
	"testing"
)

func TestMissingLibrary(t *testing.T) {
	_, err := openLib([]string{"libspeexdsp-missing.so.9"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want an error wrapping ErrUnavailable", err)
	}
	want := "aec: libspeexdsp-missing.so.9 not found: install the Debian package libspeexdsp1"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
	t.Log(err)

	// A library that loads but is not speexdsp.
	_, err = openLib([]string{"libm.so.6"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("got %v, want an error wrapping ErrUnavailable", err)
	}
	for _, s := range []string{"libm.so.6 has no symbol speex_echo_state_init", "libspeexdsp1"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	t.Log(err)
}
