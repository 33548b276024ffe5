package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/sim"
)

// supportCallEvents runs the support desk from the console, as a user
// would with --events, and returns the file: the front desk hands the
// caller to billing, whose refund (a mutation) waits for its preamble.
// It runs in a synctest bubble, so the file is the same on every run.
func supportCallEvents(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "support.jsonl")
	synctest.Test(t, func(t *testing.T) {
		var out, errs bytes.Buffer
		in := strings.NewReader("I was charged twice on account A7.\nYes, refund one please.\n")
		args := []string{"console", "--agent", "support", "--llm", "demo", "--tts", "demo", "--events", path}
		if err := run(context.Background(), args, in, &out, &errs); err != nil {
			t.Fatalf("console: %v\nstderr: %s", err, errs.String())
		}
	})
	return path
}

// bargeInCallEvents runs a replay scenario in the simulator (virtual time,
// its own seed) and writes its first run's events as JSONL: the caller
// cuts in while three calls are unfinished, a deferred mutation among
// them (it waits for its preamble, and never runs).
func bargeInCallEvents(t *testing.T) string {
	t.Helper()
	sc, err := sim.Load("../examples/scenarios/c4-every-call-gets-one-output.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res := sim.RunScenario(sc, sim.Options{KeepFirst: true})
	if res.Err != "" || res.First == nil {
		t.Fatalf("simulate: %q", res.Err)
	}
	path := filepath.Join(t.TempDir(), "bargein.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := events.NewJSONL(f)
	for _, e := range res.First.Events {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// kindsIn lists the event kinds of a JSONL file, sorted.
func kindsIn(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct{ Kind string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !slices.Contains(kinds, e.Kind) {
			kinds = append(kinds, e.Kind)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// The recorded calls each test reads: the support desk from the console
// (handoff, deferred refund), a simulated barge-in over a deferred
// mutation, and a hand-written file for what neither emits yet
// (turn_metrics, line and provider trouble, checkpoints, a kind this
// version does not know).
func inspectInputs(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		"support": supportCallEvents(t),
		"bargein": bargeInCallEvents(t),
		"fixture": "testdata/inspect/fixture.jsonl",
		"long":    longCallEvents(t),
	}
}

// longCallEvents is a long call: the fixture's ten seconds fifty times
// over, one after the other (1,700 events, ten minutes), numbered anew.
func longCallEvents(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	seq := 0
	for i := range 50 {
		for _, line := range fixtureLines(t) {
			var e map[string]any
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			seq++
			e["seq"] = seq
			e["at_ns"] = e["at_ns"].(float64) + float64(i)*12e9
			if turn, ok := e["turn"].(map[string]any); ok {
				for k, v := range turn {
					if f, ok := v.(float64); ok && strings.HasSuffix(k, "_ns") && k != "overhead_ns" {
						turn[k] = f + float64(i)*12e9
					}
				}
			}
			line, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	path := filepath.Join(t.TempDir(), "long.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// inspectFile runs holdline inspect on path and returns the page.
func inspectFile(t *testing.T, path, out string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"inspect", path, "-o", out}, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("inspect %s: %v\n%s", path, err, stderr.String())
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(page)
}

var pageEvents = regexp.MustCompile(`(?s)<script type="application/json" id="holdline-events">(.*?)</script>`)

// eventsInPage reads back the events a page carries.
func eventsInPage(t *testing.T, page string) []events.Event {
	t.Helper()
	m := pageEvents.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("the page carries no events")
	}
	var evs []events.Event
	if err := json.Unmarshal([]byte(m[1]), &evs); err != nil {
		t.Fatalf("the page's events: %v", err)
	}
	return evs
}

// remote finds what a browser would fetch from elsewhere.
var remote = regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?\s*(https?:)?//|@import|<link\b|<script[^>]+\bsrc\s*=`)

func TestInspectPageHoldsEveryEventAndNeedsNoNetwork(t *testing.T) {
	for name, path := range inspectInputs(t) {
		t.Run(name, func(t *testing.T) {
			page := inspectFile(t, path, filepath.Join(t.TempDir(), name+".html"))
			want := kindsIn(t, path)
			var got []string
			n := 0
			for _, e := range eventsInPage(t, page) {
				n++
				if !slices.Contains(got, string(e.Kind)) {
					got = append(got, string(e.Kind))
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("the page's kinds %v; the file's %v", got, want)
			}
			data, _ := os.ReadFile(path)
			if lines := strings.Count(strings.TrimSpace(string(data)), "\n") + 1; n != lines {
				t.Errorf("the page has %d events; the file %d", n, lines)
			}
			if loc := remote.FindStringIndex(page); loc != nil {
				t.Errorf("the page loads something from elsewhere: %q", page[max(loc[0]-40, 0):min(loc[1]+40, len(page))])
			}
			for _, want := range []string{"window.HoldlineTimeline", ".hl-timeline", "HoldlineTimeline.mount("} {
				if !strings.Contains(page, want) {
					t.Errorf("the page lacks %q: the timeline is not inlined", want)
				}
			}
		})
	}
}

// The page is written next to the events file, named after it, when -o is
// not given; flags may come before or after the file.
func TestInspectNamesThePageAfterTheFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "call.events.jsonl")
	data, err := os.ReadFile("testdata/inspect/fixture.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"inspect", src}, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("inspect: %v\n%s", err, stderr.String())
	}
	want := filepath.Join(dir, "call.events.html")
	if _, err := os.Stat(want); err != nil {
		t.Errorf("no page at %s: %v (said %q)", want, err, stdout.String())
	}
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("inspect said %q; want the page's path", stdout.String())
	}
}

func TestInspectRefusesAMissingOrMalformedFile(t *testing.T) {
	dir := t.TempDir()
	good := `{"seq":1,"at_ns":0,"kind":"session_started"}`
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"missing", filepath.Join(dir, "nope.jsonl"), []string{"nope.jsonl", "no such file"}},
		{"broken JSON", write("broken.jsonl", good+"\n"+good+"\n{\"seq\":3,\"kind\":\n"), []string{"broken.jsonl:3:", "not an event"}},
		{"no kind", write("nokind.jsonl", good+"\n{\"seq\":2,\"at_ns\":5}\n"), []string{"nokind.jsonl:2:", `no "kind"`}},
		{"wrong type", write("type.jsonl", "\n"+`{"seq":"one","kind":"idle"}`+"\n"), []string{"type.jsonl:2:", "not an event"}},
		{"not JSON lines", write("text.jsonl", "hello\n"), []string{"text.jsonl:1:"}},
		{"empty", write("empty.jsonl", "\n\n"), []string{"empty.jsonl", "no events"}},
		{"page over its file", write("call.html", good+"\n"), []string{"would overwrite", "call.html"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"inspect", tc.path, "-o", filepath.Join(dir, tc.name+".html")}
			if strings.HasSuffix(tc.path, ".html") {
				args = args[:2] // the default name is the file's own
			}
			before, _ := os.ReadFile(tc.path)
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
			if err == nil {
				t.Fatal("inspect accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if len(args) > 2 {
				if _, serr := os.Stat(args[3]); serr == nil {
					t.Error("a page was written anyway")
				}
			}
			if after, _ := os.ReadFile(tc.path); !bytes.Equal(before, after) {
				t.Error("the events file was changed")
			}
		})
	}
}

func TestInspectHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"inspect", "--help"}, strings.NewReader(""), &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	for _, want := range []string{"holdline inspect EVENTS.jsonl", "/v1/sessions/ID", "HOLDLINE_TOKEN", "-idle"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stderr.String())
		}
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"help"}, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "inspect") {
		t.Errorf("the usage does not list inspect:\n%s", stdout.String())
	}
}

