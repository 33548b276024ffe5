package sim

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
	"github.com/holdline/holdline/tts"
)

const bookingScenario = `
name: booking
timeout: 20s
agent:
  tools:
    - {name: book_table, duration: 400ms, result: {code: "ABC123"}}
    - {name: lookup, effect: read, duration: 200ms, result: {open: true}}
model:
  - text: "Sure, let me book that for you."
    tool_calls: [{name: book_table, args: {party: 2}}, {name: lookup}]
  - text: "Done. Your code is ABC123."
user:
  - {at: 0s, say: "Book a table for two."}
expect:
  tool_runs: {book_table: 1, lookup: 1}
  final_context_contains: ["ABC123", "Done. Your code is ABC123."]
  events:
    - {kind: tool_deferred, tool: book_table, count: 1}
    - {kind: idle}
`

func mustParse(t testing.TB, text string) *Scenario {
	t.Helper()
	sc, err := Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestRunPassesAndIsDeterministic(t *testing.T) {
	sc := mustParse(t, bookingScenario)
	a, b := RunOnce(sc, 3), RunOnce(sc, 3)
	if !a.OK() {
		t.Fatalf("violations: %v", a.Violations)
	}
	if !reflect.DeepEqual(a.Events, b.Events) {
		t.Error("two runs with one seed differ")
	}
	if a.Requests != 2 || a.ToolRuns["book_table"] != 1 {
		t.Errorf("requests %d, tool runs %v", a.Requests, a.ToolRuns)
	}
}

// Ties between sources (a tool's result and the caller's speech at one
// instant) are broken by the seed: a sweep of seeds tries both orders.
func TestSeedsVaryArrivalOrderAtOneInstant(t *testing.T) {
	sched := func(seed int64) string {
		s := newSched(seed)
		var order []string
		s.at(time.Second, srcUser, func() { order = append(order, "user") })
		s.at(time.Second, srcTool+1, func() { order = append(order, "tool") })
		s.at(time.Second, srcUser, func() { order = append(order, "user2") })
		for {
			if _, ok := s.next(); !ok {
				break
			}
			s.step()
		}
		return strings.Join(order, ",")
	}
	seen := map[string]bool{}
	for seed := range int64(32) {
		got := sched(seed)
		if strings.Index(got, "user2") < strings.Index(got, "user,") {
			t.Fatalf("seed %d: %s: one source's work out of order", seed, got)
		}
		seen[got] = true
	}
	if len(seen) < 2 {
		t.Errorf("32 seeds gave one order only: %v", seen)
	}
}

// Each invariant must be able to fail: these runs break one on purpose.
func TestInvariantsCatchViolations(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want string
	}{
		{"a hanging tool beyond the scenario's timeout", `
name: hang
timeout: 3s
agent: {tools: [{name: slow, effect: read, hang: true, timeout: 10s}]}
model: [{tool_calls: [{name: slow}]}]
user: [{at: 0s, inject: "go"}]
`, "hang: at the 3s timeout"},
		{"a wrong tool_runs expectation", `
name: runs
agent: {tools: [{name: t, effect: read}]}
model: [{tool_calls: [{name: t}]}, {text: "ok"}]
user: [{at: 0s, inject: "go"}]
expect: {tool_runs: {t: 2}}
`, "t ran 1 times; want 2"},
		{"a missing event", `
name: events
user: [{at: 0s, inject: "go"}]
expect: {events: [{kind: barge_in_confirmed}]}
`, "barge_in_confirmed: no matching event"},
		{"an absent context string", `
name: ctx
model: [{text: "Hello there."}]
user: [{at: 0s, inject: "go"}]
expect: {final_context_contains: ["ABC123"]}
`, `"ABC123" is not in the final context`},
		{"a stall shorter than the endpointing allows", `
name: stall
vad: {endpointing: 500ms}
user: [{at: 0s, say: "hello there"}]
expect: {max_stall: 1ms}
`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := RunOnce(mustParse(t, tc.yaml), 1)
			if tc.want == "" {
				if !run.OK() {
					t.Errorf("violations: %v", run.Violations)
				}
				return
			}
			if !strings.Contains(strings.Join(run.Violations, "\n"), tc.want) {
				t.Errorf("violations %q; want one containing %q", run.Violations, tc.want)
			}
		})
	}
}

