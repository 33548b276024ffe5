package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/webrtc/rtctest"
)

// serveOffline starts holdline serve with the booking agent on the demo
// engines (no audio engines, no key) and returns its URL; it stops with
// the test.
func serveOffline(t *testing.T, ctx context.Context, token string) string {
	t.Helper()
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", token)
	runCtx, stop := context.WithCancel(ctx)
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"serve", "--agent", "booking", "--http", "127.0.0.1:0", "--tts", "demo", "--stt", "demo"}, strings.NewReader(""), outW, io.Discard)
		outW.Close()
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("serve ended with %v", err)
		}
	})
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v", err)
	}
	go io.Copy(io.Discard, outR)
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("serve printed %q", line)
	}
	return strings.TrimSuffix(strings.TrimSpace(line[i:]), "/")
}

// A call on holdline serve, watched two ways at once: its live session
// view in headless Chromium draws each event as it comes (typed input, a
// booking, the end), and holdline inspect on the session's URL writes the
// same events to a page once the session ends.
func TestBrowserSessionViewDrawsALiveCallAndInspectReadsIt(t *testing.T) {
	node, dir := needChromium(t)
	const token = "inspect-live-token"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := serveOffline(t, ctx, token)
	c, err := rtctest.Dial(ctx, url, rtctest.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.PlayoutDone }); err != nil {
		t.Fatal(err)
	}
	id := c.Location[strings.LastIndex(c.Location, "/")+1:]
	out := t.ArtifactDir()

	page := filepath.Join(out, "live.html")
	inspected := make(chan error, 1)
	var said bytes.Buffer
	go func() {
		inspected <- run(ctx, []string{"inspect", url + c.Location, "-o", page, "--idle", "60s"}, strings.NewReader(""), &said, &said)
	}()

	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "session.mjs"), url, id, token, out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("browser log:\n%s", stderr.String())
	var res struct {
		OK                  bool
		Error               string
		Errors              []string
		First, Kinds, Lanes []string
		Seqs                []int
		Input, Deleted      int
		Status, EndStatus   string
		LinkBefore          bool
		LinkAfter           bool
		LinkHref            string
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("session.mjs: %v; output %q", runErr, stdout.String())
	}
	if !res.OK {
		t.Fatalf("in the browser: %s", res.Error)
	}
	if len(res.Errors) > 0 {
		t.Errorf("errors in the page: %v", res.Errors)
	}
	if res.Input != 202 || res.Deleted != 200 {
		t.Errorf("input %d, delete %d; want 202, 200", res.Input, res.Deleted)
	}
	if !strings.Contains(res.Status, "Live") || !strings.Contains(res.EndStatus, "ended") {
		t.Errorf("the page's status: %q live, %q at the end", res.Status, res.EndStatus)
	}
	for _, k := range []string{"user_turn", "tool_requested", "tool_terminal", "playout_done", "session_ended"} {
		if !slices.Contains(res.Kinds, k) {
			t.Errorf("the live timeline lacks %s: %v", k, res.Kinds)
		}
	}
	if !slices.Contains(res.Lanes, "tools") || !slices.Contains(res.Lanes, "agent") {
		t.Errorf("lanes %v", res.Lanes)
	}

	if res.LinkBefore || !res.LinkAfter || res.LinkHref != "/sessions/"+id {
		t.Errorf("the web client's link to the lanes view: shown before a session %v, after %v, to %q", res.LinkBefore, res.LinkAfter, res.LinkHref)
	}

	select {
	case err := <-inspected:
		if err != nil {
			t.Fatalf("inspect: %v\n%s", err, said.String())
		}
	case <-ctx.Done():
		t.Fatal("inspect did not stop when the session ended")
	}
	var seqs []int
	var kinds []string
	for _, e := range eventsInPage(t, readFile(t, page)) {
		seqs = append(seqs, int(e.Seq))
		if !slices.Contains(kinds, string(e.Kind)) {
			kinds = append(kinds, string(e.Kind))
		}
	}
	slices.Sort(kinds)
	if !slices.Equal(seqs, res.Seqs) || !slices.Equal(kinds, res.Kinds) {
		t.Errorf("inspect's page has events %v (%v); the live view showed %v (%v)", seqs, kinds, res.Seqs, res.Kinds)
	}
	t.Logf("screenshot %s; page %s", filepath.Join(out, "session-view.png"), page)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
