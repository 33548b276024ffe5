package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/server"
)

// Bounds on reading a live session's events: every wait has one.
const (
	inspectConnectTimeout = 10 * time.Second
	inspectDefaultIdle    = 30 * time.Second
	inspectDefaultMax     = 4 * time.Hour
	// maxEventLine bounds one JSON line; an event is far smaller, so a
	// longer line is a file that is not events.
	maxEventLine = 8 << 20
)

func (c *cli) inspectCmd(ctx context.Context, args []string) error {
	stderr := c.stderr
	fs := c.flagSet("inspect")
	out := fs.String("o", "", "write the page to `FILE` (default: the events file's name with .html; session-ID.html for a session)")
	idle := fs.Duration("idle", inspectDefaultIdle, "for a live session: stop when no event has come for this long")
	maxWait := fs.Duration("max", inspectDefaultMax, "for a live session: stop after this long whatever comes")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: holdline inspect EVENTS.jsonl [-o OUT.html]
       holdline inspect http(s)://HOST/v1/sessions/ID [-o OUT.html] [--idle 30s] [--max 4h]

Writes one self-contained HTML page (no network needed to open it) with the
call's timeline: the caller's speech, the agent's audio (what was heard and
what was cut), the model, the voice, each tool call's states, barge-ins,
checkpoints, handoffs, transport and provider errors, and under each agent
turn the latency breakdown of its turn_metrics event. Hover or focus an item
to see the event's fields.

EVENTS.jsonl is what "holdline console --events FILE" writes. A session URL
reads that session's events from a running "holdline serve" (the token from
HOLDLINE_TOKEN) until the session ends or the stream is idle for --idle.

