// Package baresiptest runs baresip, a real softphone, as the caller (or
// the callee) of Holdline's phone tests: headless, on loopback, its
// microphone a WAV file of espeak-ng's voice and its speaker a WAV file
// the test reads afterwards.
package baresiptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"github.com/holdline/holdline/media"
)

// Need returns baresip's path, or skips the test when baresip, espeak-ng
// or sox is missing (fails it under make test, which installs them and
// sets HOLDLINE_REQUIRE_MODELS=1).
func Need(t testing.TB) string {
	t.Helper()
	for _, bin := range []string{"baresip", "espeak-ng", "sox"} {
		if _, err := exec.LookPath(bin); err != nil {
			need.Missingf(t, "%s is missing: make test-deps installs it", bin)
		}
	}
	p, _ := exec.LookPath("baresip")
	return p
}

// Home writes a headless baresip configuration and returns its
// directory: SIP on a free loopback port, G.711, the microphone a WAV
// file of a caller's voice saying text after lead seconds, then silence
// for tail seconds (baresip hangs up when the file ends; an empty text is
// lead+tail seconds of silence), and what it hears recorded (Heard). Its account is sip:baresip@127.0.0.1, answering
// calls on its own.
func Home(t testing.TB, text string, lead, tail float64) (dir string, port int) {
	t.Helper()
	return HomeAs(t, "baresip", text, lead, tail)
}

// HomeAs is Home with the account sip:USER@127.0.0.1: the caller's line,
// as Holdline tells callers apart.
func HomeAs(t testing.TB, user, text string, lead, tail float64) (dir string, port int) {
	t.Helper()
	return HomeOn(t, "127.0.0.1", user, text, lead, tail)
}

// HomeOn is HomeAs on address addr (a network namespace's), with the
// account sip:USER@ADDR.
func HomeOn(t testing.TB, addr, user, text string, lead, tail float64) (dir string, port int) {
	t.Helper()
	dir = t.TempDir()
	wav := filepath.Join(dir, "caller.wav")
	if text == "" {
		run(t, "sox", "-n", "-r", "8000", "-c", "1", "-b", "16", wav, "trim", "0", fmt.Sprint(lead+tail))
	} else {
		raw := filepath.Join(dir, "raw.wav")
		run(t, "espeak-ng", "-v", "en-us+edward", "-p", "35", "-w", raw, text)
		run(t, "sox", raw, "-r", "8000", "-c", "1", "-b", "16", wav, "pad", fmt.Sprint(lead), fmt.Sprint(tail))
	}
	port, err := freeport.UDP()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "port"), []byte(fmt.Sprint(port)), 0o644); err != nil {
		t.Fatal(err)
	}
	dumps := filepath.Join(dir, "dumps")
	if err := os.Mkdir(dumps, 0o755); err != nil {
		t.Fatal(err)
	}
	// baresip 1.0's aufile only reads: what the phone hears is dumped by
	// sndfile, which needs a player to pull the call's audio (aubridge's,
	// which goes nowhere).
	config := fmt.Sprintf(`poll_method epoll
sip_listen %s:%d
audio_player aubridge,heard
audio_source aufile,%s
audio_alert aufile,%s
module_path /usr/lib/baresip/modules
module g711.so
module aufile.so
module aubridge.so
module sndfile.so
snd_path %s
module_app account.so
module_app menu.so
`, addr, port, wav, wav, dumps)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "accounts"), []byte("<sip:"+user+"@"+addr+">;regint=0;answermode=auto\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, port
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", name, err, out)
	}
}

// Heard returns what baresip configured by Home in dir heard on its
// first call, as 8 kHz samples from the call's first incoming packet:
// complete once baresip has hung up.
func Heard(dir string) ([]int16, error) {
	dumps, err := filepath.Glob(filepath.Join(dir, "dumps", "dump-*-dec.wav"))
	if err != nil {
		return nil, err
	}
	if len(dumps) == 0 {
		return nil, errors.New("baresip recorded no call")
	}
	sort.Strings(dumps)
	f, err := os.Open(dumps[0])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pcm, _, err := media.ReadWAV(f)
	return pcm, err
}

// FirstSound returns when the first sound louder than silence comes in
// pcm (8 kHz), and whether there is any.
func FirstSound(pcm []int16) (time.Duration, bool) {
	const window = 160 // 20 ms
	for i := 0; i+window <= len(pcm); i += window {
		var sum float64
		for _, s := range pcm[i : i+window] {
			sum += float64(s) * float64(s)
		}
		if sum/window > 300*300 {
			return time.Duration(i) * time.Second / 8000, true
		}
	}
	return 0, false
}

// Output is a command's output, written while the test reads it, with
// the time each piece arrived.
type Output struct {
	mu    sync.Mutex
	b     bytes.Buffer
	marks []mark
}

type mark struct {
	end int
	at  time.Time
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, err := o.b.Write(p)
	o.marks = append(o.marks, mark{end: o.b.Len(), at: time.Now()})
	return n, err
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// When returns when text first appeared in the output, and whether it
// has.
func (o *Output) When(text string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := strings.Index(o.b.String(), text)
	if i < 0 {
		return time.Time{}, false
	}
	for _, m := range o.marks {
		if m.end >= i+len(text) {
			return m.at, true
		}
	}
	return time.Time{}, false
}

// Phone is a running baresip.
type Phone struct {
	cmd  *exec.Cmd
	Out  *Output
	done chan struct{}
	err  error
}

// Start runs baresip (its path bin) with the configuration Home wrote in
// dir, and args (e.g. "-e", "/dial sip:..."). baresip also listens for
// SIP over TCP and TLS on ports next to its UDP one; when one of those
// is taken (by another test's server, just then) it exits at once, and
// Start moves it to another port and tries again.
func Start(ctx context.Context, bin, dir string, args ...string) (*Phone, error) {
	for attempt := 0; ; attempt++ {
		p := &Phone{Out: &Output{}, done: make(chan struct{})}
		p.cmd = exec.CommandContext(ctx, bin, append([]string{"-f", dir}, args...)...)
		p.cmd.Stdout, p.cmd.Stderr = p.Out, p.Out
		if err := p.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		select {
		case <-p.done:
			if attempt < 3 && strings.Contains(p.Out.String(), "Address already in use") {
				if err := moveSIPPort(dir); err != nil {
					return nil, err
				}
				continue
			}
			return p, nil // the caller sees it ended, and why
		case <-time.After(time.Second):
			return p, nil
		}
	}
}

// moveSIPPort rewrites dir's configuration to listen on another port.
func moveSIPPort(dir string) error {
	old, err := os.ReadFile(filepath.Join(dir, "port"))
	if err != nil {
		return err
	}
	port, err := freeport.UDP()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "config")
	config, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	config = bytes.Replace(config, []byte("127.0.0.1:"+string(old)+"\n"), []byte(fmt.Sprintf("127.0.0.1:%d\n", port)), 1)
	if err := os.WriteFile(path, config, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "port"), []byte(fmt.Sprint(port)), 0o644)
}

// Done is closed when baresip has exited; Err then says how.
func (p *Phone) Done() <-chan struct{} { return p.done }

// Err is how baresip exited, once Done is closed.
func (p *Phone) Err() error {
	<-p.done
	return p.err
}

// HangUp ends baresip, as a caller hanging up, and waits for it: asked
// to quit (it hangs up and closes its recordings), killed if it has not
// within a few seconds.
func (p *Phone) HangUp() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
