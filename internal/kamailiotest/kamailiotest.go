// Package kamailiotest runs Kamailio 5.6 (Debian's kamailio and
// kamailio-tls-modules) as the registrar and proxy of Holdline's phone
// tests: on free loopback ports for UDP, TCP and TLS, with a
// configuration the test writes (registrar and usrloc in memory, digest
// auth with qop=auth against users the test names, TLS with a
// self-signed certificate made for the test), stopped by its process
// group when the test ends, and able to stop and start again on the same
// ports mid-test.
package kamailiotest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/internal/testcert"
)

// Packages are the Debian packages Kamailio and its TLS module come in.
const Packages = "kamailio kamailio-tls-modules"

// Absent is what a test says when Kamailio is not installed.
const Absent = "kamailio (with its TLS module) is missing: apt-get install " + Packages + " (make test installs them)"

// MaxExpires is the longest binding the registrar grants by default:
// shorter than a client asks for, as registrars commonly are.
const MaxExpires = 60

// Realm is the digest realm: the domain, as Kamailio configurations
// commonly challenge with.
const Realm = "127.0.0.1"

// Need returns kamailio's path, or skips the test when Kamailio or its
// TLS module is missing (fails it under make test, which installs them
// and sets HOLDLINE_REQUIRE_MODELS=1).
func Need(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("kamailio")
	if err == nil {
		if _, err = exec.LookPath("kamcmd"); err == nil {
			err = needTLSModule()
		}
	}
	if err != nil {
		need.Missingf(tb, "%s (%v)", Absent, err)
	}
	return path
}

func needTLSModule() error {
	found, _ := filepath.Glob("/usr/lib/*/kamailio/modules/tls.so")
	if len(found) == 0 {
		found, _ = filepath.Glob("/usr/lib/kamailio/modules/tls.so")
	}
	if len(found) == 0 {
		return errors.New("tls.so not found")
	}
	return nil
}

// Kamailio is a running (or stopped) Kamailio.
type Kamailio struct {
	// UDP, TCP and TLS are its listeners, "127.0.0.1:PORT".
	UDP, TCP, TLS string
	// Users are the users and passwords that may register.
	Users map[string]string
	// MaxExpires is the longest binding granted, in seconds.
	MaxExpires int

	path string
	dir  string
	cert *testcert.Cert

	mu     sync.Mutex // over cmd and exited
	cmd    *exec.Cmd
	exited chan struct{}
	logMu  sync.Mutex
	logs   bytes.Buffer // every run's
}

// Start writes a configuration for users (user → password) and runs
// Kamailio on free loopback ports until tb ends.
func Start(tb testing.TB, users map[string]string) *Kamailio {
	tb.Helper()
	return StartWith(tb, Options{Users: users})
}

// Options configure a Kamailio.
type Options struct {
	// Users are the users (user → password) that may register.
	Users map[string]string
	// MaxExpires is the longest binding granted, in seconds (default
	// MaxExpires).
	MaxExpires int
}

// StartWith is Start with more options.
func StartWith(tb testing.TB, o Options) *Kamailio {
	tb.Helper()
	path := Need(tb)
	if o.MaxExpires <= 0 {
		o.MaxExpires = MaxExpires
	}
	k := &Kamailio{Users: o.Users, MaxExpires: o.MaxExpires, path: path, dir: tb.TempDir()}
	if err := k.writeCert(); err != nil {
		tb.Fatal(err)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = k.choosePorts(); err != nil {
			tb.Fatal(err)
		}
		if err = k.writeConfig(); err != nil {
			tb.Fatal(err)
		}
		if err = k.Restart(); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := k.Stop(); err != nil {
			tb.Error(err)
		}
		if tb.Failed() {
			tb.Logf("kamailio's log:\n%s", k.Log())
		}
	})
	return k
}

func (k *Kamailio) choosePorts() error {
	u, err := freeport.UDP()
	if err != nil {
		return err
	}
	t, err := freeport.TCP()
	if err != nil {
		return err
	}
	s, err := freeport.TCP()
	if err != nil {
		return err
	}
	k.UDP, k.TCP, k.TLS = fmt.Sprintf("127.0.0.1:%d", u), fmt.Sprintf("127.0.0.1:%d", t), fmt.Sprintf("127.0.0.1:%d", s)
	return nil
}

// RootCAs trusts Kamailio's certificate, for clients that connect to it
// over TLS.
func (k *Kamailio) RootCAs() *x509.CertPool {
	return k.cert.Pool
}

