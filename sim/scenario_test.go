package sim

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const scnMs = time.Millisecond

// scnExampleScenario is what testdata/example.yaml must parse to.
func scnExampleScenario() *Scenario {
	return &Scenario{
		File:      "testdata/example.yaml",
		Name:      "interrupt-during-tool-preamble",
		Seed:      7,
		Timeout:   20 * time.Second,
		Speculate: true,
		Agent: Agent{
			Instructions: "You book tables.",
			Tools: []Tool{{
				Name:        "book_table",
				Effect:      "mutation",
				OnInterrupt: "defer",
				Duration:    400 * scnMs,
				Timeout:     2 * time.Second,
				Result:      json.RawMessage(`{"code":"ABC123"}`),
				Dedupe:      true, // the default
			}},
		},
		Model: []ModelResponse{
			{
				TTFB: 300 * scnMs,
				Text: "Sure, let me book that for you.",
				ToolCalls: []ToolCall{{
					Name: "book_table",
					Args: json.RawMessage(`{"party":2,"time":"19:00"}`),
				}},
			},
			{TTFB: 200 * scnMs, Text: "Done. Your code is ABC123."},
		},
		TTS: TTS{TTFB: 250 * scnMs, WordsPerSecond: 2.5},
		STT: STT{Latency: 150 * scnMs},
		VAD: VAD{Onset: 100 * scnMs, Endpointing: 400 * scnMs},
		User: []UserAction{
			{At: 0, Say: "Book a table for two at seven."},
			{At: 1100 * scnMs, Say: "Actually, wait."},
			{At: 1100 * scnMs, Inject: "Cancel that."},
			{At: 2 * time.Second, Backchannel: "uh-huh"},
		},
		Faults: []Fault{{At: 1500 * scnMs, Kind: "llm_error"}},
		Expect: Expect{
			MaxStall:              100 * scnMs,
			ToolRuns:              map[string]int{"book_table": 1},
			ToolRunsMax:           map[string]int{"book_table": 1},
			EveryCallAnswered:     true,
			ContextMatchesPlayout: true,
			FinalContextContains:  []string{"ABC123"},
			Events: []EventExpect{{
				Kind: "barge_in_confirmed", Within: 150 * scnMs, After: "user.1", Count: -1, Line: 40,
			}},
		},
		Sweep: &Sweep{Param: "user.1.at", From: 200 * scnMs, To: 3 * time.Second},
	}
}

func TestScenarioLoadExample(t *testing.T) {
	got, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := scnExampleScenario(); !reflect.DeepEqual(got, want) {
		t.Errorf("Load =\n%+v\nwant\n%+v", got, want)
	}
}