// Never silent: an answer the voice could not finish must be heard to its
// end or noted in the context; the check fails a run whose context lost
// the note.
func TestSilentAnswerCheck(t *testing.T) {
	sc := mustParse(t, `
name: silent
model: [{text: "One two three. Four five six."}]
user: [{at: 0s, inject: "count"}]
faults: [{at: 0s, kind: tts_error, duration: 5s}]
`)
	r := start(sc, 1, toolCache{})
	r.schedule()
	r.loop()
	r.check()
	if !r.out.OK() {
		t.Fatalf("the run with its note fails: %v", r.out.Violations)
	}
	var kept []llm.Item
	noted := false
	for _, it := range r.out.Context.Items {
		if lost, ok := engine.IsUndeliveredNote(it.Text); ok {
			noted = lost == "One two three. Four five six."
			continue
		}
		kept = append(kept, it)
	}
	if !noted {
		t.Fatalf("no note naming the whole answer in %v", r.out.Context.Items)
	}
	// The same run judged with the note gone.
	r.out.Context = llm.ChatContext{Items: kept}
	r.checkDelivered()
	if !strings.Contains(strings.Join(r.out.Violations, "\n"), `silent: turn 1's answer "One two three. Four five six." was heard only up to ""`) {
		t.Errorf("violations %q; want the silent answer reported", r.out.Violations)
	}
}

// The checks of what the model received, fed broken requests directly.
func TestRequestChecksCatchBrokenContexts(t *testing.T) {
	call := func(id string) llm.Item { return llm.Item{Kind: llm.KindToolCall, CallID: id, Name: "t"} }
	result := func(id string) llm.Item { return llm.Item{Kind: llm.KindToolResult, CallID: id, Output: "x"} }
	user := llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "hi"}
	for _, tc := range []struct {
		name  string
		items []llm.Item
		want  string
	}{
		{"call without output", []llm.Item{user, call("a"), user}, "call a has no result before the next message"},
		{"call without output at the end", []llm.Item{user, call("a")}, "call a has no result"},
		{"two outputs", []llm.Item{call("a"), result("a"), result("a")}, "more than one result"},
		{"out of order", []llm.Item{call("a"), call("b"), result("b"), result("a")}, "want call order"},
		{"orphan result", []llm.Item{user, result("z")}, "not an open call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &run{out: &Run{}}
			r.checkAnswered("req", tc.items)
			if !strings.Contains(strings.Join(r.out.Violations, "\n"), tc.want) {
				t.Errorf("violations %q; want %q", r.out.Violations, tc.want)
			}
		})
	}
	r := &run{out: &Run{}}
	r.checkAnswered("req", []llm.Item{user, call("a"), call("b"), result("a"), result("b"), user})
	if !r.out.OK() {
		t.Errorf("a valid context was flagged: %v", r.out.Violations)
	}
}

func TestAtMostOnceCheck(t *testing.T) {
	book, err := toolCache{}.get(Tool{Name: "book", Effect: "mutation", Timeout: time.Second, Dedupe: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prior *toolRun
		want  string
	}{
		{&toolRun{call: "a", finished: true, state: tools.StateSucceeded}, "ran twice for one idempotency key"},
		{&toolRun{call: "a"}, "was still running"},
		{&toolRun{call: "a", finished: true, state: tools.StateTimedOut}, "outcome unknown"},
		{&toolRun{call: "a", finished: true, state: tools.StateFailed}, ""},
	} {
		r := &run{out: &Run{}}
		e := newEdges(r)
		tc.prior.key, tc.prior.tool = "k", book
		e.byKey["k"] = []*toolRun{tc.prior}
		e.checkOnce(&toolRun{call: "b", key: "k", dedupe: true, tool: book})
		got := strings.Join(r.out.Violations, "\n")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("prior %s: violations %q; want %q", tc.prior.state, got, tc.want)
		}
	}
}

