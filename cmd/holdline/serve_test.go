package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/rtctest"
)

func TestServeTriedAsANewUserWould(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("HOLDLINE_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"serve", "--agent", "booking", "--http", "0.0.0.0:0", "--tts", "demo", "--stt", "demo"}, strings.NewReader(""), outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("serve printed nothing: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, outR)
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("serve printed %q; want the URL to open", line)
	}
	url := strings.TrimSuffix(strings.TrimSpace(line[i:]), "/")
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("without HOLDLINE_TOKEN serve listens on %s; want 127.0.0.1 only", url)
	}
	for _, path := range []string{"/", "/healthz", "/metrics", "/v1/config"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
	}
	c, err := rtctest.Dial(ctx, url, rtctest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool {
		return e.Kind == events.PlayoutDone && strings.Contains(e.Text, "Holdline Bistro")
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.SendText("Book a table for two at seven"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitEvent(ctx, func(e events.Event) bool { return e.Kind == events.ToolTerminal && e.Tool == "book_table" }); err != nil {
		t.Fatal(err)
	}
	stop()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("serve ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("serve did not stop")
	}
}
