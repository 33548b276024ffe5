package sim

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
)

// scnRefused are the files of testdata/refused, each with one name that is
// misspelled or cannot occur, and the message Load gives it after the file
// name: the line, the key and, where a valid name is close, that name.
// wholeFile: only the whole file tells the name is wrong, which the
// schema cannot.
var scnRefused = []struct {
	file, want string
	wholeFile  bool
}{
	{"kind-missing-letters.yaml",
		`15: expect.events.0.kind: unknown event kind "barge_in_confirm"; did you mean "barge_in_confirmed"?`, false},
	{"kind-wrong-word.yaml",
		`15: expect.events.0.kind: unknown event kind "tool_terminated"; did you mean "tool_terminal"?`, false},
	{"state-misspelled.yaml",
		`15: expect.events.0.state: tool_terminal has no state "succeded"; did you mean "succeeded"? (its states: succeeded, failed, cancelled, timed_out, unknown)`, false},
	{"state-us-spelling.yaml",
		`15: expect.events.0.state: tool_terminal has no state "canceled"; did you mean "cancelled"? (its states: succeeded, failed, cancelled, timed_out, unknown)`, false},
	{"state-not-terminal.yaml",
		`15: expect.events.0.state: tool_terminal has no state "running" (its states: succeeded, failed, cancelled, timed_out, unknown)`, false},
	{"state-on-stateless-kind.yaml",
		`15: expect.events.0.state: tool_started events carry no state, so "running" never matches`, false},
	{"echo-state-misspelled.yaml",
		`17: expect.events.0.state: echo_path has no state "presnt"; did you mean "present"? (its states: none, present)`, false},
	{"reason-misspelled.yaml",
		`17: expect.events.0.reason: barge_in_resumed has no reason "backchanel"; did you mean "backchannel"? (its reasons: speech, speech_over_agent, speech_continued, transcript, not_confirmed, short_sound, backchannel, echo_transcript, unconfirmed_words, verdict_timeout)`, false},
	{"reason-of-dedupe-misspelled.yaml",
		`15: expect.events.0.reason: tool_deduped has no reason "reused"; did you mean "reuse"? (its reasons: reuse, join)`, false},
	{"fault-kind-misspelled.yaml",
		`14: faults.0.kind: "tts_eror" is not one of llm_error, tts_error, transport_drop; did you mean "tts_error"?`, false},
	{"policy-misspelled.yaml",
		`5: agent.tools.0.on_interrupt: "cancle" is not one of complete, cancel, defer, detach; did you mean "cancel"?`, false},
	{"expect-key-misspelled.yaml",
		`14: expect.tool_run: unknown key; did you mean "tool_runs"? (known keys: max_stall, tool_runs, tool_runs_max, every_call_answered, context_matches_playout, final_context_contains, events)`, false},
	{"event-key-misspelled.yaml",
		`15: expect.events.0.reasons: unknown key; did you mean "reason"? (known keys: kind, within, after, tool, state, reason, count)`, false},
	{"tool-misspelled.yaml",
		`15: expect.events.0.tool: no tool "book_tabel" is declared or called by the model; did you mean "book_table"?`, true},
}

