package cli

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
)

// callerNetwork is a network namespace for the browser whose only
// neighbour is this host at HostIP, over a veth pair. Holdline carries
// media on the loopback interface only (serve --ice-interfaces lo), so
// the caller cannot reach it but through a TURN server listening on
// HostIP and relaying from the loopback.
type callerNetwork struct {
	Name           string // the namespace
	HostIP, CallIP string
}

// newCallerNetwork makes the namespace, or skips where namespaces cannot
// be made (not root, no iproute2, a sandbox without CAP_NET_ADMIN).
func newCallerNetwork(t *testing.T) *callerNetwork {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2): cannot make the caller's network namespace")
	}
	id := os.Getpid()%200 + 20
	n := &callerNetwork{
		Name:   fmt.Sprintf("hl-caller-%d", os.Getpid()),
		HostIP: fmt.Sprintf("10.213.%d.1", id),
		CallIP: fmt.Sprintf("10.213.%d.2", id),
	}
	hostIf, nsIf := fmt.Sprintf("hlh%d", os.Getpid()%100000), fmt.Sprintf("hln%d", os.Getpid()%100000)
	ip := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := ip("netns", "add", n.Name); err != nil {
		t.Skipf("network namespaces cannot be made here (needs root and CAP_NET_ADMIN): %v", err)
	}
	t.Cleanup(func() { _ = ip("netns", "del", n.Name) })
	for _, args := range [][]string{
		{"link", "add", hostIf, "type", "veth", "peer", "name", nsIf},
		{"link", "set", nsIf, "netns", n.Name},
		{"addr", "add", n.HostIP + "/24", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", n.Name, "addr", "add", n.CallIP + "/24", "dev", nsIf},
		{"-n", n.Name, "link", "set", nsIf, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	} {
		if err := ip(args...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = ip("link", "del", hostIf) })
	return n
}

// chromium writes a Chromium for playwright that runs in the namespace.
func (n *callerNetwork) chromium(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chromium")
	script := "#!/bin/sh\nexec ip netns exec " + n.Name + " /usr/bin/chromium \"$@\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// coturn is a real TURN server (Debian's coturn) the test started.
type coturn struct {
	Port int
	log  string
}

// startCoturn runs turnserver on port, listening on hostIP and the
// loopback, relaying from the loopback, with auth:
// "lt-cred-mech\nuser=NAME:PASS" for a fixed user, or "use-auth-secret\nstatic-auth-secret=S" for minted ones.
func startCoturn(t *testing.T, ctx context.Context, hostIP string, port int, auth string) *coturn {
	t.Helper()
	bin, err := exec.LookPath("turnserver")
	if err != nil {
		need.Missing(t, "turnserver is missing: make test-deps installs coturn")
	}
	dir := t.TempDir()
	c := &coturn{Port: port, log: filepath.Join(dir, "turnserver.log")}
	conf := strings.Join([]string{
		"listening-port=" + strconv.Itoa(port),
		"listening-ip=" + hostIP,
		"listening-ip=127.0.0.1",
		"relay-ip=127.0.0.1",
		// Holdline is on the loopback here: coturn refuses such peers
		// unless told.
		"allow-loopback-peers",
		"realm=holdline.test",
		"fingerprint",
		auth,
		"no-tls", "no-dtls", "no-cli", "no-multicast-peers",
		"min-port=40000", "max-port=40999",
		"pidfile=" + filepath.Join(dir, "turnserver.pid"),
		"log-file=" + c.log, "simple-log", "verbose",
	}, "\n") + "\n"
	confPath := filepath.Join(dir, "turnserver.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "-c", confPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(c.log)
			t.Logf("turnserver's log (last 4 KB):\n%s", tail(string(b), 4096))
		}
	})
	// Ready when it answers a STUN binding request on its port.
	deadline := time.Now().Add(10 * time.Second)
	for !stunAnswers(hostIP, port) {
		if time.Now().After(deadline) {
			t.Fatalf("turnserver did not answer on %s:%d within 10 s", hostIP, port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// allocations counts the relays coturn allocated for a username with this
// suffix (the session or the page), from its log.
func (c *coturn) allocations(user string) int {
	f, err := os.Open(c.log)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "ALLOCATE processed, success") && strings.Contains(line, user) {
			n++
		}
	}
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func freeUDPPort(t *testing.T, host string) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", host+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// stunAnswers sends one STUN binding request and waits briefly for any
// answer.
func stunAnswers(host string, port int) bool {
	c, err := net.Dial("udp4", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	defer c.Close()
	req := []byte{0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if _, err := c.Write(req); err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	return err == nil && n >= 20 && buf[0] == 0x01 && buf[1] == 0x01
}

// relaySessions is how many relay-only sessions each run makes:
// HOLDLINE_RELAY_SESSIONS, or def.
func relaySessions(t *testing.T, def int) int {
	t.Helper()
	v := os.Getenv("HOLDLINE_RELAY_SESSIONS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("HOLDLINE_RELAY_SESSIONS=%q: want a positive number", v)
	}
	return n
}

// A caller in a network namespace that reaches Holdline's media only
// through a real coturn, the page relay-only: with credentials minted from
// a secret shared with coturn (serve --turn-secret), and with a fixed
// username and password (serve --ice-servers), every session connects over
// a relayed candidate pair and hears the agent, and the first one books.
func TestBrowserReachesTheAgentOnlyThroughTURN(t *testing.T) {
	node, script := needBrowser(t)
	for _, tc := range []struct {
		name     string
		sessions int
		auth     func(hostIP string, port int) (coturnAuth string, flags []string, env string)
	}{
		{"minted from a shared secret", relaySessions(t, 10), func(hostIP string, port int) (string, []string, string) {
			return "use-auth-secret\nstatic-auth-secret=turn-test-secret",
				[]string{"--turn-urls", fmt.Sprintf("turn:%s:%d?transport=udp", hostIP, port)},
				"turn-test-secret"
		}},
		{"a fixed username and password", relaySessions(t, 3), func(hostIP string, port int) (string, []string, string) {
			return "lt-cred-mech\nuser=caller:pa55word",
				[]string{"--ice-servers", fmt.Sprintf(`[{"urls":["turn:%s:%d?transport=udp"],"username":"caller","credential":"pa55word"}]`, hostIP, port)},
				""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			n := newCallerNetwork(t)
			port := freeUDPPort(t, n.HostIP)
			coturnAuth, flags, secret := tc.auth(n.HostIP, port)
			turn := startCoturn(t, ctx, n.HostIP, port, coturnAuth)
			t.Setenv("HOLDLINE_TURN_SECRET", secret)
			// Off the loopback, serve wants a token; the page is given it,
			// and with it the TURN credentials.
			url := serveForBrowserWith(t, ctx, "relay-test-token", append([]string{"--http", n.HostIP + ":0", "--ice-interfaces", "lo"}, flags...)...)
			t.Setenv("CHROMIUM", n.chromium(t))
			wav := callerWAV(t, "Book a table for two at seven.", 1.5, 4)
			r := runBrowser(t, ctx, node, script, "relay", url, wav, t.ArtifactDir(), strconv.Itoa(tc.sessions))
			heard := 0
			for i, s := range r.Relay {
				ok := s.Connected && s.Error == "" && s.GreetingPeakRMS >= 0.02 && s.Local == "relay"
				if ok {
					heard++
				}
				t.Logf("session %d: connected %v in %d ms, greeting peak RMS %.3f, candidates %s (%s) -> %s %s", i+1, s.Connected, s.ConnectMs, s.GreetingPeakRMS, s.Local, s.RelayProtocol, s.Remote, s.Error)
			}
			t.Logf("%d/%d sessions connected through coturn and heard the agent; coturn allocated %d relays", heard, tc.sessions, turn.allocations(""))
			if len(r.Relay) != tc.sessions || heard != tc.sessions {
				t.Errorf("%d/%d sessions heard the agent over a relay", heard, tc.sessions)
			}
			if first := r.Relay[0]; first.Heard != "book a table for two at seven" || first.BookState != "succeeded" {
				t.Errorf("the first caller was heard as %q and the booking %q", first.Heard, first.BookState)
			}
		})
	}
}