// CertFile is Kamailio's certificate (PEM), for clients that take their
// roots from a file.
func (k *Kamailio) CertFile() string { return filepath.Join(k.dir, "cert.pem") }

// ClientTLS is a TLS configuration that trusts Kamailio's certificate.
func (k *Kamailio) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: k.RootCAs(), MinVersion: tls.VersionTLS12}
}

func (k *Kamailio) writeCert() error {
	c, err := testcert.New("kamailio test")
	if err != nil {
		return err
	}
	k.cert = c
	_, _, err = c.WriteFiles(k.dir)
	return err
}

func (k *Kamailio) writeConfig() error {
	tlsCfg := fmt.Sprintf(`[server:default]
method = TLSv1.2+
verify_certificate = no
require_certificate = no
private_key = %[1]s/key.pem
certificate = %[1]s/cert.pem

[client:default]
method = TLSv1.2+
verify_certificate = no
require_certificate = no
`, k.dir)
	if err := os.WriteFile(filepath.Join(k.dir, "tls.cfg"), []byte(tlsCfg), 0o600); err != nil {
		return err
	}
	users := make([]string, 0, len(k.Users))
	for u := range k.Users {
		users = append(users, u)
	}
	sort.Strings(users)
	var init strings.Builder
	for _, u := range users {
		fmt.Fprintf(&init, "\t$sht(users=>%s) = %q;\n", u, k.Users[u])
	}
	cfg := fmt.Sprintf(config, k.UDP, k.TCP, k.TLS, filepath.Join(k.dir, "tls.cfg"), k.ctlSocket(), k.MaxExpires, k.MaxExpires, init.String())
	return os.WriteFile(filepath.Join(k.dir, "kamailio.cfg"), []byte(cfg), 0o600)
}

func (k *Kamailio) ctlSocket() string { return filepath.Join(k.dir, "ctl.sock") }

// config is Kamailio's configuration: listeners (UDP, TCP, TLS), the TLS
// file, the ctl socket, max_expires, and the users' passwords (htable
// lines). REGISTERs are challenged (qop=auth, realm the From domain) and
// checked against the users' plain passwords; over TCP and TLS the
// contact is bound to the connection it came over (fix_nated_register),
// so that calls go back over it, and so is the Contact of its answers
// (fix_nated_contact), so that the dialog's requests do too. Other
// requests are routed to the registered contact (lookup),
// record-routed.
const config = `#!KAMAILIO
debug=2
log_stderror=yes
children=2
tcp_children=2
auto_aliases=no
enable_tls=yes
tcp_accept_no_cl=yes
dns=no
rev_dns=no
listen=udp:%s
listen=tcp:%s
listen=tls:%s

loadmodule "kex.so"
loadmodule "tm.so"
loadmodule "tmx.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "textops.so"
loadmodule "siputils.so"
loadmodule "xlog.so"
loadmodule "htable.so"
loadmodule "usrloc.so"
loadmodule "registrar.so"
loadmodule "auth.so"
loadmodule "nathelper.so"
loadmodule "tls.so"
loadmodule "ctl.so"

modparam("tls", "config", "%s")
modparam("ctl", "binrpc", "unix:%s")
modparam("usrloc", "db_mode", 0)
modparam("registrar", "max_expires", %d)
modparam("registrar", "default_expires", %d)
modparam("registrar", "min_expires", 1)
modparam("registrar", "received_avp", "$avp(RECEIVED)")
modparam("nathelper", "received_avp", "$avp(RECEIVED)")
modparam("htable", "htable", "users=>size=4;")
modparam("rr", "enable_double_rr", 1)

event_route[htable:mod-init] {
%s}

request_route {
	if (!mf_process_maxfwd_header("10")) {
		sl_send_reply("483", "Too Many Hops");
		exit;
	}
	if (is_method("OPTIONS") && uri == myself && $rU == $null) {
		sl_send_reply("200", "Keepalive");
		exit;
	}
	if (has_totag()) {
		if (loose_route()) {
			t_relay();
			exit;
		}
		if (is_method("ACK")) {
			if (t_check_trans()) {
				t_relay();
			}
			exit;
		}
		sl_send_reply("404", "Not here");
		exit;
	}
	if (is_method("CANCEL")) {
		if (t_check_trans()) {
			t_relay();
		}
		exit;
	}
	t_check_trans();
	if (is_method("REGISTER")) {
		if ($sht(users=>$fU) == $null || !pv_auth_check("$fd", "$sht(users=>$fU)", "0", "1")) {
			auth_challenge("$fd", "1");
			exit;
		}
		consume_credentials();
		if (proto == TCP || proto == TLS) {
			fix_nated_register();
		}
		if (!save("location")) {
			sl_reply_error();
		}
		exit;
	}
	if (is_method("INVITE")) {
		record_route();
	}
	if (!lookup("location")) {
		sl_send_reply("404", "Not Found");
		exit;
	}
	t_on_reply("NATREPLY");
	t_relay();
	exit;
}

# A callee on a TCP or TLS connection is reached over that connection in
# the dialog too: its Contact becomes the connection's source, as
# Kamailio's NAT handling does for clients behind NAT.
onreply_route[NATREPLY] {
	if ((proto == TCP || proto == TLS) && status =~ "^(1|2)[0-9][0-9]") {
		fix_nated_contact();
	}
}
`

