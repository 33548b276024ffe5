package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
)

// A booking conversation driven by a script, tried as a new user would:
// one line in, the transcript and tool states out, book_table run once.
func TestConsoleScriptedBooking(t *testing.T) {
	eventsPath := filepath.Join(t.TempDir(), "events.jsonl")
	synctest.Test(t, func(t *testing.T) {
		var out, errs bytes.Buffer
		in := strings.NewReader("Book a table for two at seven\n")
		err := run(context.Background(), []string{"console", "--agent", "booking", "--llm", "demo", "--tts", "demo", "--events", eventsPath}, in, &out, &errs)
		if err != nil {
			t.Fatalf("console: %v\nstderr: %s", err, errs.String())
		}
		got := out.String()
		for _, want := range []string{
			"agent: Hello, thanks for calling Holdline Bistro.",
			"user: Book a table for two at seven\n",
			"tool: check_availability -> succeeded\n",
			"tool: book_table -> succeeded\n",
			"agent: You're booked: a table for two at 19:00.",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q:\n%s", want, got)
			}
		}
		if n := strings.Count(got, "tool: book_table"); n != 1 {
			t.Errorf("book_table ran %d times; want once:\n%s", n, got)
		}
	})
	data, err := os.ReadFile(eventsPath)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct{ Kind string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad JSONL line %q: %v", line, err)
		}
		kinds[e.Kind]++
	}
	if kinds["session_started"] != 1 || kinds["tool_committed"] != 2 || kinds["inference_sent"] < 4 {
		t.Errorf("event file kinds = %v", kinds)
	}
}

// The support desk, tried as a new user would from the console: the front
// desk hands the caller to billing, which refunds once.
func TestConsoleSupportDeskHandsOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, errs bytes.Buffer
		in := strings.NewReader("I was charged twice on account A7.\nYes, refund one please.\n")
		if err := run(context.Background(), []string{"console", "--agent", "support", "--llm", "demo", "--tts", "demo"}, in, &out, &errs); err != nil {
			t.Fatalf("console: %v\nstderr: %s", err, errs.String())
		}
		got := out.String()
		for _, want := range []string{
			"tool: lookup_account -> succeeded\n",
			"handoff: front-desk -> billing (last_turns)\n",
			"agent: Your ticket is T-1001.",
			"tool: refund -> succeeded\n",
			"agent: Done: the duplicate charge of 19.99 is refunded.",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("output lacks %q:\n%s", want, got)
			}
		}
		if n := strings.Count(got, "tool: refund"); n != 1 {
			t.Errorf("refund ran %d times; want once:\n%s", n, got)
		}
	})
}

func TestConsoleUnknownAgent(t *testing.T) {
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"console", "--agent", "nope"}, strings.NewReader(""), &out, &errs)
	if err == nil || !strings.Contains(err.Error(), `no agent named "nope"`) || !strings.Contains(err.Error(), "booking") {
		t.Errorf("err = %v; want a clear error listing the agents", err)
	}
}