// fakeEventStream serves a session's event stream as holdline serve does
// (server/sse.go), wanting token: the events of lines after Last-Event-ID,
// then, if hold, keep-alives only until the client goes.
func fakeEventStream(t *testing.T, token string, lines []string, hold bool) *httptest.Server {
	return fakeEventStreamBreaking(t, token, lines, hold, 0)
}

// fakeEventStreamBreaking is fakeEventStream whose first connection breaks
// after breakAfter events (0: never).
func fakeEventStreamBreaking(t *testing.T, token string, lines []string, hold bool, breakAfter int) *httptest.Server {
	t.Helper()
	var conns atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn := conns.Add(1)
		if r.URL.Path != "/v1/sessions/s_live/events" {
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		after, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		sent := 0
		for _, l := range lines {
			var e struct {
				Seq  int
				Kind string
			}
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Error(err)
			}
			if e.Seq <= after {
				continue
			}
			if conn == 1 && breakAfter > 0 && sent == breakAfter {
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // the connection drops mid-stream
			}
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, l)
			sent++
		}
		w.(http.Flusher).Flush()
		for hold {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
				fmt.Fprint(w, ": keep-alive\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(hs.Close)
	return hs
}

func fixtureLines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/inspect/fixture.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// A live session's events are read from the server's stream with the
// token from HOLDLINE_TOKEN, until the session ends, or, when it goes
// quiet, for no longer than --idle; keep-alives do not count as events.
func TestInspectReadsALiveSession(t *testing.T) {
	lines := fixtureLines(t)
	inspect := func(t *testing.T, args ...string) (string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"inspect"}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	t.Run("until the session ends", func(t *testing.T) {
		t.Setenv("HOLDLINE_TOKEN", "s3cret")
		hs := fakeEventStream(t, "s3cret", lines, true)
		out := filepath.Join(t.TempDir(), "live.html")
		if said, err := inspect(t, hs.URL+"/v1/sessions/s_live", "-o", out); err != nil {
			t.Fatalf("inspect: %v\n%s", err, said)
		}
		page, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(eventsInPage(t, string(page))); n != len(lines) {
			t.Errorf("the page has %d events; the session had %d", n, len(lines))
		}
	})
	t.Run("until it goes idle", func(t *testing.T) {
		t.Setenv("HOLDLINE_TOKEN", "s3cret")
		hs := fakeEventStream(t, "s3cret", lines[:5], true)
		out := filepath.Join(t.TempDir(), "idle.html")
		start := time.Now()
		said, err := inspect(t, hs.URL+"/v1/sessions/s_live/events", "-o", out, "--idle", "300ms")
		if err != nil {
			t.Fatalf("inspect: %v\n%s", err, said)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("inspect took %v to give up on a quiet stream with --idle 300ms", d)
		}
		if !strings.Contains(said, "no event for 300ms") {
			t.Errorf("inspect said %q; want why it stopped", said)
		}
		page, _ := os.ReadFile(out)
		if n := len(eventsInPage(t, string(page))); n != 5 {
			t.Errorf("the page has %d events; want the 5 that came", n)
		}
	})
	t.Run("the stream closes", func(t *testing.T) {
		t.Setenv("HOLDLINE_TOKEN", "s3cret")
		hs := fakeEventStream(t, "s3cret", lines[:3], false)
		dir := t.TempDir()
		t.Chdir(dir)
		if said, err := inspect(t, hs.URL+"/v1/sessions/s_live"); err != nil {
			t.Fatalf("inspect: %v\n%s", err, said)
		}
		if _, err := os.Stat(filepath.Join(dir, "session-s_live.html")); err != nil {
			t.Errorf("no page named after the session: %v", err)
		}
	})
	t.Run("a broken stream is asked again", func(t *testing.T) {
		t.Setenv("HOLDLINE_TOKEN", "s3cret")
		hs := fakeEventStreamBreaking(t, "s3cret", lines, true, 7)
		out := filepath.Join(t.TempDir(), "broken.html")
		said, err := inspect(t, hs.URL+"/v1/sessions/s_live", "-o", out)
		if err != nil {
			t.Fatalf("inspect: %v\n%s", err, said)
		}
		if !strings.Contains(said, "asking again after event 7") {
			t.Errorf("inspect said %q; want the reconnection", said)
		}
		var seqs []uint64
		for _, e := range eventsInPage(t, readFile(t, out)) {
			seqs = append(seqs, e.Seq)
		}
		if len(seqs) != len(lines) || !slices.IsSorted(seqs) || seqs[0] != 1 || int(seqs[len(seqs)-1]) != len(lines) {
			t.Errorf("events %v; want 1 to %d, once each", seqs, len(lines))
		}
	})
	t.Run("without the token", func(t *testing.T) {
		t.Setenv("HOLDLINE_TOKEN", "")
		hs := fakeEventStream(t, "s3cret", lines, false)
		_, err := inspect(t, hs.URL+"/v1/sessions/s_live", "-o", filepath.Join(t.TempDir(), "x.html"))
		if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "HOLDLINE_TOKEN") {
			t.Errorf("err = %v; want a 401 that names HOLDLINE_TOKEN", err)
		}
	})
	t.Run("an unknown session", func(t *testing.T) {
		t.Setenv("HOLDLINE_TOKEN", "s3cret")
		hs := fakeEventStream(t, "s3cret", lines, false)
		_, err := inspect(t, hs.URL+"/v1/sessions/nope", "-o", filepath.Join(t.TempDir(), "x.html"))
		if err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("err = %v; want the 404", err)
		}
	})
}
