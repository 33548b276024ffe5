package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/internal/kamailiotest"
)

// --sip-register is refused at start-up, with a reason naming what to
// fix, without --sip, without the password, with a bad expiry or AOR;
// it is repeatable, and the password is in no error.
func TestSIPRegisterFlags(t *testing.T) {
	const pw = "registrar-secret"
	for _, c := range []struct {
		name      string
		aors      []string
		serving   bool
		expires   time.Duration
		password  string
		wantInErr string
	}{
		{"no password", []string{"sip:100@pbx.example"}, true, 300 * time.Second, "", "HOLDLINE_SIP_PASSWORD"},
		{"no --sip", []string{"sip:100@pbx.example"}, false, 300 * time.Second, pw, "needs --sip"},
		{"expires too short", []string{"sip:100@pbx.example"}, true, 0, pw, "--sip-register-expires"},
		{"not an AOR", []string{"sip:100@pbx.example", "pbx.example"}, true, 300 * time.Second, pw, `--sip-register "pbx.example"`},
	} {
		_, err := sipRegistrations(c.aors, c.serving, c.expires, c.password)
		if err == nil || !strings.Contains(err.Error(), c.wantInErr) || strings.Contains(err.Error(), pw) {
			t.Errorf("%s: err %v, want one with %q and without the password", c.name, err, c.wantInErr)
		}
	}
	var l stringList
	for _, v := range []string{"sip:100@pbx.example", "sips:200@provider.example"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	regs, err := sipRegistrations(l, true, 300*time.Second, pw)
	if err != nil || len(regs.aors) != 2 || len(regs.opts) != 2 {
		t.Errorf("two AORs: %+v, %v", regs, err)
	}
	if regs, err := sipRegistrations(nil, false, 0, ""); err != nil || len(regs.aors) != 0 {
		t.Errorf("no --sip-register: %+v, %v", regs, err)
	}
}

// `holdline serve --sip-register` twice registers at a real Kamailio,
// once over UDP (from its --sip listener) and once over TLS (Kamailio's
// certificate trusted with --sip-ca), and SIGTERM removes both bindings
// before serve exits; without HOLDLINE_SIP_PASSWORD it does not start.
func TestServeRegistersAtKamailio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts holdline")
	}
	const pw = "serve-Reg-pw"
	k := kamailiotest.Start(t, map[string]string{"agent": pw, "agent-tls": pw})
	dir := t.TempDir()
	bin := buildHoldline(t, dir)
	sipPort, err := freeport.UDP()
	if err != nil {
		t.Fatal(err)
	}
	_, kport, _ := net.SplitHostPort(k.UDP)
	_, tlsPort, _ := net.SplitHostPort(k.TLS)
	args := []string{"serve", "--http", "127.0.0.1:0", "--store", "none", "--sip", fmt.Sprintf("udp:127.0.0.1:%d", sipPort),
		"--sip-register", "sip:agent@127.0.0.1:" + kport, "--sip-register", "sips:agent-tls@127.0.0.1:" + tlsPort,
		"--sip-ca", k.CertFile(), "--sip-register-expires", "120s"}

	out, err := exec.Command(bin, args...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "HOLDLINE_SIP_PASSWORD") {
		t.Errorf("serve without the password: %v\n%s", err, out)
	}

	serve := exec.Command(bin, args...)
	serve.Env = append(os.Environ(), "HOLDLINE_SIP_PASSWORD="+pw)
	var logs strings.Builder
	w := &lockedWriter{w: &logs}
	output := func() string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return logs.String()
	}
	serve.Stdout, serve.Stderr = w, w
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	defer serve.Process.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	start := time.Now()
	contacts, err := k.WaitContacts(ctx, "agent", func(c []string) bool { return len(c) > 0 })
	if err != nil {
		t.Fatalf("serve did not register: %v\n%s", err, output())
	}
	if want := fmt.Sprintf("127.0.0.1:%d", sipPort); !strings.Contains(strings.Join(contacts, " "), want) {
		t.Errorf("contacts %v: want the --sip listener %s", contacts, want)
	}
	tlsContacts, err := k.WaitContacts(ctx, "agent-tls", func(c []string) bool { return len(c) > 0 })
	if err != nil {
		t.Fatalf("serve did not register over TLS: %v\n%s", err, output())
	}
	t.Logf("registered %v after serve started: %v over UDP, %v over TLS", time.Since(start), contacts, tlsContacts)
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit on SIGTERM\n%s", output())
	}
	for _, user := range []string{"agent", "agent-tls"} {
		if c, err := k.Contacts(ctx, user); err != nil || len(c) != 0 {
			t.Errorf("after serve exited the registrar holds %v for %s (%v), want the binding removed\n%s", c, user, err, output())
		}
	}
	for _, want := range []string{"Holdline is registering as sip:agent@", "Holdline is registering as sips:agent-tls@", "SIP registered", `SIP unregistered" aor=sips:agent-tls`, `SIP unregistered" aor=sip:agent@`} {
		if !strings.Contains(output(), want) {
			t.Errorf("serve's output lacks %q:\n%s", want, output())
		}
	}
	if strings.Contains(output(), pw) {
		t.Error("the password is in serve's output")
	}
}
