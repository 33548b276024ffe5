package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// The turn flags as a user types them: one silence, a range the words
// choose in, and what is refused, with why.
func TestTurnFlagsTakeASilenceOrARange(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		end, min, max time.Duration
		speculate     bool
		err           string
	}{
		{nil, 500 * time.Millisecond, 0, 0, true, ""},
		{[]string{"--endpointing", "700ms", "--speculate=false"}, 700 * time.Millisecond, 0, 0, false, ""},
		{[]string{"--endpointing", "250ms..1.2s"}, 500 * time.Millisecond, 250 * time.Millisecond, 1200 * time.Millisecond, true, ""},
		{[]string{"--endpointing", "1s..200ms"}, 0, 0, 0, true, "MIN <= MAX"},
		{[]string{"--endpointing", "soon"}, 0, 0, 0, true, "positive duration"},
		{[]string{"--endpointing", "0s"}, 0, 0, 0, true, "positive duration"},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f turnFlags
		f.register(fs)
		err := fs.Parse(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v; want an error saying %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || f.endpointing != tc.end || f.min != tc.min || f.max != tc.max || f.speculate != tc.speculate {
			t.Errorf("%q: %v, endpointing %v range %v..%v speculate %v; want %v %v..%v %v",
				tc.args, err, f.endpointing, f.min, f.max, f.speculate, tc.end, tc.min, tc.max, tc.speculate)
		}
		if len(f.options()) < 2 {
			t.Errorf("%q: %d options", tc.args, len(f.options()))
		}
	}
}