// The player knows what was heard: words whose audio started before a cut.
func TestPlayerHeardStopsAtFlush(t *testing.T) {
	var p player
	p.segs, p.endMark = map[uint64][]segment{}, map[uint64]engine.Timer{}
	words := func(offset time.Duration, ws ...string) []tts.WordTiming {
		out := make([]tts.WordTiming, len(ws))
		for i, w := range ws {
			out[i] = tts.WordTiming{Word: w, Start: offset + time.Duration(i)*400*time.Millisecond}
		}
		return out
	}
	p.enqueue(time.Second, 1, 1200*time.Millisecond, words(0, "one", "two", "three"))
	p.enqueue(time.Second, 1, 800*time.Millisecond, words(1200*time.Millisecond, "four", "five"))
	if got := p.heard(1500*time.Millisecond, 1); got != "one two" {
		t.Errorf("heard by 1.5s = %q", got)
	}
	// The cut at 2.5s falls 300ms into the second segment: "four" had
	// started, "five" had not.
	p.flush(2500*time.Millisecond, 1)
	if got := p.heard(10*time.Second, 1); got != "one two three four" {
		t.Errorf("heard after a cut at 2.5s = %q; want %q", got, "one two three four")
	}
	if p.playingAfter(2500*time.Millisecond, 1) {
		t.Error("a flushed epoch still plays")
	}
	if got := p.played(10*time.Second, 1); got != 1500*time.Millisecond {
		t.Errorf("played = %v; want 1.5s", got)
	}
}

// A pause holds the output where it is: nothing more is heard or played
// until the resume, and then it goes on from the same word.
func TestPlayerPauseResumesWhereItStopped(t *testing.T) {
	var p player
	p.segs, p.endMark = map[uint64][]segment{}, map[uint64]engine.Timer{}
	ws := []tts.WordTiming{{Word: "one", Start: 0}, {Word: "two", Start: 400 * time.Millisecond}, {Word: "three", Start: 800 * time.Millisecond}}
	p.enqueue(time.Second, 1, 1200*time.Millisecond, ws)
	p.pause(1500 * time.Millisecond) // "two" has started
	if got := p.heard(3*time.Second, 1); got != "one two" {
		t.Errorf("heard while paused = %q; want %q", got, "one two")
	}
	if got := p.played(3*time.Second, 1); got != 500*time.Millisecond {
		t.Errorf("played while paused = %v; want 500ms", got)
	}
	if p.playingWithin(3*time.Second, 2*time.Second, 3*time.Second) {
		t.Error("the paused output counts as playing")
	}
	// Audio queued during the pause waits behind the rest.
	p.enqueue(3*time.Second, 1, 400*time.Millisecond, []tts.WordTiming{{Word: "four", Start: 1200 * time.Millisecond}})
	p.resume(4 * time.Second)
	if got := p.heard(4200*time.Millisecond, 1); got != "one two" {
		t.Errorf("heard 200ms after the resume = %q; want %q", got, "one two")
	}
	if got := p.heard(4400*time.Millisecond, 1); got != "one two three" {
		t.Errorf("heard 400ms after the resume = %q; want %q", got, "one two three")
	}
	if got := p.heard(4800*time.Millisecond, 1); got != "one two three four" {
		t.Errorf("heard 800ms after the resume = %q; want the word queued during the pause too", got)
	}
	if got, want := p.end(4*time.Second, 1), 5100*time.Millisecond; got != want {
		t.Errorf("epoch ends at %v; want %v", got, want)
	}
}

func TestSweepCoversTheRange(t *testing.T) {
	sc := mustParse(t, bookingScenario+`sweep: {param: "user.0.at", from: 0s, to: 1s}`)
	res := RunScenario(sc, Options{Sweep: 11})
	if !res.OK() || res.Runs != 11 {
		t.Fatalf("runs %d, failures %d, err %q", res.Runs, len(res.Failures), res.Err)
	}
	seed := int64(40)
	res = RunScenario(sc, Options{Sweep: 3, Seed: &seed, Set: map[string]time.Duration{"tts.ttfb": 0}})
	if !res.OK() || res.Runs != 3 {
		t.Fatalf("with --set: runs %d, err %q", res.Runs, res.Err)
	}
	res = RunScenario(sc, Options{Set: map[string]time.Duration{"nope.at": 0}})
	if res.Err == "" {
		t.Error("an unknown --set parameter was accepted")
	}
}

