package netnstest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/netnstest"
)

// Two namespaces on the bridge reach each other by their addresses, and
// nothing else: there is no route off the bridge.
func TestNamespacesReachEachOtherAndNothingElse(t *testing.T) {
	n := netnstest.New(t)
	a, b := n.Add("a"), n.Add("b")
	srv := b.Command("/usr/bin/python3", "-m", "http.server", "--bind", b.Addr.String(), "8000")
	if _, err := b.Start(srv); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if out, err = a.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://"+b.Addr.String()+":8000/").CombinedOutput(); err == nil {
			break
		}
	}
	if err != nil || string(out) != "200" {
		t.Fatalf("a cannot reach b at %s: %v %s", b.Addr, err, out)
	}
	routes, err := a.Command("ip", "route").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(routes), "default") {
		t.Errorf("a has a default route:\n%s", routes)
	}
	if out, err := a.Command("curl", "-sS", "-m", "2", "http://127.0.0.1:1/").CombinedOutput(); err == nil {
		t.Errorf("a reached the root namespace's loopback: %s", out)
	}
}
