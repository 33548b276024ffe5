package webrtc_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/webrtc"
)

// WithInterfaces("lo") answers with loopback candidates only; with no
// names it is refused.
func TestWithInterfacesKeepsCandidatesOnThem(t *testing.T) {
	if _, err := webrtc.NewTransport(webrtc.WithInterfaces()); err == nil {
		t.Error("WithInterfaces() with no names accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"), webrtc.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := dialPeer(t, ctx, tr)
	n := 0
	for _, line := range strings.Split(p.Answer(), "\n") {
		if !strings.HasPrefix(line, "a=candidate:") {
			continue
		}
		n++
		f := strings.Fields(line)
		if len(f) < 6 || (f[4] != "127.0.0.1" && f[4] != "::1") {
			t.Errorf("candidate off the loopback interface: %s", line)
		}
	}
	if n == 0 {
		t.Errorf("no candidates in the answer:\n%s", p.Answer())
	}
}
