package espeak

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/holdline/holdline/internal/need"
)

// absent ends a test whose espeak-ng is missing: a failure when
// HOLDLINE_REQUIRE_MODELS=1 (as under "make test", which installs it),
// else a skip.
func absent(t testing.TB, err error) {
	t.Helper()
	need.Missing(t, err)
}

// newSynth returns a Synthesizer on the real espeak-ng, or ends the test
// with absent.
func newSynth(t testing.TB, opts ...Option) *Synthesizer {
	t.Helper()
	s, err := New(opts...)
	if errors.Is(err, ErrMissingBinary) {
		absent(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeBinary writes a shell script standing in for espeak-ng: it passes
// New's voice check and runs body for synthesis.
func fakeBinary(t testing.TB, body string) string {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	path := filepath.Join(t.TempDir(), "espeak-ng")
	script := "#!/bin/sh\nif [ \"$1\" = -q ]; then exit 0; fi\n" + body + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// zombies returns the process ids of this process's children that have
// exited but not been reaped.
func zombies(t testing.TB) []int {
	t.Helper()
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split
		// after its closing parenthesis.
		s := string(b)
		rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(rest) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(rest[1])
		if ppid == self && rest[0] == "Z" {
			out = append(out, pid)
		}
	}
	return out
}