// TestScenarioParseDefaults checks the defaults of absent keys, and that present keys
// keep their value even when it is zero.
func TestScenarioParseDefaults(t *testing.T) {
	const src = `name: defaults
agent:
  tools:
    - name: lookup
    - name: zero
      duration: 0s
      dedupe: false
      result: [1, 2.5, "x", null, true, {b: 1, a: "<&>"}]
model:
  - text: hi
    tool_calls: [{id: c1, name: missing_tool}]
tts: {ttfb: 0s}
user:
  - {at: 0, say: hello, duration: 1s}
expect:
  tool_runs: {}
  events:
    - kind: tool_terminal
      count: 0
    - {kind: idle, after: start}
`
	got, err := Parse("d.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := &Scenario{
		File:      "d.yaml",
		Name:      "defaults",
		Seed:      1,
		Timeout:   30 * time.Second,
		Speculate: true,
		Agent: Agent{
			Instructions: "You are a helpful voice agent.",
			Tools: []Tool{
				{Name: "lookup", Effect: "mutation", Duration: 100 * scnMs, Timeout: 10 * time.Second,
					Result: json.RawMessage(`{"ok":true}`), Dedupe: true},
				{Name: "zero", Effect: "mutation", Duration: 0, Timeout: 10 * time.Second,
					Result: json.RawMessage(`[1,2.5,"x",null,true,{"b":1,"a":"\u003c\u0026\u003e"}]`)},
			},
		},
		Model: []ModelResponse{{
			TTFB:      300 * scnMs,
			Text:      "hi",
			ToolCalls: []ToolCall{{ID: "c1", Name: "missing_tool", Args: json.RawMessage(`{}`)}},
		}},
		TTS:  TTS{TTFB: 0, WordsPerSecond: 2.5},
		STT:  STT{Latency: 150 * scnMs},
		VAD:  VAD{Onset: 100 * scnMs, Endpointing: 500 * scnMs},
		User: []UserAction{{At: 0, Say: "hello", Duration: time.Second}},
		Expect: Expect{
			MaxStall:              100 * scnMs,
			ToolRuns:              map[string]int{},
			EveryCallAnswered:     true,
			ContextMatchesPlayout: true,
			Events: []EventExpect{
				{Kind: "tool_terminal", Count: 0, Line: 18},
				{Kind: "idle", After: "start", Count: -1, Line: 20},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", got, want)
	}
	if got.Sweep != nil {
		t.Errorf("Sweep = %+v, want nil when absent", got.Sweep)
	}
}

func TestScenarioParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // the whole message, or a prefix of it ending in "..."
	}{
		{"unknown top-level key", "name: x\ncolour: red\n",
			"t.yaml:2: colour: unknown key; known keys: name, seed, timeout, speculate, agent, tools, model, tts, stt, vad, line, user, faults, expect, sweep"},
		{"unknown tool key", "name: x\nagent:\n  tools:\n    - name: a\n      ignore_cancel: true\n",
			`t.yaml:5: agent.tools.0.ignore_cancel: unknown key; did you mean "ignores_cancel"? (known keys: name, effect, on_interrupt, duration, timeout, result, error, ignores_cancel, hang, dedupe, speculative)`},
		{"duplicate key", "name: x\nseed: 1\nseed: 2\n", "t.yaml:3: seed: duplicate key (first at line 2)"},
		{"duplicate block key", "name: x\nagent:\n  tools: []\nagent:\n  tools: []\n", "t.yaml:4: agent: duplicate key (first at line 2)"},
		{"duplicate result key", "name: x\nagent:\n  tools:\n    - name: a\n      result: {a: 1, a: 2}\n",
			"t.yaml:5: agent.tools.0.result.a: duplicate key"},
		{"bad duration", "name: x\nuser:\n  - {at: fast, say: hi}\n",
			`t.yaml:3: user.0.at: "fast" is not a duration (want e.g. 400ms or 1.5s)`},
		{"duration without unit", "name: x\ntimeout: 5\n", `t.yaml:2: timeout: "5" is not a duration...`},
		{"negative duration", "name: x\nvad: {onset: -1s}\n", `t.yaml:2: vad.onset: "-1s" is negative...`},
		{"zero where positive", "name: x\nexpect:\n  max_stall: 0s\n", `t.yaml:3: expect.max_stall: "0s" must be > 0`},
		{"duration is a list", "name: x\ntts:\n  ttfb: [1s]\n", `t.yaml:3: tts.ttfb: want a duration (e.g. 400ms or 1.5s), got a list`},
		{"bad enum", "name: x\nagent:\n  tools:\n    - {name: a, effect: sometimes}\n",
			`t.yaml:4: agent.tools.0.effect: "sometimes" is not one of read, mutation`},
		{"bad on_interrupt", "name: x\nagent:\n  tools:\n    - {name: a, on_interrupt: later}\n",
			`t.yaml:4: agent.tools.0.on_interrupt: "later" is not one of complete, cancel, defer, detach`},
		{"bad fault kind", "name: x\nfaults:\n  - {at: 1s, kind: meteor}\n",
			`t.yaml:3: faults.0.kind: "meteor" is not one of llm_error, tts_error, transport_drop`},
		{"duration on a fault that happens once", "name: x\nfaults:\n  - {at: 1s, kind: llm_error, duration: 2s}\n",
			`t.yaml:3: faults.0.duration: only allowed with kind tts_error...`},
		{"missing name", "seed: 3\n", "t.yaml:1: name: required key is missing"},
		{"empty name", "seed: 3\nname: \"\"\n", "t.yaml:2: name: must not be empty"},
		{"missing at", "name: x\nfaults:\n  - kind: llm_error\n", "t.yaml:3: faults.0.at: required key is missing"},
		{"bad tool name", "name: x\nagent:\n  tools:\n    - name: book table\n",
			`t.yaml:4: agent.tools.0.name: "book table" is not a valid tool name...`},
		{"duplicate tool", "name: x\nagent:\n  tools:\n    - name: a\n    - name: a\n",
			`t.yaml:5: agent.tools.1.name: duplicate tool name "a" (first declared at line 4)`},
		{"missing tool call name", "name: x\nmodel:\n  - tool_calls:\n      - args: {}\n",
			"t.yaml:4: model.0.tool_calls.0.name: required key is missing"},
		{"args not a mapping", "name: x\nmodel:\n  - tool_calls: [{name: a, args: [1]}]\n",
			"t.yaml:3: model.0.tool_calls.0.args: want a mapping of arguments, got a list"},
		{"result infinity", "name: x\nagent:\n  tools:\n    - name: a\n      result: {v: .inf}\n",
			"t.yaml:5: agent.tools.0.result.v: .inf cannot be written as JSON"},
		{"say and inject", "name: x\nuser:\n  - at: 0s\n    say: hi\n    inject: yo\n",
			"t.yaml:5: user.0.inject: say is also set; want exactly one of say, inject, backchannel, noise"},
		{"no speech", "name: x\nuser:\n  - at: 0s\n", "t.yaml:3: user.0: want exactly one of say, inject, backchannel, noise"},
		{"empty say", "name: x\nuser:\n  - {at: 0s, say: ~}\n", "t.yaml:3: user.0.say: must not be empty"},
		{"duration with inject", "name: x\nuser:\n  - {at: 0s, inject: hi, duration: 1s}\n",
			"t.yaml:3: user.0.duration: only allowed with say, backchannel or noise..."},
		{"string is a mapping", "name: x\nuser:\n  - at: 0s\n    say: {a: b}\n", "t.yaml:4: user.0.say: want a string, got a mapping"},
		{"list is a mapping", "name: x\nuser: {at: 0s}\n", "t.yaml:2: user: want a list, got a mapping"},
		{"every_call_answered false", "name: x\nexpect:\n  every_call_answered: false\n",
			"t.yaml:3: expect.every_call_answered: always checked; it cannot be turned off"},
		{"context_matches_playout false", "name: x\nexpect: {context_matches_playout: false}\n",
			"t.yaml:2: expect.context_matches_playout: always checked; it cannot be turned off"},
		{"bool is yes", "name: x\nagent:\n  tools:\n    - {name: a, hang: yes}\n",
			`t.yaml:4: agent.tools.0.hang: "yes" is not a boolean (want true or false)`},
		{"seed is a string", "name: x\nseed: \"7\"\n", `t.yaml:2: seed: "7" is not an integer`},
		{"words_per_second zero", "name: x\ntts: {words_per_second: 0}\n", "t.yaml:2: tts.words_per_second: 0 must be a finite number > 0"},
		{"count negative", "name: x\nexpect:\n  events:\n    - {kind: idle, count: -2}\n", "t.yaml:4: expect.events.0.count: -2 must be >= 0"},
		{"after out of range", "name: x\nuser:\n  - {at: 0s, say: hi}\nexpect:\n  events:\n    - kind: idle\n      after: user.9\n",
			`t.yaml:7: expect.events.0.after: "user.9" is out of range: the file has 1 user action`},
		{"after malformed", "name: x\nexpect:\n  events:\n    - {kind: idle, after: users.0}\n",
			`t.yaml:4: expect.events.0.after: "users.0" is not one of start, user.N, fault.N`},
		{"empty event kind", "name: x\nexpect:\n  events:\n    - {kind: ''}\n", "t.yaml:4: expect.events.0.kind: must not be empty"},
		{"tool_runs undeclared tool", "name: x\nagent:\n  tools: [{name: a}]\nexpect:\n  tool_runs: {a: 1}\n  tool_runs_max:\n    b: 2\n",
			`t.yaml:7: expect.tool_runs_max.b: no tool "b" in agent.tools`},
		{"tool_runs negative", "name: x\nagent:\n  tools: [{name: a}]\nexpect:\n  tool_runs: {a: -1}\n",
			"t.yaml:5: expect.tool_runs.a: -1 must be >= 0"},
		{"sweep param unknown", "name: x\nsweep:\n  param: tts.speed\n  from: 0s\n  to: 1s\n",
			`t.yaml:3: sweep.param: unknown parameter "tts.speed" (want one of timeout, user.N.at, ...`},
		{"sweep param out of range", "name: x\nsweep: {param: model.0.ttfb, from: 0s, to: 1s}\n",
			`t.yaml:2: sweep.param: parameter "model.0.ttfb": index 0 is out of range: the scenario has 0 model responses`},
		{"sweep to before from", "name: x\nsweep:\n  param: tts.ttfb\n  from: 2s\n  to: 1s\n",
			"t.yaml:5: sweep.to: 1s is less than from (2s)"},
		{"sweep from zero for positive param", "name: x\nsweep:\n  param: timeout\n  from: 0s\n  to: 1s\n",
			"t.yaml:4: sweep.from: timeout must be > 0"},
		{"sweep bad from", "name: x\nsweep: {param: timeout, from: soon, to: 1s}\n", `t.yaml:2: sweep.from: "soon" is not a duration...`},
		{"quoted false", "name: x\nexpect: {every_call_answered: \"false\"}\n",
			`t.yaml:2: expect.every_call_answered: "false" is not a boolean (want true or false)`},
		{"sweep missing to", "name: x\nsweep:\n  param: timeout\n  from: 1s\n", "t.yaml:3: sweep.to: required key is missing"},
		{"alias", "name: x\ntts: {ttfb: &d 1s}\nstt: {latency: *d}\n",
			"t.yaml:3: stt.latency: want a duration (e.g. 400ms or 1.5s), got an alias (aliases are not supported)"},
		{"syntax error", "name: x\ntimeout: 1s\n bad: indent\n", "t.yaml:3: YAML syntax error: mapping values are not allowed in this context"},
		{"unclosed flow", "name: x\nuser: [\n", "t.yaml:2: YAML syntax error: did not find expected node content"},
		{"list document", "- name: x\n", "t.yaml:1: document is a list; want a mapping of scenario keys"},
		{"scalar document", "hello\n", "t.yaml:1: document is a scalar; want a mapping of scenario keys"},
		{"empty document", "# nothing\n", "t.yaml: empty document; want a mapping of scenario keys"},
		{"two documents", "name: x\n---\nname: y\n", "t.yaml:2: more than one YAML document; want one scenario per file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want error %s", s, tt.want)
			}
			if s != nil {
				t.Errorf("Parse returned a scenario with an error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) holds no *ParseError", err, err)
			}
			// One mistake must give one message, not a cascade.
			if errs := scnTestErrors(err); len(errs) != 1 {
				t.Errorf("got %d errors, want 1:\n%v", len(errs), err)
			}
			got := err.Error()
			if prefix, ok := strings.CutSuffix(tt.want, "..."); ok {
				if !strings.HasPrefix(got, prefix) {
					t.Errorf("error = %q\nwant prefix %q", got, prefix)
				}
			} else if got != tt.want {
				t.Errorf("error = %q\nwant        %q", got, tt.want)
			}
		})
	}
}

