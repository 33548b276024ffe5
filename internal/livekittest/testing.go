package livekittest

import (
	"bytes"
	"context"
	"os"
	"sync"
	"testing"
)

// StartT starts a livekit-server for t on free loopback ports and stops
// it when t ends; its log is printed if t failed. It builds the binary
// the first time (minutes). When livekit-server cannot be built t is
// skipped, unless HOLDLINE_REQUIRE_MODELS is set (make test sets it):
// then t fails.
func StartT(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var buildLog bytes.Buffer
	bin, err := Binary(context.Background(), &buildLog)
	if err != nil {
		if os.Getenv("HOLDLINE_REQUIRE_MODELS") != "" {
			t.Fatalf("livekit-server %s is needed (HOLDLINE_REQUIRE_MODELS is set): %v", Version, err)
		}
		t.Skipf("livekit-server %s could not be built (make test-deps builds it): %v", Version, err)
	}
	logs := &syncBuffer{}
	s, err := Start(t.Context(), bin, t.TempDir(), logs, opts...)
	if err != nil {
		t.Fatalf("%v\nlivekit-server's log:\n%s", err, logs.String())
	}
	s.log = logs
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("livekit-server's log:\n%s", logs.tail(16<<10))
		}
	})
	return s
}

// syncBuffer is a buffer two writers (stdout and stderr) may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (b *syncBuffer) tail(n int) string {
	s := b.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