// Restart starts Kamailio (again) on its ports and waits until it
// answers OPTIONS over UDP.
func (k *Kamailio) Restart() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd != nil {
		return errors.New("kamailiotest: already running")
	}
	cmd := exec.Command(k.path, "-DD", "-E", "-f", filepath.Join(k.dir, "kamailio.cfg"), "-Y", k.dir, "-w", k.dir, "-m", "64", "-M", "8")
	w := &syncWriter{mu: &k.logMu, w: &k.logs}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kamailiotest: start: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // a stopped Kamailio's status says nothing more
		close(exited)
	}()
	k.cmd, k.exited = cmd, exited
	if err := k.waitReady(exited); err != nil {
		_ = k.stopLocked()
		return fmt.Errorf("%w:\n%s", err, k.Log())
	}
	return nil
}

type syncWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// waitReady sends OPTIONS over UDP until one is answered 200.
func (k *Kamailio) waitReady(exited chan struct{}) error {
	c, err := net.Dial("udp", k.UDP)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 4096)
	for i := 0; time.Now().Before(deadline); i++ {
		select {
		case <-exited:
			return errors.New("kamailiotest: kamailio exited at start")
		default:
		}
		local := c.LocalAddr().String()
		msg := fmt.Sprintf("OPTIONS sip:%[1]s SIP/2.0\r\nVia: SIP/2.0/UDP %[2]s;branch=z9hG4bK-ready%[3]d;rport\r\nMax-Forwards: 70\r\n"+
			"From: <sip:probe@%[2]s>;tag=probe\r\nTo: <sip:%[1]s>\r\nCall-ID: ready-%[3]d\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n", k.UDP, local, i)
		if _, err := c.Write([]byte(msg)); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if n, err := c.Read(buf); err == nil && bytes.HasPrefix(buf[:n], []byte("SIP/2.0 200")) {
				return nil
			}
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return errors.New("kamailiotest: kamailio did not answer OPTIONS within 10 s")
}

// Stop ends Kamailio by its process group: SIGTERM, then SIGKILL after
// 5 s. Restart starts it again on the same ports.
func (k *Kamailio) Stop() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopLocked()
}

func (k *Kamailio) stopLocked() error {
	if k.cmd == nil {
		return nil
	}
	cmd, exited := k.cmd, k.exited
	k.cmd = nil
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			return fmt.Errorf("kamailiotest: kamailio (pid %d) did not exit", pgid)
		}
	}
	// Its children may outlive the main process by a moment.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

// Log is what Kamailio has logged so far.
func (k *Kamailio) Log() string {
	k.logMu.Lock()
	defer k.logMu.Unlock()
	return k.logs.String()
}

// Contacts returns the contacts registered for aor ("user@domain")
// now, asking Kamailio over its ctl socket (kamcmd ul.lookup, which
// exits 0 whether or not the AOR is found).
func (k *Kamailio) Contacts(ctx context.Context, aor string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "kamcmd", "-s", "unix:"+k.ctlSocket(), "ul.lookup", "location", aor).CombinedOutput()
	text := string(out)
	// Not found is "error: 404 - AOR not found"; a binding's own text
	// (a port, a Call-ID) may hold the digits 404 too.
	if strings.Contains(text, "AOR not found") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kamcmd ul.lookup: %w: %s", err, strings.TrimSpace(text))
	}
	var contacts []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "Address:"); ok {
			contacts = append(contacts, strings.TrimSpace(v))
		}
	}
	return contacts, nil
}

// WaitContacts polls Contacts until want returns true for them or ctx
// ends.
func (k *Kamailio) WaitContacts(ctx context.Context, aor string, want func([]string) bool) ([]string, error) {
	for {
		c, err := k.Contacts(ctx, aor)
		if err == nil && want(c) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, fmt.Errorf("kamailiotest: contacts of %s: %w (last: %v, %v)", aor, ctx.Err(), c, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