// scnTestErrors unpacks the errors Parse joined.
func scnTestErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestScenarioParseAllErrors checks that every problem is reported, ordered by line,
// whatever order the keys are decoded in.
func TestScenarioParseAllErrors(t *testing.T) {
	const src = `expect:
  tool_runs: {ghost: 1}
timeout: soon
agent:
  tools:
    - {name: a, effect: write}
colour: red
`
	_, err := Parse("m.yaml", []byte(src))
	want := []string{
		"m.yaml:1: name: required key is missing",
		`m.yaml:2: expect.tool_runs.ghost: no tool "ghost" in agent.tools`,
		`m.yaml:3: timeout: "soon" is not a duration (want e.g. 400ms or 1.5s)`,
		`m.yaml:6: agent.tools.0.effect: "write" is not one of read, mutation`,
		"m.yaml:7: colour: unknown key; known keys: name, seed, timeout, speculate, agent, tools, model, tts, stt, vad, line, user, faults, expect, sweep",
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("error =\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
	for _, e := range scnTestErrors(err) {
		if _, ok := e.(*ParseError); !ok {
			t.Errorf("joined error %v is a %T, want *ParseError", e, e)
		}
	}
}

func TestScenarioParseErrorFormat(t *testing.T) {
	for _, tt := range []struct {
		err  ParseError
		want string
	}{
		{ParseError{File: "a.yaml", Line: 3, Key: "user.2.at", Msg: "bad"}, "a.yaml:3: user.2.at: bad"},
		{ParseError{File: "a.yaml", Line: 3, Msg: "bad"}, "a.yaml:3: bad"},
		{ParseError{File: "a.yaml", Msg: "bad"}, "a.yaml: bad"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestScenarioSetGet(t *testing.T) {
	s, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	params := []struct {
		param string
		field *time.Duration
	}{
		{"timeout", &s.Timeout},
		{"user.3.at", &s.User[3].At},
		{"user.1.duration", &s.User[1].Duration},
		{"faults.0.at", &s.Faults[0].At},
		{"model.1.ttfb", &s.Model[1].TTFB},
		{"agent.tools.0.duration", &s.Agent.Tools[0].Duration},
		{"agent.tools.0.timeout", &s.Agent.Tools[0].Timeout},
		{"tts.ttfb", &s.TTS.TTFB},
		{"stt.latency", &s.STT.Latency},
		{"vad.onset", &s.VAD.Onset},
		{"vad.endpointing", &s.VAD.Endpointing},
		{"expect.max_stall", &s.Expect.MaxStall},
	}
	for i, p := range params {
		if got, err := s.Get(p.param); err != nil || got != *p.field {
			t.Errorf("Get(%q) = %v, %v; want %v", p.param, got, err, *p.field)
		}
		d := time.Duration(i+1) * 7 * scnMs
		if err := s.Set(p.param, d); err != nil {
			t.Errorf("Set(%q, %v) = %v", p.param, d, err)
		}
		if *p.field != d {
			t.Errorf("after Set(%q, %v) the field is %v", p.param, d, *p.field)
		}
		if got, err := s.Get(p.param); err != nil || got != d {
			t.Errorf("Get(%q) after Set = %v, %v; want %v", p.param, got, err, d)
		}
	}
	if err := s.Set("user.0.at", 0); err != nil || s.User[0].At != 0 {
		t.Errorf("Set(user.0.at, 0) = %v, At = %v; want zero allowed", err, s.User[0].At)
	}

	for _, tt := range []struct {
		param string
		d     time.Duration
		want  string // in the message
	}{
		{"tts.speed", time.Second, `unknown parameter "tts.speed"`},
		{"user", time.Second, `unknown parameter "user"`},
		{"user.x.at", time.Second, `unknown parameter "user.x.at"`},
		{"user.01.at", time.Second, `unknown parameter "user.01.at"`},
		{"user.4.at", time.Second, `parameter "user.4.at": index 4 is out of range`},
		{"agent.tools.1.timeout", time.Second, `parameter "agent.tools.1.timeout": index 1 is out of range`},
		{"user.2.duration", time.Second, `parameter "user.2.duration": user.2 is not a sound`},
		{"tts.ttfb", -time.Second, `parameter "tts.ttfb": -1s is negative`},
		{"vad.endpointing", 0, `parameter "vad.endpointing": must be > 0`},
	} {
		before := s.Clone()
		err := s.Set(tt.param, tt.d)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Set(%q, %v) = %v, want error containing %q", tt.param, tt.d, err, tt.want)
		}
		if !reflect.DeepEqual(s, before) {
			t.Errorf("failed Set(%q, %v) changed the scenario", tt.param, tt.d)
		}
		if tt.d > 0 {
			if _, err := s.Get(tt.param); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Get(%q) = %v, want error containing %q", tt.param, err, tt.want)
			}
		}
	}
}

func TestScenarioClone(t *testing.T) {
	orig, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("Clone =\n%+v\nwant\n%+v", c, orig)
	}

	// Write through every reference the clone holds.
	c.Agent.Tools[0].Name = "x"
	c.Agent.Tools[0].Result[2] = 'X'
	c.Model[0].Text = "x"
	c.Model[0].ToolCalls[0].Name = "x"
	c.Model[0].ToolCalls[0].Args[2] = 'X'
	c.User[0].Say = "x"
	c.Faults[0].Kind = "x"
	c.Expect.ToolRuns["book_table"] = 9
	c.Expect.ToolRunsMax["x"] = 9
	c.Expect.FinalContextContains[0] = "x"
	c.Expect.Events[0].Kind = "x"
	c.Sweep.Param = "x"
	if err := c.Set("timeout", time.Minute); err != nil {
		t.Fatal(err)
	}
	if want := scnExampleScenario(); !reflect.DeepEqual(orig, want) {
		t.Errorf("changing the clone changed the original:\n%+v\nwant\n%+v", orig, want)
	}

	// Absent parts stay absent.
	min, err := Parse("m.yaml", []byte("name: m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := min.Clone(); c.Sweep != nil || c.Expect.ToolRuns != nil || c.User != nil {
		t.Errorf("Clone of a minimal scenario = %+v, want nil Sweep, ToolRuns and User", c)
	}
}
