package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// --srtp takes off, optional or required, on serve and on call; any
// other value stops the command at once with an error naming the flag
// and the choices.
func TestSRTPFlag(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--sip", "udp:127.0.0.1:0", "--srtp", "mandatory"},
		{"serve", "--srtp", "yes"},
		{"call", "sip:bob@127.0.0.1:5060", "--srtp", "on"},
	} {
		var out, errs bytes.Buffer
		err := run(context.Background(), args, strings.NewReader(""), &out, &errs)
		if err == nil || !strings.Contains(err.Error(), "--srtp") || !strings.Contains(err.Error(), "off, optional or required") {
			t.Errorf("%v: %v; want an error naming --srtp and its values", args, err)
		}
	}
}
