package cli

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
)

// A call on this machine's engines alone, tried as a new user would: no
// key, so the console runs the demo model with espeak-ng as its voice and
// pocketsphinx with the booking agent's grammar as its ears; the caller is
// espeak-ng's other voice, spoken down a live line. The caller is heard,
// book_table runs once and the reply is spoken.
func TestLocalEnginesEndToEnd(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	espeak, err := exec.LookPath("espeak-ng")
	if err != nil {
		need.Missing(t, "espeak-ng is missing: apt-get install espeak-ng")
	}
	wav := filepath.Join(t.TempDir(), "caller.wav")
	if out, err := exec.Command(espeak, "-v", "en-us+edward", "-p", "35", "-s", "175", "-w", wav, "Book a table for two at seven.").CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errs bytes.Buffer
	if err := run(ctx, []string{"console", "--agent", "booking", "--audio-in", wav}, nil, &out, &errs); err != nil {
		t.Fatalf("console: %v\nstdout: %s\nstderr: %s", err, out.String(), errs.String())
	}
	got := out.String()
	t.Logf("\n%s", got)
	for _, want := range []string{
		"user: book a table for two at seven\n",
		"tool: book_table -> succeeded\n",
		"agent: You're booked: a table for two at 19:00.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s\nstderr: %s", want, got, errs.String())
		}
	}
	if n := strings.Count(got, "tool: book_table"); n != 1 {
		t.Errorf("book_table ran %d times; want once", n)
	}
}