// TestScenarioRefusesMisspelledNames loads each file of scnRefused and
// checks that it gets exactly its one message.
func TestScenarioRefusesMisspelledNames(t *testing.T) {
	for _, tt := range scnRefused {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "refused", tt.file)
			sc, err := Load(path)
			if err == nil {
				t.Fatalf("Load succeeded with %+v, want an error", sc)
			}
			if errs := scnTestErrors(err); len(errs) != 1 {
				t.Errorf("got %d errors, want 1:\n%v", len(errs), err)
			}
			if !errors.Is(err, ErrUnknownName) {
				t.Errorf("error %v is not ErrUnknownName", err)
			}
			if want := path + ":" + tt.want; err.Error() != want {
				t.Errorf("error = %q\nwant    %q", err, want)
			}
		})
	}
	files, err := filepath.Glob(filepath.Join("testdata", "refused", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(scnRefused) {
		t.Errorf("testdata/refused has %d files and the table %d: each file needs its message here", len(files), len(scnRefused))
	}
}

func TestNearestNameSuggestsOnlyCloseNames(t *testing.T) {
	kinds := scnEventKinds()
	for _, tt := range []struct{ typo, want string }{
		{"tool_complete", "tool_committed"},
		{"barge_in_confirm", "barge_in_confirmed"},
		{"Transcript", "transcript"},
		{"speech_start", "speech_started"},
		{"tool", ""},
		{"x", ""},
		{"session", ""},
		{"turn_metrics", ""}, // a valid name is not its own suggestion
	} {
		if got := scnNearest(tt.typo, kinds); got != tt.want {
			t.Errorf("nearest kind to %q = %q, want %q", tt.typo, got, tt.want)
		}
	}
	long := string(make([]byte, scnMaxSuggest+1))
	if got := scnNearest(long, []string{long[1:]}); got != "" {
		t.Errorf("a name longer than %d bytes got the suggestion %q", scnMaxSuggest, got)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3},
		{"tool_complete", "tool_completed", 1}, {"succeded", "succeeded", 1},
	} {
		if got := scnEditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestEventNameTablesUseKnownKinds: a table keyed by a kind that events
// no longer declares would check names no event carries.
func TestEventNameTablesUseKnownKinds(t *testing.T) {
	for k := range scnEventStates {
		if !k.Known() {
			t.Errorf("scnEventStates has the unknown kind %q", k)
		}
	}
	for k, reasons := range scnEventReasons {
		if !k.Known() {
			t.Errorf("scnEventReasons has the unknown kind %q", k)
		}
		if slices.Contains(reasons, "") {
			t.Errorf("scnEventReasons[%s] has the empty reason, which is no filter", k)
		}
	}
}

// TestEmittedNamesAreKnown runs every example scenario at points across its
// sweep and checks what the core emitted against the names scenario files
// are checked with: every kind is in events.Kinds, and every state and
// reason of a kind whose set is closed is in its list. A new kind or
// reason in the core that the lists lack fails here rather than refusing a
// user's correct file.
func TestEmittedNamesAreKnown(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "scenarios", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("testdata", "example.yaml"))
	const points = 12 // runs per file, spread over its sweep
	seen := map[events.Kind]bool{}
	reported := map[string]bool{} // each problem once, with the first run that shows it
	for _, file := range files {
		sc, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		for i := range points {
			c := sc.Clone()
			if sw := c.Sweep; sw != nil {
				at := sw.From + (sw.To-sw.From)*time.Duration(i)/(points-1)
				if err := c.Set(sw.Param, at); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range RunOnce(c, c.Seed+int64(i)).Events {
				seen[e.Kind] = true
				if msg := scnCheckEmitted(e); msg != "" && !reported[msg] {
					reported[msg] = true
					t.Errorf("%s, seed %d: %s", file, c.Seed+int64(i), msg)
				}
			}
		}
	}
	// The runs must reach the kinds whose names are checked, or the test
	// proves little about them.
	for _, k := range []events.Kind{events.BargeInConfirmed, events.BargeInResumed, events.ToolTerminal, events.TranscriptIgnored} {
		if !seen[k] {
			t.Errorf("no run emitted %s", k)
		}
	}
}

// scnCheckEmitted says what of an emitted event a scenario could not name.
func scnCheckEmitted(e events.Event) string {
	if !e.Kind.Known() {
		return "unknown kind " + string(e.Kind)
	}
	if states, ok := scnEventStates[e.Kind]; e.State != "" && (!ok || !slices.Contains(states, e.State)) {
		return string(e.Kind) + " carries the unlisted state " + e.State
	}
	if reasons, ok := scnEventReasons[e.Kind]; ok && e.Reason != "" && !slices.Contains(reasons, e.Reason) {
		return string(e.Kind) + " carries the unlisted reason " + e.Reason
	}
	return ""
}

// TestReasonTablesHoldTheEmittersWords reads the packages that emit events
// and checks every reason written as a literal in an events.Event of a
// kind whose reasons are listed: the emitters the example runs do not
// reach (a warm transfer, a checkpoint store) are held to the lists too.
func TestReasonTablesHoldTheEmittersWords(t *testing.T) {
	consts := scnTestKindConsts(t)
	found := 0
	for _, dir := range []string{"../runtime/engine", "../runtime", "../sip", "../calls"} {
		files := scnTestGlob(t, filepath.Join(dir, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				kind, reason, ok := scnTestEventLiteral(n, consts)
				if !ok {
					return true
				}
				found++
				if reasons, listed := scnEventReasons[kind]; listed && !slices.Contains(reasons, reason) {
					t.Errorf("%s: a %s event has the reason %q, which scnEventReasons[%s] lacks", file, kind, reason, kind)
				}
				return true
			})
		}
	}
	if found == 0 {
		t.Error("found no events.Event literal with a literal reason: the scan no longer sees the emitters")
	}
}

// scnTestKindConsts maps the names of the Kind constants to their values.
func scnTestKindConsts(t *testing.T) map[string]events.Kind {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../events/event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]events.Kind{}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						consts[name.Name] = events.Kind(v)
					}
				}
			}
		}
	}
	return consts
}

// scnTestEventLiteral reads events.Event{Kind: events.K, ..., Reason: "r"}.
func scnTestEventLiteral(n ast.Node, consts map[string]events.Kind) (events.Kind, string, bool) {
	lit, ok := n.(*ast.CompositeLit)
	if !ok || !scnTestIsSelector(lit.Type, "events", "Event") {
		return "", "", false
	}
	var kind events.Kind
	var reason string
	var hasReason bool
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch key, _ := kv.Key.(*ast.Ident); {
		case key == nil:
		case key.Name == "Kind":
			if sel, ok := kv.Value.(*ast.SelectorExpr); ok && scnTestIsSelector(sel, "events", sel.Sel.Name) {
				kind = consts[sel.Sel.Name]
			}
		case key.Name == "Reason":
			if bl, ok := kv.Value.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				reason, _ = strconv.Unquote(bl.Value)
				hasReason = true
			}
		}
	}
	return kind, reason, kind != "" && hasReason
}

func scnTestIsSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}