// The replay suite passes: every scenario in examples/scenarios, swept.
// (make test runs it with many more runs through the command.)
func TestReplaySuite(t *testing.T) {
	files, err := filepath.Glob("../examples/scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			sc, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			res := RunScenario(sc, Options{Sweep: 25})
			if res.Err != "" {
				t.Fatal(res.Err)
			}
			for _, run := range res.Failures {
				t.Errorf("seed %d %s=%v: %v", run.Seed, run.Param, run.Value, run.Violations)
			}
		})
	}
}

// BenchmarkSimulator measures scenario runs per second for a scenario of
// about ten seconds of virtual time with a tool call, a barge-in and a
// follow-up.
func BenchmarkSimulator(b *testing.B) {
	sc := mustParseB(b, tenSeconds)
	cache := toolCache{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if run := runOnce(sc, int64(i), cache); !run.OK() {
			b.Fatal(run.Violations)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

func mustParseB(b *testing.B, text string) *Scenario {
	sc, err := Parse("bench.yaml", []byte(text))
	if err != nil {
		b.Fatal(err)
	}
	return sc
}

const tenSeconds = `
name: ten-seconds
timeout: 20s
agent:
  tools:
    - {name: book_table, duration: 400ms, result: {code: "ABC123"}}
    - {name: lookup, effect: read, duration: 300ms, result: {open: true}}
model:
  - text: "Let me check that for you."
    tool_calls: [{name: lookup}]
  - text: "We are open tonight. Shall I book a table for two at seven?"
  - text: "Sure, booking it now."
    tool_calls: [{name: book_table, args: {party: 2, time: "19:00"}}]
  - text: "Done. Your code is ABC123. Anything else?"
user:
  - {at: 0s, say: "Are you open tonight?"}
  - {at: 3.5s, say: "Yes please, book it."}
  - {at: 9s, say: "No thanks."}
`

// The scenario in the README's simulator section runs and passes, swept,
// tried as a new user would: copied from the README as is.
func TestReadmeScenarioTriedAsANewUserWould(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```yaml\n")
	if !ok {
		t.Fatal("the README has no yaml block")
	}
	block, _, _ = strings.Cut(block, "```")
	sc, err := Parse("README.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	res := RunScenario(sc, Options{Sweep: 200})
	if !res.OK() {
		t.Fatalf("%d of %d runs failed; first: seed %d %s=%v %v", len(res.Failures), res.Runs,
			res.Failures[0].Seed, res.Failures[0].Param, res.Failures[0].Value, res.Failures[0].Violations)
	}
}

// A cancelled scripted body's outcome reaches the core as an input of its
// own, after the one that cancelled it, as a live body's return waits in
// the mailbox. When it came inside the cancelling command, the caller's
// turn that cut the call in and the result the cancel made owed both
// started an answer at once, and the caller heard them in the other order
// than the context says (found on this very timing).
func TestCancelledBodysOutcomeComesAfterTheInputThatCancelledIt(t *testing.T) {
	sc, err := Load("../examples/scenarios/b4-new-input-preempts-running-tools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	seed, speculate := int64(289), true
	res := RunScenario(sc, Options{Seed: &seed, Speculate: &speculate, KeepFirst: true,
		Set: map[string]time.Duration{"user.1.at": 6541806020 * time.Nanosecond}})
	if res.Err != "" {
		t.Fatal(res.Err)
	}
	for _, run := range res.Failures {
		t.Errorf("seed %d: %v", run.Seed, run.Violations)
	}
	started := 0
	for _, e := range res.First.Events {
		if e.Kind == events.TurnStarted && e.At == 8040*time.Millisecond {
			started++
		}
	}
	if started != 1 {
		t.Errorf("%d turns started as the caller's turn cut the calls; want 1, the answer to the caller", started)
	}
}
