package events_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
)

func lineKeys(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("line %q is not a JSON object: %v", line, err)
	}
	return m
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestJSONLOneObjectPerLineStableNames(t *testing.T) {
	ts := time.Date(2025, 3, 1, 12, 0, 0, 5, time.UTC)
	minimal := events.Event{Seq: 1, Session: "sess", Epoch: 0, Time: ts, At: 0, Kind: events.SessionStarted}
	full := events.Event{
		Seq: 2, Session: "sess", Epoch: 3, Time: ts, At: 1500 * time.Millisecond,
		Kind: events.ToolTerminal, Text: "hello\nworld", Final: true, Reason: "user",
		CallID: "c1", Tool: "lookup", State: "succeeded", Provider: "llm",
		Error: "boom", Count: 7, Played: 250 * time.Millisecond,
	}

	var buf bytes.Buffer
	j := events.NewJSONL(&buf)
	for _, e := range []events.Event{minimal, full} {
		if err := j.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}

	out := buf.String()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end with a newline: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (an embedded newline must be escaped):\n%s", len(lines), out)
	}

	// Empty optional fields are omitted; the header is always present.
	m := lineKeys(t, lines[0])
	if got, want := sortedKeys(m), []string{"at_ns", "epoch", "kind", "seq", "session", "time"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("minimal event keys = %v, want %v", got, want)
	}
	if m["kind"] != "session_started" || m["seq"] != float64(1) || m["session"] != "sess" ||
		m["epoch"] != float64(0) || m["at_ns"] != float64(0) || m["time"] != "2025-03-01T12:00:00.000000005Z" {
		t.Fatalf("minimal event values = %v", m)
	}

	m = lineKeys(t, lines[1])
	want := map[string]any{
		"seq": float64(2), "session": "sess", "epoch": float64(3),
		"time": "2025-03-01T12:00:00.000000005Z", "at_ns": float64(1.5e9),
		"kind": "tool_terminal", "text": "hello\nworld", "final": true, "reason": "user",
		"call_id": "c1", "tool": "lookup", "state": "succeeded", "provider": "llm",
		"error": "boom", "count": float64(7), "played_ns": float64(2.5e8),
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("full event:\n got  %v\n want %v", m, want)
	}

	// Lines decode back to the same events.
	sc := bufio.NewScanner(strings.NewReader(out))
	for i, orig := range []events.Event{minimal, full} {
		if !sc.Scan() {
			t.Fatalf("missing line %d", i)
		}
		var e events.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if !e.Time.Equal(orig.Time) {
			t.Fatalf("line %d time %v, want %v", i, e.Time, orig.Time)
		}
		e.Time = orig.Time
		if e != orig {
			t.Fatalf("line %d round trip:\n got  %+v\n want %+v", i, e, orig)
		}
	}
}

// The JSON names of the kinds are part of the file format.
func TestKindStringsStable(t *testing.T) {
	kinds := map[events.Kind]string{
		events.SessionStarted:   "session_started",
		events.SessionEnded:     "session_ended",
		events.SpeechStarted:    "speech_started",
		events.SpeechStopped:    "speech_stopped",
		events.Transcript:       "transcript",
		events.UserTurn:         "user_turn",
		events.BargeInConfirmed: "barge_in_confirmed",
		events.TurnStarted:      "turn_started",
		events.InferenceSent:    "inference_sent",
		events.TurnInterrupted:  "turn_interrupted",
		events.PlayoutDone:      "playout_done",
		events.PlayoutTruncate:  "playout_truncated",
		events.TurnSettled:      "turn_settled",
		events.Idle:             "idle",
		events.ToolRequested:    "tool_requested",
		events.ToolStarted:      "tool_started",
		events.ToolTerminal:     "tool_terminal",
		events.ToolCommitted:    "tool_committed",
		events.ProviderError:    "provider_error",
		events.EventsDropped:    "events_dropped",
	}
	if len(kinds) != 20 {
		t.Fatalf("duplicate kind values: %d distinct of 20", len(kinds))
	}
	for k, want := range kinds {
		if string(k) != want {
			t.Errorf("kind %q, want %q", k, want)
		}
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

func TestJSONLWriteErrorSurfaces(t *testing.T) {
	errDisk := errors.New("disk full")
	j := events.NewJSONL(failWriter{errDisk})
	// Small writes are buffered; the failure shows up at the latest on Flush.
	werr := j.Write(events.Event{Kind: events.Idle})
	ferr := j.Flush()
	if werr == nil && ferr == nil {
		t.Fatal("no error reported for a failing writer")
	}
	if ferr != nil && !errors.Is(ferr, errDisk) {
		t.Fatalf("Flush error %v does not wrap %v", ferr, errDisk)
	}

	// A write larger than the buffer fails in Write itself.
	j = events.NewJSONL(failWriter{errDisk})
	err := j.Write(events.Event{Kind: events.Transcript, Text: strings.Repeat("x", 10000)})
	if !errors.Is(err, errDisk) {
		t.Fatalf("Write error %v does not wrap %v", err, errDisk)
	}
}
