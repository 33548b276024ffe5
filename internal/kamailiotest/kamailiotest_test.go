package kamailiotest_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/kamailiotest"
)

// TestStartStopRestart: Kamailio starts on its ports, answers, stops by
// its process group, and starts again on the same ports; an AOR no one
// registered has no contacts.
func TestStartStopRestart(t *testing.T) {
	k := kamailiotest.Start(t, map[string]string{"alice": "pw"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := k.Contacts(ctx, "alice@127.0.0.1")
	if err != nil || len(c) != 0 {
		t.Fatalf("contacts of an AOR never registered: %v, %v", c, err)
	}
	udp := k.UDP
	if err := k.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Contacts(ctx, "alice@127.0.0.1"); err == nil {
		t.Error("ctl answered while kamailio is stopped")
	}
	start := time.Now()
	if err := k.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %v", time.Since(start))
	if k.UDP != udp {
		t.Errorf("restarted on %s, want %s", k.UDP, udp)
	}
}