`)
		fs.PrintDefaults()
	}
	// The output flag may come after the source, as the usage shows it.
	var sources []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		sources = append(sources, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(sources) != 1 {
		fs.Usage()
		return fmt.Errorf("inspect: want one events file or session URL, have %d", len(sources))
	}
	src := sources[0]
	var (
		evs   []json.RawMessage
		title string
		err   error
	)
	if isSessionURL(src) {
		evs, err = readSessionEvents(ctx, src, os.Getenv("HOLDLINE_TOKEN"), *idle, *maxWait, stderr)
		title = src
		if *out == "" {
			*out = "session-" + sessionIDOf(src) + ".html"
		}
	} else {
		evs, err = readEventsFile(src)
		title = filepath.Base(src)
		if *out == "" {
			*out = strings.TrimSuffix(src, filepath.Ext(src)) + ".html"
		}
	}
	if err != nil {
		return err
	}
	if *out == src {
		return fmt.Errorf("inspect: the page would overwrite its events file %s: give -o", src)
	}
	page, err := inspectPage(title, evs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, page, 0o644); err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	fmt.Fprintf(c.stdout, "%d events → %s\n", len(evs), *out)
	return nil
}

func isSessionURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// readEventsFile reads a JSONL file of events. Every line must be an
// event: a page that silently skipped a line would show a call that did
// not happen, so the first bad line is refused by its number.
func readEventsFile(path string) ([]json.RawMessage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	defer f.Close()
	evs, err := readEvents(f, path)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	return evs, nil
}

// readEvents reads JSON lines of events from r; name is for errors.
// Blank lines are allowed (an editor's trailing newline).
func readEvents(r io.Reader, name string) ([]json.RawMessage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var evs []json.RawMessage
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		ev, err := parseEvent(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: a line longer than %d bytes is not an event: %w", name, len(evs)+1, maxEventLine, err)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("%s: no events in it", name)
	}
	return evs, nil
}

// parseEvent checks that line is an event and returns it as it came, so
// fields this version does not know still reach the page.
func parseEvent(line []byte) (json.RawMessage, error) {
	var e events.Event
	if err := json.Unmarshal(line, &e); err != nil {
		return nil, fmt.Errorf("not an event: %w", err)
	}
	if e.Kind == "" {
		return nil, errors.New(`not an event: no "kind"`)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, line); err != nil {
		return nil, fmt.Errorf("not an event: %w", err)
	}
	return json.RawMessage(compact.Bytes()), nil
}

// sessionIDOf is the id in .../v1/sessions/{id}[/events].
func sessionIDOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "unknown"
	}
	p := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/events")
	if i := strings.LastIndex(p, "/"); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		return "unknown"
	}
	return p
}

// eventsURL is the session's event stream for a session URL.
func eventsURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("inspect: %w", err)
	}
	p := strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(p, "/events") {
		p += "/events"
	}
	if !strings.Contains(p, "/v1/sessions/") {
		return "", fmt.Errorf("inspect: %s is not a session URL (want http(s)://HOST/v1/sessions/ID)", raw)
	}
	u.Path = p
	return u.String(), nil
}

// readSessionEvents reads a live session's events from its event stream
// until the session ends (session_ended, or the server has nothing more
// for it), no event comes for idle, or maxWait passes. A stream that breaks
// is asked again from the last event seen (Last-Event-ID), a few times.
func readSessionEvents(ctx context.Context, raw, token string, idle, maxWait time.Duration, logw io.Writer) ([]json.RawMessage, error) {
	target, err := eventsURL(raw)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	s := &sessionStream{target: target, token: token, idle: time.NewTimer(idle), idleFor: idle}
	defer s.idle.Stop()
	for tries := 0; ; tries++ {
		n, err := s.follow(ctx)
		var refused *refusedError
		switch {
		case s.ended:
			return s.evs, nil
		case errors.Is(err, errIdle):
			fmt.Fprintf(logw, "inspect: no event for %v: writing what came\n", idle)
			return s.result()
		case errors.Is(err, context.DeadlineExceeded):
			fmt.Fprintf(logw, "inspect: stopped after %v: writing what came\n", maxWait)
			return s.result()
		case ctx.Err() != nil:
			return nil, fmt.Errorf("inspect: %w", ctx.Err())
		case errors.As(err, &refused) && len(s.evs) == 0:
			return nil, err
		case refused != nil:
			// Asked again, the server no longer knows the session: it is over.
			return s.evs, nil
		case err == nil && n == 0 && tries > 0:
			// Asked again, the stream closed with nothing new: the server
			// closes it when the session is over.
			return s.result()
		case tries >= inspectReconnects:
			fmt.Fprintf(logw, "inspect: the stream broke %d times (%v): writing what came\n", tries+1, err)
			return s.result()
		}
		if err != nil {
			fmt.Fprintf(logw, "inspect: the stream broke (%v): asking again after event %s\n", err, s.lastID)
		}
		select {
		case <-time.After(inspectReconnectDelay):
		case <-s.idle.C:
			fmt.Fprintf(logw, "inspect: no event for %v: writing what came\n", idle)
			return s.result()
		case <-ctx.Done():
			continue // the next follow says why
		}
	}
}

// Reconnecting to a live session's stream.
const (
	inspectReconnects     = 3
	inspectReconnectDelay = time.Second
)

var errIdle = errors.New("no event for the idle time")

// sessionStream is one session's events, read across reconnections.
type sessionStream struct {
	target, token string
	idle          *time.Timer // reset by every event, across connections
	idleFor       time.Duration
	evs           []json.RawMessage
	lastID        string
	ended         bool
}

func (s *sessionStream) result() ([]json.RawMessage, error) {
	if len(s.evs) == 0 {
		return nil, fmt.Errorf("inspect: %s: the stream ended with no events", s.target)
	}
	return s.evs, nil
}

// follow reads one connection's events until it ends, the session ends,
// or the idle timer fires; n is how many events it brought. A clean end
// of the stream is a nil error.
func (s *sessionStream) follow(ctx context.Context) (n int, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // also stops scanSSE
	body, err := openStream(ctx, s.target, s.token, s.lastID)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	lines := make(chan sseEvent)
	done := make(chan error, 1)
	go func() { done <- scanSSE(ctx, body, lines) }()
	for {
		select {
		case e := <-lines:
			ev, err := parseEvent([]byte(e.data))
			if err != nil {
				return n, fmt.Errorf("inspect: %s: event %s: %w", s.target, e.id, err)
			}
			s.evs = append(s.evs, ev)
			n++
			if e.id != "" {
				s.lastID = e.id
			}
			if e.kind == string(events.SessionEnded) {
				s.ended = true
				return n, nil
			}
			resetTimer(s.idle, s.idleFor)
		case err := <-done:
			return n, err
		case <-s.idle.C:
			return n, errIdle
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
}

// resetTimer restarts t for d (since Go 1.23 a stopped timer's channel
// holds no stale tick).
func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(d)
}

// refusedError is the server's answer when it would not stream.
type refusedError struct {
	target, status, msg string
	code                int
}

func (e *refusedError) Error() string {
	hint := ""
	if e.code == http.StatusUnauthorized {
		hint = " (set HOLDLINE_TOKEN to the server's token)"
	}
	return fmt.Sprintf("inspect: %s: %s: %s%s", e.target, e.status, e.msg, hint)
}

// openStream makes the request, from after the event lastID when set,
// and waits, at most inspectConnectTimeout, for the server's answer.
func openStream(ctx context.Context, target, token, lastID string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	// Only the answer's headers are bounded here: the body is a stream
	// that lasts as long as the call, bounded by the idle timer instead.
	client := &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		ResponseHeaderTimeout: inspectConnectTimeout,
		TLSHandshakeTimeout:   inspectConnectTimeout,
	}}
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		return nil, &refusedError{target: target, status: res.Status, msg: strings.TrimSpace(string(msg)), code: res.StatusCode}
	}
	return res.Body, nil
}

// sseEvent is one Server-Sent Event of the stream.
type sseEvent struct{ id, kind, data string }

// scanSSE reads Server-Sent Events from r (the fields Holdline sends:
// id, event, data; comments are keep-alives) until it ends.
func scanSSE(ctx context.Context, r io.Reader, out chan<- sseEvent) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var cur sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				cur.data = strings.Join(data, "\n")
				select {
				case out <- cur:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			cur, data = sseEvent{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			cur.id = value
		case "event":
			cur.kind = value
		case "data":
			data = append(data, value)
		}
	}
	return sc.Err()
}

// inspectPage is the self-contained page: the timeline's script and
// styles inlined, the events as JSON in the page.
func inspectPage(title string, evs []json.RawMessage) ([]byte, error) {
	script, style := server.TimelineAssets()
	// Marshal escapes <, > and & in strings, so no event text can close
	// the script element that carries it.
	data, err := json.Marshal(evs)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if bytes.Contains(bytes.ToLower(script), []byte("</script")) {
		return nil, errors.New("inspect: timeline.js contains </script and cannot be inlined")
	}
	var b bytes.Buffer
	t := html.EscapeString(title)
	fmt.Fprintf(&b, `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Holdline call: %s</title>
<style>
body { margin: 0; padding: 12px 16px 32px; font: 14px/1.4 system-ui, sans-serif; }
h1 { font-size: 18px; margin: 0 0 4px; }
.src { color: #6b7588; margin: 0 0 8px; overflow-wrap: anywhere; }
@media (prefers-color-scheme: dark) { body { background: #1c2027; color: #e6e9ee; } }
%s</style>
</head>
<body>
<h1>Holdline call</h1>
<p class="src">%s · %d events · hover or focus an item for its fields; Ctrl+wheel or −/+ to zoom</p>
<div id="timeline"></div>
<script type="application/json" id="holdline-events">%s</script>
<script>
%s</script>
<script>
HoldlineTimeline.mount(document.getElementById('timeline'), JSON.parse(document.getElementById('holdline-events').textContent));
</script>
</body>
</html>
`, t, style, t, len(evs), data, script)
	return b.Bytes(), nil
}
