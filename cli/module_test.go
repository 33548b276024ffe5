package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// Tried as a Go developer would: a module of their own, outside the
// repository, with a two-tool agent (examples/pizza, copied as a user
// copies it) and a main that is only cli.Main. Its binary talks in the
// console, simulates the scenarios that name its Go agent, serves a
// WebRTC client that hears the agent, and calls its own serve --sip; its
// agent package builds without cgo.
func TestAgentModuleOutsideTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", "")
	needEspeak(t)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	mod := newUserModule(t, repo)
	bin := filepath.Join(mod, "pizzashop")
	goCmd(t, mod, nil, "build", "-o", bin, ".")
	goCmd(t, mod, []string{"CGO_ENABLED=0"}, "build", "./pizza")
	lines := countLines(t, filepath.Join(mod, "main.go"))
	t.Logf("the module's main.go: %d lines, console + serve + SIP + simulate", lines)
	if lines > 20 {
		t.Errorf("main.go is %d lines; a main over cli.Main should be a few", lines)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("console", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, bin, "console")
		cmd.Dir = mod
		cmd.Stdin = strings.NewReader("what's on the menu\ntwo pepperoni\nyes\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("console: %v\n%s", err, out)
		}
		for _, want := range []string{
			"agent: Hello, Holdline Pizza",
			"tool: menu -> succeeded",
			"agent: We have margherita, pepperoni, veggie",
			"tool: place_order -> succeeded",
			"agent: Your order PZ1 is in: 2 pepperoni, 22.00 euros",
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("console lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("simulate", func(t *testing.T) {
		sim := exec.CommandContext(ctx, bin, "simulate", "scenarios", "--sweep", "100")
		sim.Dir = mod
		out, err := sim.CombinedOutput()
		if err != nil {
			t.Fatalf("simulate: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "4 files, 400 runs, 0 failed") {
			t.Errorf("simulate printed:\n%s", out)
		}
	})

	// serve --sip: a browser hears the agent, and a call from the same
	// binary is answered on the same host.
	httpPort, err := freeport.TCP()
	if err != nil {
		t.Fatal(err)
	}
	sipPort, err := freeport.UDP()
	if err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(bin, "serve", "--http", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--sip", fmt.Sprintf("udp:127.0.0.1:%d", sipPort), "--store", "none")
	serveOut, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var serveLog strings.Builder
	logW := &lockedWriter{w: &serveLog}
	serve.Stderr = logW
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- serve.Wait() }()
	defer serve.Process.Kill()
	// serve says where it answers, SIP first, then the web client.
	url := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	br := bufio.NewReader(serveOut)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("serve never printed %s: %v\n%s", url, err, serveLog.String())
		}
		if strings.Contains(line, url) {
			break
		}
	}
	go io.Copy(io.Discard, br)

	t.Run("serve to a WebRTC client", func(t *testing.T) {
		c, err := rtctest.Dial(ctx, url, rtctest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.WaitEvent(ctx, func(e events.Event) bool {
			return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "Holdline Pizza")
		}); err != nil {
			t.Fatal(err)
		}
		loudest := 0.0
		for _, l := range c.Levels() {
			loudest = max(loudest, l.RMS)
		}
		if loudest < 0.01 {
			t.Errorf("the client heard no audio from the agent's greeting (loudest 20 ms: %.4f of full scale)", loudest)
		}
		if err := c.SendText("what's on the menu"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitEvent(ctx, func(e events.Event) bool {
			return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "We have margherita")
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("call its own serve --sip", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, bin, "call", fmt.Sprintf("sip:pizza@127.0.0.1:%d", sipPort), "--max-duration", "6s").CombinedOutput()
		if err != nil {
			t.Fatalf("call: %v\n%s", err, out)
		}
		// Both ends are the pizza agent, and both greet at once; whether
		// either takes the other's greeting for a turn is the barge-in
		// judge's call, so only the call's course is checked here.
		for _, want := range []string{"agent: Hello,", "call ended"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("call lacks %q:\n%s", want, out)
			}
		}
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `holdline_sessions_total{transport="sip"} 1`) {
			t.Errorf("serve's metrics after the call lack one SIP session:\n%s", grepLines(string(body), "holdline_sessions_total"))
		}
	})

	if err := serve.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve ended with %v on SIGINT; want a clean exit\n%s", err, serveLog.String())
		}
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop on SIGINT")
	}
}

// newUserModule writes a module outside the repository, as a user who
// copied examples/pizza would have it: pizza/ (the agent), scenarios/, and
// main.go, using the repository through a replace directive. Nothing is
// fetched: the repository's own requirements are all the module needs.
func newUserModule(t *testing.T, repo string) string {
	t.Helper()
	dir := t.TempDir()
	copyFiles(t, filepath.Join(repo, "examples", "pizza"), filepath.Join(dir, "pizza"), func(name string) bool {
		return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
	})
	copyFiles(t, filepath.Join(repo, "examples", "pizza", "scenarios"), filepath.Join(dir, "scenarios"), func(name string) bool {
		return strings.HasSuffix(name, ".yaml")
	})
	main, err := os.ReadFile(filepath.Join("testdata", "pizzashop", "main.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), main, 0o644); err != nil {
		t.Fatal(err)
	}
	writeModule(t, dir, repo, "example.com/pizzashop")
	return dir
}

func copyFiles(t *testing.T, from, to string, keep func(name string) bool) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !keep(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// goCmd runs the go command in dir, offline, with env added.
func goCmd(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off"}, env...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "\n")
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// lockedWriter is a writer a process's output and the test may share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The README's Go quick-start, as it stands there, builds in a module of
// its own and talks in the console: its tool runs and its answer prints.
func TestReadmeQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	t.Setenv("OPENAI_API_KEY", "")
	needEspeak(t)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Your own agent in Go")
	if !ok {
		t.Fatal(`the README has no "Your own agent in Go" section`)
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the quick-start has no Go block")
	}
	code, _, _ = strings.Cut(code, "```")
	t.Logf("the quick-start's main.go: %d lines", strings.Count(code, "\n"))
	dir := t.TempDir()
	writeModule(t, dir, repo, "example.com/weather")
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "weather")
	goCmd(t, dir, nil, "build", "-o", bin, ".")
	cmd := exec.Command(bin, "console")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("what's the weather in Paris?\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("console: %v\n%s", err, out)
	}
	for _, want := range []string{"tool: get_weather -> succeeded", "agent: It's sunny and 21 degrees in Paris."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("console lacks %q:\n%s", want, out)
		}
	}
}

// writeModule writes go.mod and go.sum for module path in dir, using the
// repository through a replace directive with the repository's own
// requirements, so the build resolves offline.
func writeModule(t *testing.T, dir, repo, path string) {
	t.Helper()
	repoMod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var requires []string
	for _, block := range strings.Split(string(repoMod), "require")[1:] {
		requires = append(requires, "require"+strings.SplitN(block, ")", 2)[0]+")")
	}
	gomod := "module " + path + "\n\ngo 1.26\n\nrequire github.com/holdline/holdline v0.0.0\n\n" +
		strings.Join(requires, "\n\n") + "\n\nreplace github.com/holdline/holdline => " + repo + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
}
