package sim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/tools"
)

// Scenario is one parsed scenario file.
type Scenario struct {
	File    string        // path given to Parse/Load (not a YAML key)
	Name    string        // `name`, required, non-empty
	Seed    int64         // `seed`, default 1
	Timeout time.Duration // `timeout`, default 30s, must be > 0
	// Speculate: speculative answers, on by default as in a session
	// (runtime.WithSpeculation); `speculate: false` turns them off.
	Speculate bool            // `speculate`, default true
	Agent     Agent           // `agent`: a mapping, or the name of a Go agent (see Agent.Go); a Go agent's `tools` scripts are in Agent.Tools
	Model     []ModelResponse // `model`
	TTS       TTS             // `tts`
	STT       STT             // `stt`
	VAD       VAD             // `vad`
	Line      Line            // `line`
	User      []UserAction    // `user`
	Faults    []Fault         // `faults`
	Expect    Expect          // `expect`
	Sweep     *Sweep          // `sweep`, nil when absent

	// agentFunc makes the Go agent named by Agent.Go, for runs that run its
	// tool bodies (WithRealTools): each such run gets a fresh agent, as a
	// call does.
	agentFunc runtime.AgentFunc
	// realTools, when set, is synctest.Wait: a Go agent's tools without a
	// script run their Go bodies.
	realTools func()
	// invariantsOnly: the runs check the invariants, not the file's
	// expectations, which were written for other settings (Options.Speculate
	// against the file's own).
	invariantsOnly bool
}

// Agent is the agent under test: written inline in the file, or a Go agent.
//
// With `agent: NAME` the agent is the Go agent given as NAME with
// WithAgents: its instructions and its tools (names, descriptions, JSON
// schemas, effects, interrupt policies, timeouts, dedupe) come from Go, so
// a scenario follows the agent it tests when the agent changes. Only the
// tools' bodies are scripted, in the file's top-level `tools` mapping.
type Agent struct {
	// Go is the name of the Go agent (`agent: NAME`); "" for an agent
	// written inline.
	Go           string
	Instructions string // `instructions`, default "You are a helpful voice agent."; a Go agent's own
	// Tools are the inline agent's `tools`, or every tool of the Go agent,
	// in its order, each with its script from the top-level `tools` (or the
	// script defaults when it has none).
	Tools []Tool
}

// Tool is a tool the agent may call, with the script its body follows.
// For a Go agent's tool, Name, Effect, OnInterrupt, Timeout and Dedupe are
// the Go tool's, and the rest is its script.
type Tool struct {
	Name          string          // `name`, required, ^[a-zA-Z0-9_-]{1,64}$, unique among tools
	Effect        string          // `effect`: "read" | "mutation"; default "mutation"
	OnInterrupt   string          // `on_interrupt`: "complete" | "cancel" | "defer" | "detach" | "" (by effect)
	Duration      time.Duration   // `duration`, default 100ms, >= 0
	Timeout       time.Duration   // `timeout`, default 10s, > 0
	Result        json.RawMessage // `result`: any YAML value as compact JSON; default {"ok":true}
	Error         string          // `error`, default ""
	IgnoresCancel bool            // `ignores_cancel`, default false
	Hang          bool            // `hang`, default false
	Dedupe        bool            // `dedupe`, default true
	Speculative   bool            // `speculative`, default false: a read that may start on a speculative answer (tools.WithSpeculative)

	// def is a Go agent's tool, which the runs give the core instead of a
	// tool built from the fields above: the model sees its description and
	// schema, and the core validates arguments with it.
	def *tools.Tool
	// scripted: the file scripts def's body (a key of the top-level
	// `tools`). A Go tool without a script runs its Go body under
	// WithRealTools; without that, the model may not call it.
	scripted bool
}

// ModelResponse is one scripted model turn, consumed in order.
type ModelResponse struct {
	TTFB      time.Duration // `ttfb`, default 300ms, >= 0
	Text      string        // `text`, default ""
	ToolCalls []ToolCall    // `tool_calls`
}

// ToolCall is a tool call made by a scripted model turn.
type ToolCall struct {
	ID   string          // `id`, default ""
	Name string          // `name`, required; need not be a declared tool
	Args json.RawMessage // `args`: a mapping as compact JSON, keys in written order; default {}
}

// TTS configures the simulated synthesizer.
type TTS struct {
	TTFB           time.Duration // `ttfb`, default 200ms, >= 0
	WordsPerSecond float64       // `words_per_second`, default 2.5, > 0
	// Backup gives the agent a backup voice (Agent.BackupTTS) with the
	// same timings, which faults never hit; `backup`, default false.
	Backup bool
}

// STT configures the simulated recognizer.
type STT struct {
	Latency time.Duration // `latency`, default 150ms, >= 0
}

// VAD configures the simulated voice activity detector.
type VAD struct {
	Onset       time.Duration // `onset`, default 100ms, >= 0
	Endpointing time.Duration // `endpointing`, default 500ms, > 0
	// EndpointingMin and EndpointingMax, given together, let the caller's
	// words choose the silence (runtime.WithEndpointingRange): min after a
	// complete request, max after words that leave it open; 0: not set.
	EndpointingMin time.Duration // `endpointing_min`, > 0, <= endpointing_max
	EndpointingMax time.Duration // `endpointing_max`
}

// Line is the line between the caller and the agent, as the caller-audio
// stage hears it.
type Line struct {
	// Echo is the agent's own voice coming back; nil (absent): a clean line.
	Echo *Echo // `echo`
	// EchoFree says the caller's device removes the agent's voice (a
	// browser, a headset): engine.InputConfig.EchoFree. Default false, as
	// for a phone line.
	EchoFree bool // `echo_free`
}

// Echo is the agent's voice returned by the line.
type Echo struct {
	Delay  time.Duration // `delay`, default 120ms, >= 0
	GainDB float64       // `gain_db`, default -6, from -60 to 20
	// Learn is how much of the agent's audio the echo canceller hears
	// before it removes the echo; `learn`, default 1s, >= 0.
	Learn time.Duration
}

// UserAction is one thing the simulated caller does. Exactly one of Say,
// Inject, Backchannel and Noise is set.
type UserAction struct {
	At          time.Duration // `at`, required, >= 0
	Say         string        // `say`
	Inject      string        // `inject`
	Backchannel string        // `backchannel`
	// Noise is a sound that is not speech (a cough, a door): the detector
	// scores it, the recogniser hears no words. Its value names it.
	Noise    string        // `noise`
	Duration time.Duration // `duration`, default 0 (from the words; 300ms for a noise); not for inject
	// LevelDB is the sound's level relative to the agent's voice as the
	// line carries both, in dB; `level_db`, default 0, from -30 to 20, not
	// for inject. A caller quieter than the agent can be taken for its
	// echo where the echo canceller's level rule applies.
	LevelDB float64
}

// Spoken reports whether the action is speech: say or backchannel.
func (u UserAction) Spoken() bool { return u.Say != "" || u.Backchannel != "" }

// Fault is an injected failure.
type Fault struct {
	At   time.Duration // `at`, required, >= 0
	Kind string        // `kind`, required: "llm_error" | "tts_error" | "transport_drop"
	// Duration makes a tts_error an outage: every synthesis on the agent's
	// voice in flight at At or started before At+Duration fails. Default 0:
	// one failure, of the synthesis in flight at At or else the next one.
	Duration time.Duration // `duration`, tts_error only, >= 0
}

// Expect holds what the run must satisfy.
type Expect struct {
	MaxStall              time.Duration  // `max_stall`, default 100ms, > 0
	ToolRuns              map[string]int // `tool_runs`, values >= 0
	ToolRunsMax           map[string]int // `tool_runs_max`, values >= 0
	EveryCallAnswered     bool           // `every_call_answered`, always true
	ContextMatchesPlayout bool           // `context_matches_playout`, always true
	FinalContextContains  []string       // `final_context_contains`
	Events                []EventExpect  // `events`
}

// EventExpect expects events of one kind.
type EventExpect struct {
	Kind   string        // `kind`, required, one of events.Kinds
	Within time.Duration // `within`, default 0 meaning no limit, >= 0
	After  string        // `after`: "" (session start), "start", "user.N" or "fault.N"
	Tool   string        // `tool`, optional filter
	State  string        // `state`, optional filter, a state events of Kind carry
	Reason string        // `reason`, optional filter; checked where Kind's reasons are a closed set
	Count  int           // `count`: exact number of matches; default -1 meaning at least one
	Line   int           // line of this entry in the file (not a YAML key)
}

// Sweep runs the scenario once per value of a duration parameter.
type Sweep struct {
	Param string        // `param`, required; a parameter path (see Scenario.Set)
	From  time.Duration // `from`, required, >= 0
	To    time.Duration // `to`, required, >= From
}

// ParseError is a problem at one place in a scenario file.
type ParseError struct {
	File string
	Line int    // 1-based; 0 when the YAML library gave none
	Key  string // dotted key path with 0-based list indexes, e.g. user.2.at; may be empty
	Msg  string
	// Err is the sentinel the problem is an instance of, for callers to
	// branch on (ErrUnknownName); nil for the others.
	Err error
}

// Unwrap returns Err.
func (e *ParseError) Unwrap() error { return e.Err }

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// A ParseOption changes how Parse and Load read a scenario.
type ParseOption func(*scnParser)

// WithAgents gives the Go agents that scenarios may name with `agent:
// NAME`. Parse calls the named agent's AgentFunc once, with a background
// context, to read its instructions and tools, then releases it; so a file
// whose scripts do not fit the agent (a script for a tool it lacks, a call
// to a tool without a script, an effect restated) is refused with the line,
// before anything runs.
func WithAgents(agents map[string]runtime.AgentFunc) ParseOption {
	return func(p *scnParser) { p.agents = agents }
}

// WithRealTools makes the Go agent's tools that the scenario does not
// script run their own Go bodies, on a fresh agent from its AgentFunc for
// every run, instead of being refused when the model calls them. The
// bodies run on goroutines, so their time must be the run's virtual time:
// runs of such a scenario must happen inside a testing/synctest bubble
// (synctest.Test; simtest.RealTools arranges it), where the run keeps the
// bubble's fake clock in step with its own; outside one they fail, saying
// so. wait is the bubble's synctest.Wait, which the run calls to let every
// body go as far as it can at each instant (sim leaves the testing
// packages to tests). Scripted tools keep their scripts, so a test can run
// the menu lookup for real and still script the payment.
func WithRealTools(wait func()) ParseOption {
	return func(p *scnParser) { p.realTools = wait }
}

// Load reads and parses the file at path.
func Load(path string, opts ...ParseOption) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts...)
}

// scnSyntaxLine extracts the line from a yaml.v3 error message, which is the
// only place the library reports it.
var scnSyntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// Parse parses one scenario; file is used in messages only. On failure it
// returns every problem found, each a *ParseError, joined with errors.Join
// and ordered by line, so that a file can be fixed in one go.
func Parse(file string, data []byte, opts ...ParseOption) (*Scenario, error) {
	p := &scnParser{file: file}
	for _, o := range opts {
		o(p)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case err == io.EOF:
		p.errf(0, "", "empty document; want a mapping of scenario keys")
		return nil, p.result()
	case err != nil:
		p.syntax(err)
		return nil, p.result()
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		p.errf(next.Line, "", "more than one YAML document; want one scenario per file")
	case err != io.EOF:
		p.syntax(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		p.errf(root.Line, "", "empty document; want a mapping of scenario keys")
		return nil, p.result()
	}
	if root.Kind != yaml.MappingNode {
		p.errf(root.Line, "", "document is %s; want a mapping of scenario keys", scnKind(root))
		return nil, p.result()
	}
	s := p.scenario(root)
	s.File = file
	if err := p.result(); err != nil {
		return nil, err
	}
	return s, nil
}

// scnParser collects errors while walking the document, so that decoding
// goes on past the first problem.
type scnParser struct {
	file string
	errs []*ParseError

	agents    map[string]runtime.AgentFunc // WithAgents
	realTools func()                       // WithRealTools
	// unscripted lists the Go agent's tools without a script, which the
	// model may call only under WithRealTools.
	unscripted map[string]bool
}

func (p *scnParser) errf(line int, key, format string, args ...any) {
	p.errs = append(p.errs, &ParseError{File: p.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// unknownf reports a name the format does not know.
func (p *scnParser) unknownf(line int, key, format string, args ...any) {
	p.errs = append(p.errs, &ParseError{File: p.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...), Err: ErrUnknownName})
}

func (p *scnParser) syntax(err error) {
	line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
	if m := scnSyntaxLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	p.errf(line, "", "YAML syntax error: %s", msg)
}

func (p *scnParser) result() error {
	if len(p.errs) == 0 {
		return nil
	}
	// Stable, so that problems on one line keep the order they were found in.
	slices.SortStableFunc(p.errs, func(a, b *ParseError) int { return cmp.Compare(a.Line, b.Line) })
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// The decoders below take the scenario apart mapping by mapping. Each lists
// its keys in struct order (that order is also the one error messages show)
// and fills in defaults for keys that are absent; a key that is present keeps
// its value even when that value equals the zero of its type.
//
// Cross references (tool names in expect, user.N in after, the sweep
// parameter) are checked where they are decoded, so agent, user and faults
// are decoded before expect and sweep whatever their order in the file.

func (p *scnParser) scenario(n *yaml.Node) *Scenario {
	m := p.mapping(n, "", scnTopShape)
	s := &Scenario{
		Name:      m.str("name", ""),
		Seed:      m.integer("seed", 1, math.MinInt64),
		Timeout:   m.dur("timeout", 30*time.Second, true),
		Speculate: m.boolean("speculate", true),
	}
	if m.has("name") && s.Name == "" {
		p.errf(m.vals["name"].Line, "name", "must not be empty")
	}
	if v, key := m.get("agent"); v != nil && v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null" {
		s.Agent, s.agentFunc = p.goAgent(v, key)
		s.realTools = p.realTools
	} else {
		s.Agent = p.agent(m.sub("agent", scnAgentShape))
	}
	if v, key := m.get("tools"); v != nil {
		if s.Agent.Go == "" {
			p.errf(v.Line, key, "scripts the tools of a Go agent (agent: NAME); an inline agent declares its tools under agent.tools")
		} else {
			p.scripts(v, key, &s.Agent)
		}
	}
	for i, item := range m.seq("model") {
		s.Model = append(s.Model, p.modelResponse(item, scnIndex("model", i)))
	}
	tts := m.sub("tts", scnTTSShape)
	s.TTS = TTS{TTFB: tts.dur("ttfb", 200*time.Millisecond, false), WordsPerSecond: tts.wordsPerSecond("words_per_second"),
		Backup: tts.boolean("backup", false)}
	stt := m.sub("stt", scnSTTShape)
	s.STT = STT{Latency: stt.dur("latency", 150*time.Millisecond, false)}
	vad := m.sub("vad", scnVADShape)
	s.VAD = VAD{Onset: vad.dur("onset", 100*time.Millisecond, false), Endpointing: vad.dur("endpointing", 500*time.Millisecond, true),
		EndpointingMin: vad.dur("endpointing_min", 0, true), EndpointingMax: vad.dur("endpointing_max", 0, true)}
	if lo, hi := s.VAD.EndpointingMin, s.VAD.EndpointingMax; (lo > 0) != (hi > 0) || hi < lo {
		v, key := vad.get("endpointing_min")
		if v == nil {
			v, key = vad.get("endpointing_max")
		}
		p.errf(v.Line, key, "endpointing_min and endpointing_max go together, min <= max (got %v and %v)", lo, hi)
	}
	line := m.sub("line", scnLineShape)
	s.Line = Line{EchoFree: line.boolean("echo_free", false)}
	if echo := line.sub("echo", scnEchoShape); echo.present {
		s.Line.Echo = &Echo{Delay: echo.dur("delay", 120*time.Millisecond, false), GainDB: echo.number("gain_db", -6, -60, 20),
			Learn: echo.dur("learn", time.Second, false)}
	}
	for i, item := range m.seq("user") {
		s.User = append(s.User, p.userAction(item, scnIndex("user", i)))
	}
	for i, item := range m.seq("faults") {
		f := p.mapping(item, scnIndex("faults", i), scnFaultShape)
		fault := Fault{At: f.dur("at", 0, false), Kind: f.oneOf("kind", "", scnFaultKinds),
			Duration: f.dur("duration", 0, false)}
		if v, key := f.get("duration"); v != nil && fault.Kind != "tts_error" && fault.Kind != "" {
			p.errf(v.Line, key, "only allowed with kind tts_error: a voice can be down for a while, the other faults happen once")
		}
		s.Faults = append(s.Faults, fault)
	}
	s.Expect = p.expect(m.sub("expect", scnExpectShape), s)
	if sw := m.sub("sweep", scnSweepShape); sw.present {
		s.Sweep = p.sweep(sw, s)
	}
	return s
}

// scnToolName is the name rule that model APIs impose on function names.
var scnToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func (p *scnParser) agent(m *scnMap) Agent {
	a := Agent{Instructions: m.str("instructions", "You are a helpful voice agent.")}
	first := map[string]int{} // tool name -> line of its first declaration
	for i, item := range m.seq("tools") {
		t := p.mapping(item, scnIndex("agent.tools", i), scnToolShape)
		tool := Tool{
			Name:          t.str("name", ""),
			Effect:        t.oneOf("effect", string(tools.Mutation), scnEffects),
			OnInterrupt:   t.oneOf("on_interrupt", "", scnToolPolicies),
			Duration:      t.dur("duration", 100*time.Millisecond, false),
			Timeout:       t.dur("timeout", 10*time.Second, true),
			Result:        json.RawMessage(`{"ok":true}`),
			Error:         t.str("error", ""),
			IgnoresCancel: t.boolean("ignores_cancel", false),
			Hang:          t.boolean("hang", false),
			Dedupe:        t.boolean("dedupe", true),
			Speculative:   t.boolean("speculative", false),
		}
		if v, key := t.get("result"); v != nil {
			tool.Result = p.toJSON(v, key)
		}
		if v, key := t.get("name"); t.has("name") {
			switch line, dup := first[tool.Name]; {
			case !scnToolName.MatchString(tool.Name):
				p.errf(v.Line, key, "%q is not a valid tool name (want 1 to 64 of a-z, A-Z, 0-9, _ and -)", tool.Name)
			case dup:
				p.errf(v.Line, key, "duplicate tool name %q (first declared at line %d)", tool.Name, line)
			default:
				first[tool.Name] = v.Line
			}
		}
		a.Tools = append(a.Tools, tool)
	}
	return a
}

// goAgent makes the Go agent named by v, reads its instructions and tools,
// and releases it.
func (p *scnParser) goAgent(v *yaml.Node, key string) (Agent, runtime.AgentFunc) {
	a := Agent{Go: v.Value}
	fn := p.agents[a.Go]
	if fn == nil {
		if len(p.agents) == 0 {
			p.errf(v.Line, key, "names the Go agent %q, but none were given: Go agents reach the simulator from Go "+
				"(sim.WithAgents, simtest.Run); a file for holdline simulate writes its agent inline", a.Go)
		} else {
			p.errf(v.Line, key, "no Go agent %q (given: %s)", a.Go, strings.Join(slices.Sorted(maps.Keys(p.agents)), ", "))
		}
		return a, nil
	}
	agent, release, err := fn(context.Background())
	if release != nil {
		defer release()
	}
	switch {
	case err != nil:
		p.errf(v.Line, key, "Go agent %q: %v", a.Go, err)
		return a, nil
	case agent == nil:
		p.errf(v.Line, key, "Go agent %q: its AgentFunc returned no agent", a.Go)
		return a, nil
	}
	a.Instructions = agent.Instructions
	p.unscripted = map[string]bool{}
	for i, def := range agent.Tools {
		if def == nil {
			p.errf(v.Line, key, "Go agent %q: tool %d is nil", a.Go, i)
			continue
		}
		if p.unscripted[def.Name()] {
			p.errf(v.Line, key, "Go agent %q: two tools are named %q", a.Go, def.Name())
			continue
		}
		p.unscripted[def.Name()] = true
		a.Tools = append(a.Tools, Tool{
			Name:        def.Name(),
			Effect:      string(def.Effect()),
			OnInterrupt: string(def.Policy()),
			Duration:    100 * time.Millisecond,
			Timeout:     def.Timeout(),
			Result:      json.RawMessage(`{"ok":true}`),
			Dedupe:      def.Dedupe(),
			def:         def,
		})
	}
	return a, fn
}

// scripts decodes the top-level tools: a mapping of the Go agent's tool
// names to the scripts of their bodies.
func (p *scnParser) scripts(n *yaml.Node, path string, a *Agent) {
	if n.Kind != yaml.MappingNode {
		p.errf(n.Line, path, "want a mapping of the Go agent's tool names to scripts, got %s", scnKind(n))
		return
	}
	first := map[string]int{} // tool name -> line of its script
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errf(k.Line, path, "keys must be tool names, got %s", scnKind(k))
			continue
		}
		key := scnJoin(path, k.Value)
		if line, dup := first[k.Value]; dup {
			p.errf(k.Line, key, "duplicate script (first at line %d)", line)
			continue
		}
		first[k.Value] = k.Line
		i := slices.IndexFunc(a.Tools, func(t Tool) bool { return t.Name == k.Value })
		// Without the agent (already reported) there is nothing to check
		// the names against.
		if i < 0 && p.unscripted != nil {
			have := "it has none"
			if len(a.Tools) > 0 {
				names := make([]string, len(a.Tools))
				for j, t := range a.Tools {
					names[j] = t.Name
				}
				have = "its tools: " + strings.Join(names, ", ")
			}
			p.errf(k.Line, key, "the Go agent %q has no tool %q (%s)", a.Go, k.Value, have)
		}
		// An empty script (`menu:` or `menu: {}`) takes every default.
		if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
			v = &yaml.Node{Kind: yaml.MappingNode, Line: v.Line}
		}
		m := p.mapping(v, key, scnScriptShape)
		// What the tool is comes from Go; a copy here could only drift.
		for _, g := range scnFromGoOptions {
			if gv, gkey := m.get(g.key); gv != nil {
				p.errf(gv.Line, gkey, "comes from the Go tool (%s), not the script: remove it", g.option)
			}
		}
		if i < 0 {
			continue
		}
		t := &a.Tools[i]
		t.Duration = m.dur("duration", t.Duration, false)
		t.Error = m.str("error", "")
		t.IgnoresCancel = m.boolean("ignores_cancel", false)
		t.Hang = m.boolean("hang", false)
		if rv, rkey := m.get("result"); rv != nil {
			t.Result = p.toJSON(rv, rkey)
		}
		t.scripted = true
		delete(p.unscripted, t.Name)
	}
}

func (p *scnParser) modelResponse(n *yaml.Node, path string) ModelResponse {
	m := p.mapping(n, path, scnModelShape)
	r := ModelResponse{TTFB: m.dur("ttfb", 300*time.Millisecond, false), Text: m.str("text", "")}
	for i, item := range m.seq("tool_calls") {
		c := p.mapping(item, scnIndex(m.key("tool_calls"), i), scnToolCallShape)
		call := ToolCall{ID: c.str("id", ""), Name: c.str("name", ""), Args: json.RawMessage(`{}`)}
		if v, key := c.get("name"); c.has("name") && call.Name == "" {
			p.errf(v.Line, key, "must not be empty")
		} else if p.unscripted[call.Name] && p.realTools == nil {
			p.errf(v.Line, key, "the model calls the Go tool %q, which has no script: give it one in the top-level tools "+
				"(e.g. tools: {%s: {result: {ok: true}}}), or run its Go body (WithRealTools, simtest.RealTools)", call.Name, call.Name)
		}
		if v, key := c.get("args"); v != nil {
			if v.Kind != yaml.MappingNode {
				p.errf(v.Line, key, "want a mapping of arguments, got %s", scnKind(v))
			} else {
				call.Args = p.toJSON(v, key)
			}
		}
		r.ToolCalls = append(r.ToolCalls, call)
	}
	return r
}

func (p *scnParser) userAction(n *yaml.Node, path string) UserAction {
	m := p.mapping(n, path, scnUserShape)
	u := UserAction{
		At:          m.dur("at", 0, false),
		Say:         m.str("say", ""),
		Inject:      m.str("inject", ""),
		Backchannel: m.str("backchannel", ""),
		Noise:       m.str("noise", ""),
		Duration:    m.dur("duration", 0, false),
		LevelDB:     m.number("level_db", 0, -30, 20),
	}
	var set []string // which of the four are present, in struct order
	for _, f := range []struct{ key, text string }{{"say", u.Say}, {"inject", u.Inject}, {"backchannel", u.Backchannel}, {"noise", u.Noise}} {
		v, key := m.get(f.key)
		switch {
		case v == nil:
			continue
		case len(set) > 0:
			p.errf(v.Line, key, "%s is also set; want exactly one of say, inject, backchannel, noise", set[0])
		case v.Kind == yaml.ScalarNode && f.text == "":
			p.errf(v.Line, key, "must not be empty")
		}
		set = append(set, f.key)
	}
	if len(set) == 0 && m.ok {
		p.errf(n.Line, path, "want exactly one of say, inject, backchannel, noise")
	}
	for _, k := range []string{"duration", "level_db"} {
		if v, key := m.get(k); v != nil && u.Inject != "" {
			p.errf(v.Line, key, "only allowed with say, backchannel or noise: an inject is text, not sound")
		}
	}
	return u
}

func (p *scnParser) expect(m *scnMap, s *Scenario) Expect {
	e := Expect{
		MaxStall:              m.dur("max_stall", 100*time.Millisecond, true),
		ToolRuns:              p.toolCounts(m, "tool_runs", s.Agent),
		ToolRunsMax:           p.toolCounts(m, "tool_runs_max", s.Agent),
		EveryCallAnswered:     m.boolean("every_call_answered", true),
		ContextMatchesPlayout: m.boolean("context_matches_playout", true),
	}
	for _, k := range []string{"every_call_answered", "context_matches_playout"} {
		if v, key := m.get(k); v != nil && v.ShortTag() == "!!bool" && v.Value == "false" {
			p.errf(v.Line, key, "always checked; it cannot be turned off")
		}
	}
	for i, item := range m.seq("final_context_contains") {
		key := scnIndex(m.key("final_context_contains"), i)
		if str, ok := p.str(item, key); ok && str == "" {
			p.errf(item.Line, key, "must not be empty")
		} else if ok {
			e.FinalContextContains = append(e.FinalContextContains, str)
		}
	}
	toolNames := p.toolsNamed(s)
	for i, item := range m.seq("events") {
		ev := p.mapping(item, scnIndex(m.key("events"), i), scnEventShape)
		x := EventExpect{
			Kind:   ev.str("kind", ""),
			Within: ev.dur("within", 0, false),
			After:  ev.str("after", ""),
			Tool:   ev.str("tool", ""),
			State:  ev.str("state", ""),
			Reason: ev.str("reason", ""),
			Count:  int(ev.integer("count", -1, 0)),
			Line:   item.Line,
		}
		if v, key := ev.get("kind"); ev.has("kind") && x.Kind == "" {
			p.errf(v.Line, key, "must not be empty")
		} else if k, msg := scnCheckEvent(x); msg != "" && ev.has(k) {
			v, key := ev.get(k)
			p.unknownf(v.Line, key, "%s", msg)
		}
		if v, key := ev.get("tool"); v != nil && x.Tool != "" && toolNames != nil && !slices.Contains(toolNames, x.Tool) {
			p.unknownf(v.Line, key, "no tool %q is declared or called by the model%s", x.Tool, scnSuggest(x.Tool, toolNames))
		}
		if v, key := ev.get("after"); v != nil {
			if msg := scnCheckAfter(x.After, s); msg != "" {
				p.errf(v.Line, key, "%s", msg)
			}
		}
		e.Events = append(e.Events, x)
	}
	return e
}

// toolsNamed lists the tools an event can name: the agent's, and those
// the model calls, which need not be the agent's. It is nil when a Go agent
// could not be read (already reported), leaving nothing to check against.
func (p *scnParser) toolsNamed(s *Scenario) []string {
	if s.Agent.Go != "" && p.unscripted == nil {
		return nil
	}
	names := []string{}
	for _, t := range s.Agent.Tools {
		names = append(names, t.Name)
	}
	for _, r := range s.Model {
		for _, c := range r.ToolCalls {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	return names
}

// scnCheckAfter says what is wrong with an event's after reference, or ""
// when it is fine.
func scnCheckAfter(after string, s *Scenario) string {
	if after == "" || after == "start" {
		return ""
	}
	list, idx, _ := strings.Cut(after, ".")
	i, ok := scnParseIndex(idx)
	var n int
	var what string
	switch list {
	case "user":
		n, what = len(s.User), "user action"
	case "fault":
		n, what = len(s.Faults), "fault"
	default:
		ok = false
	}
	switch {
	case !ok:
		return fmt.Sprintf("%q is not one of start, user.N, fault.N", after)
	case i >= n:
		return fmt.Sprintf("%q is out of range: the file has %s", after, scnCount(n, what))
	}
	return ""
}

// toolCounts decodes a mapping of declared tool names to run counts.
func (p *scnParser) toolCounts(m *scnMap, k string, a Agent) map[string]int {
	v, path := m.get(k)
	if v == nil {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		p.errf(v.Line, path, "want a mapping of tool names to counts, got %s", scnKind(v))
		return nil
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		kn, vn := v.Content[i], v.Content[i+1]
		if kn.Kind != yaml.ScalarNode {
			p.errf(kn.Line, path, "keys must be tool names, got %s", scnKind(kn))
			continue
		}
		key := path + "." + kn.Value
		if seen[kn.Value] {
			p.errf(kn.Line, key, "duplicate key")
			continue
		}
		seen[kn.Value] = true
		switch {
		case slices.ContainsFunc(a.Tools, func(t Tool) bool { return t.Name == kn.Value }):
		case a.Go != "":
			p.errf(kn.Line, key, "the Go agent %q has no tool %q", a.Go, kn.Value)
		default:
			p.errf(kn.Line, key, "no tool %q in agent.tools", kn.Value)
		}
		if c, ok := p.integer(vn, key, 0); ok {
			counts[kn.Value] = int(c)
		}
	}
	return counts
}

func (p *scnParser) sweep(m *scnMap, s *Scenario) *Sweep {
	sw := &Sweep{Param: m.str("param", "")}
	// The range checks below need to know that from and to are valid, not
	// merely present, lest one mistake be reported twice.
	var fromOK, toOK bool
	fromV, fromKey := m.get("from")
	if m.has("from") {
		sw.From, fromOK = p.dur(fromV, fromKey, false)
	}
	if v, key := m.get("to"); m.has("to") {
		if sw.To, toOK = p.dur(v, key, false); fromOK && toOK && sw.To < sw.From {
			p.errf(v.Line, key, "%v is less than from (%v)", sw.To, sw.From)
		}
	}
	if v, key := m.get("param"); m.has("param") {
		// Checked against this file, so that user.9.at fails here rather than
		// in the middle of a sweep.
		if _, positive, err := s.scnParam(sw.Param); err != nil {
			p.errf(v.Line, key, "%v", err)
		} else if positive && fromOK && sw.From == 0 {
			p.errf(fromV.Line, fromKey, "%s must be > 0", sw.Param)
		}
	}
	return sw
}

// scnMap is one YAML mapping whose keys have been checked against the keys
// it may have.
type scnMap struct {
	p       *scnParser
	node    *yaml.Node
	path    string
	vals    map[string]*yaml.Node
	present bool // the key naming this mapping was in the file
	ok      bool // the node was a mapping; when not, required keys go unreported
}

// mapping checks n against the keys of shape. It reports a node that is not
// a mapping, unknown keys, duplicate keys and missing required keys; the
// returned scnMap is usable in every case, yielding defaults for whatever it
// lacks.
func (p *scnParser) mapping(n *yaml.Node, path string, shape scnShape) *scnMap {
	known := shape.keys()
	m := &scnMap{p: p, node: n, path: path, vals: map[string]*yaml.Node{}, present: n != nil}
	if n == nil {
		return m
	}
	if n.Kind != yaml.MappingNode {
		p.errf(n.Line, path, "want a mapping, got %s", scnKind(n))
		return m
	}
	m.ok = true
	first := map[string]int{} // key -> its line, for duplicates
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errf(k.Line, path, "keys must be strings, got %s", scnKind(k))
			continue
		}
		key := scnJoin(path, k.Value)
		switch line, dup := first[k.Value]; {
		case !slices.Contains(known, k.Value):
			if near := scnNearest(k.Value, known); near != "" {
				p.unknownf(k.Line, key, "unknown key; did you mean %q? (known keys: %s)", near, strings.Join(known, ", "))
			} else {
				p.unknownf(k.Line, key, "unknown key; known keys: %s", strings.Join(known, ", "))
			}
		case dup:
			p.errf(k.Line, key, "duplicate key (first at line %d)", line)
		default:
			m.vals[k.Value], first[k.Value] = v, k.Line
		}
	}
	for _, k := range shape.required() {
		if _, ok := m.vals[k]; !ok {
			p.errf(n.Line, m.key(k), "required key is missing")
		}
	}
	return m
}

// get returns the value of key k, nil when absent, and its key path.
func (m *scnMap) get(k string) (*yaml.Node, string) { return m.vals[k], m.key(k) }

func (m *scnMap) key(k string) string { return scnJoin(m.path, k) }

// has says whether k is present. (A required key that is missing was
// reported by mapping.)
func (m *scnMap) has(k string) bool {
	_, ok := m.vals[k]
	return ok
}

// sub returns the nested mapping at k, of the given shape; absent, it is
// empty.
func (m *scnMap) sub(k string, shape scnShape) *scnMap {
	v, key := m.get(k)
	return m.p.mapping(v, key, shape)
}

// seq returns the items of the sequence at k; absent, there are none.
func (m *scnMap) seq(k string) []*yaml.Node {
	v, key := m.get(k)
	if v == nil {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		m.p.errf(v.Line, key, "want a list, got %s", scnKind(v))
		return nil
	}
	return v.Content
}

func (m *scnMap) str(k, def string) string {
	if v, key := m.get(k); v != nil {
		s, _ := m.p.str(v, key)
		return s
	}
	return def
}

// oneOf decodes a string that must be one of allowed. An allowed "" is left
// out of the message: it reads as a stray comma.
func (m *scnMap) oneOf(k, def string, allowed []string) string {
	v, key := m.get(k)
	if v == nil {
		return def
	}
	s, ok := m.p.str(v, key)
	if ok && !slices.Contains(allowed, s) {
		shown := slices.DeleteFunc(slices.Clone(allowed), func(a string) bool { return a == "" })
		m.p.unknownf(v.Line, key, "%q is not one of %s%s", s, strings.Join(shown, ", "), scnSuggest(s, shown))
	}
	return s
}

func (m *scnMap) dur(k string, def time.Duration, positive bool) time.Duration {
	if v, key := m.get(k); v != nil {
		d, _ := m.p.dur(v, key, positive)
		return d
	}
	return def
}

func (m *scnMap) boolean(k string, def bool) bool {
	v, key := m.get(k)
	if v == nil {
		return def
	}
	// Only true and false: YAML 1.1's yes, no, on and off are too easy to
	// write by accident, and quoted "true" is a string.
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || (v.Value != "true" && v.Value != "false") {
		m.p.errf(v.Line, key, "%s is not a boolean (want true or false)", scnDescribe(v))
		return def
	}
	return v.Value == "true"
}

func (m *scnMap) integer(k string, def, min int64) int64 {
	if v, key := m.get(k); v != nil {
		n, _ := m.p.integer(v, key, min)
		return n
	}
	return def
}

func (m *scnMap) wordsPerSecond(k string) float64 {
	v, key := m.get(k)
	if v == nil {
		return 2.5
	}
	var f float64
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!int" && v.ShortTag() != "!!float") || v.Decode(&f) != nil {
		m.p.errf(v.Line, key, "%s is not a number", scnDescribe(v))
	} else if !(f > 0) || math.IsInf(f, 0) {
		m.p.errf(v.Line, key, "%s must be a finite number > 0", v.Value)
	}
	return f
}

// number decodes a number from lo to hi.
func (m *scnMap) number(k string, def, lo, hi float64) float64 {
	v, key := m.get(k)
	if v == nil {
		return def
	}
	var f float64
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!int" && v.ShortTag() != "!!float") || v.Decode(&f) != nil {
		m.p.errf(v.Line, key, "%s is not a number", scnDescribe(v))
		return def
	}
	if !(f >= lo && f <= hi) {
		m.p.errf(v.Line, key, "%s is out of range (want %v to %v)", v.Value, lo, hi)
	}
	return f
}

// str decodes a string. Any scalar will do (a number is its text), and null
// is the empty string; mappings and lists are errors.
func (p *scnParser) str(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		p.errf(n.Line, key, "want a string, got %s", scnKind(n))
		return "", false
	}
	if n.ShortTag() == "!!null" {
		return "", true
	}
	return n.Value, true
}

// dur decodes a non-negative duration, positive when asked to be.
// time.ParseDuration also takes a bare 0, and nothing else without a unit.
func (p *scnParser) dur(n *yaml.Node, key string, positive bool) (time.Duration, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.errf(n.Line, key, "want a duration (e.g. 400ms or 1.5s), got %s", scnKind(n))
		return 0, false
	}
	d, err := time.ParseDuration(n.Value)
	switch {
	case err != nil:
		p.errf(n.Line, key, "%q is not a duration (want e.g. 400ms or 1.5s)", n.Value)
	case d < 0:
		p.errf(n.Line, key, "%q is negative (want a duration >= 0)", n.Value)
	case d == 0 && positive:
		p.errf(n.Line, key, "%q must be > 0", n.Value)
	default:
		return d, true
	}
	return 0, false
}

// integer decodes an integer >= min. Quoted numbers are strings, not integers.
func (p *scnParser) integer(n *yaml.Node, key string, min int64) (int64, bool) {
	var i int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
		p.errf(n.Line, key, "%s is not an integer", scnDescribe(n))
		return 0, false
	}
	if i < min {
		p.errf(n.Line, key, "%d must be >= %d", i, min)
		return 0, false
	}
	return i, true
}

// toJSON converts any YAML value to compact JSON, keeping mapping keys in the
// order written: the tool result or arguments are shown to a model exactly
// as the author wrote them. On error it returns nil.
func (p *scnParser) toJSON(n *yaml.Node, key string) json.RawMessage {
	var b bytes.Buffer
	if !p.yamlToJSON(&b, n, key) {
		return nil
	}
	return b.Bytes()
}

func (p *scnParser) yamlToJSON(b *bytes.Buffer, n *yaml.Node, key string) bool {
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				p.errf(k.Line, key, "keys must be strings, got %s", scnKind(k))
				return false
			}
			if seen[k.Value] {
				p.errf(k.Line, scnJoin(key, k.Value), "duplicate key")
				return false
			}
			seen[k.Value] = true
			if i > 0 {
				b.WriteByte(',')
			}
			name, _ := json.Marshal(k.Value)
			b.Write(name)
			b.WriteByte(':')
			if !p.yamlToJSON(b, v, scnJoin(key, k.Value)) {
				return false
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if !p.yamlToJSON(b, v, scnIndex(key, i)) {
				return false
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any = n.Value // timestamps, binary and the like stay as written
		switch n.ShortTag() {
		case "!!null":
			v = nil
		case "!!bool", "!!int", "!!float":
			if err := n.Decode(&v); err != nil {
				v = n.Value
			}
		}
		j, err := json.Marshal(v)
		if err != nil { // .inf and .nan
			p.errf(n.Line, key, "%s cannot be written as JSON", n.Value)
			return false
		}
		b.Write(j)
	default:
		p.errf(n.Line, key, "%s cannot be written as JSON", scnKind(n))
		return false
	}
	return true
}

// scnKind names the kind of a node for messages. Aliases are rejected
// everywhere: they would make a file harder to read than to write, and
// following them invites alias bombs.
func scnKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (aliases are not supported)"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return "a scalar"
	}
	return "an empty document"
}

// scnDescribe shows a scalar's text, or a node's kind.
func scnDescribe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return strconv.Quote(n.Value)
	}
	return scnKind(n)
}

func scnJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func scnIndex(path string, i int) string { return path + "." + strconv.Itoa(i) }

// scnCount writes n things, in the plural unless there is one.
func scnCount(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// scnParseIndex parses a 0-based index written without sign or leading
// zeros, so that each entry has exactly one name.
func scnParseIndex(s string) (int, bool) {
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == s
}

// scnParams lists the parameter paths, for messages.
const scnParams = "timeout, user.N.at, user.N.duration, faults.N.at, faults.N.duration, model.N.ttfb, " +
	"agent.tools.N.duration, agent.tools.N.timeout, tools.NAME.duration, tts.ttfb, stt.latency, line.echo.delay, line.echo.learn, " +
	"vad.onset, vad.endpointing, vad.endpointing_min, vad.endpointing_max, expect.max_stall"

// scnParam resolves a parameter path to the field it names, and says
// whether the field must be > 0 rather than >= 0.
func (s *Scenario) scnParam(param string) (*time.Duration, bool, error) {
	// A Go tool's script, by the tool's name (which has no dots).
	if rest, ok := strings.CutPrefix(param, "tools."); ok {
		name, field, _ := strings.Cut(rest, ".")
		i := slices.IndexFunc(s.Agent.Tools, func(t Tool) bool { return t.Name == name })
		switch {
		case field != "duration":
			return nil, false, fmt.Errorf("parameter %q: a script's parameter is tools.NAME.duration", param)
		case s.Agent.Go == "":
			return nil, false, fmt.Errorf("parameter %q: the agent is written inline; its tools are agent.tools.N", param)
		case i < 0:
			return nil, false, fmt.Errorf("parameter %q: the Go agent %q has no tool %q", param, s.Agent.Go, name)
		case !s.Agent.Tools[i].scripted:
			return nil, false, fmt.Errorf("parameter %q: tool %q has no script in tools", param, name)
		}
		return &s.Agent.Tools[i].Duration, false, nil
	}
	// Replace the one index with N to get the shape of the path.
	parts := strings.Split(param, ".")
	idx := -1
	for i, part := range parts {
		if n, ok := scnParseIndex(part); ok && idx < 0 {
			idx, parts[i] = n, "N"
		}
	}
	// index returns idx when it is in range of a list of n entries.
	index := func(n int, what string) (int, error) {
		if idx >= n {
			return 0, fmt.Errorf("parameter %q: index %d is out of range: the scenario has %s", param, idx, scnCount(n, what))
		}
		return idx, nil
	}
	switch strings.Join(parts, ".") {
	case "timeout":
		return &s.Timeout, true, nil
	case "user.N.at", "user.N.duration":
		i, err := index(len(s.User), "user action")
		if err != nil {
			return nil, false, err
		}
		if strings.HasSuffix(param, ".at") {
			return &s.User[i].At, false, nil
		}
		if s.User[i].Inject != "" {
			return nil, false, fmt.Errorf("parameter %q: user.%d is not a sound; duration applies to say, backchannel and noise only", param, i)
		}
		return &s.User[i].Duration, false, nil
	case "line.echo.delay", "line.echo.learn":
		if s.Line.Echo == nil {
			return nil, false, fmt.Errorf("parameter %q: the scenario has no line.echo", param)
		}
		if param == "line.echo.delay" {
			return &s.Line.Echo.Delay, false, nil
		}
		return &s.Line.Echo.Learn, false, nil
	case "faults.N.at", "faults.N.duration":
		i, err := index(len(s.Faults), "fault")
		if err != nil {
			return nil, false, err
		}
		if strings.HasSuffix(param, ".duration") {
			if s.Faults[i].Kind != "tts_error" {
				return nil, false, fmt.Errorf("parameter %q: faults.%d is not a tts_error; duration applies to tts_error only", param, i)
			}
			return &s.Faults[i].Duration, false, nil
		}
		return &s.Faults[i].At, false, nil
	case "model.N.ttfb":
		i, err := index(len(s.Model), "model response")
		if err != nil {
			return nil, false, err
		}
		return &s.Model[i].TTFB, false, nil
	case "agent.tools.N.duration", "agent.tools.N.timeout":
		if s.Agent.Go != "" {
			return nil, false, fmt.Errorf("parameter %q: the agent is the Go agent %q, whose timeouts come from Go; "+
				"a script's duration is tools.NAME.duration", param, s.Agent.Go)
		}
		i, err := index(len(s.Agent.Tools), "tool")
		if err != nil {
			return nil, false, err
		}
		if strings.HasSuffix(param, ".timeout") {
			return &s.Agent.Tools[i].Timeout, true, nil
		}
		return &s.Agent.Tools[i].Duration, false, nil
	case "tts.ttfb":
		return &s.TTS.TTFB, false, nil
	case "stt.latency":
		return &s.STT.Latency, false, nil
	case "vad.onset":
		return &s.VAD.Onset, false, nil
	case "vad.endpointing":
		return &s.VAD.Endpointing, true, nil
	case "vad.endpointing_min":
		return &s.VAD.EndpointingMin, true, nil
	case "vad.endpointing_max":
		return &s.VAD.EndpointingMax, true, nil
	case "expect.max_stall":
		return &s.Expect.MaxStall, true, nil
	}
	return nil, false, fmt.Errorf("unknown parameter %q (want one of %s)", param, scnParams)
}

// Set sets the duration parameter at path, the notation used by sweep.param
// and the --set flag. Indexes are 0-based. Valid paths: "timeout",
// "user.N.at", "user.N.duration", "faults.N.at", "faults.N.duration", "model.N.ttfb",
// "agent.tools.N.duration", "agent.tools.N.timeout" (an inline agent's
// tools), "tools.NAME.duration" (a Go agent's scripted tool), "tts.ttfb",
// "stt.latency", "line.echo.delay", "line.echo.learn", "vad.onset", "vad.endpointing", "expect.max_stall".
// An unknown path or an out-of-range index is an error naming the path; so is
// a negative d, or a zero d for a parameter that a scenario file requires to
// be > 0.
func (s *Scenario) Set(param string, d time.Duration) error {
	p, positive, err := s.scnParam(param)
	switch {
	case err != nil:
		return fmt.Errorf("sim: %w", err)
	case d < 0:
		return fmt.Errorf("sim: parameter %q: %v is negative", param, d)
	case d == 0 && positive:
		return fmt.Errorf("sim: parameter %q: must be > 0", param)
	}
	*p = d
	return nil
}

// Get returns the value of the duration parameter at path (same paths as Set).
func (s *Scenario) Get(param string) (time.Duration, error) {
	p, _, err := s.scnParam(param)
	if err != nil {
		return 0, fmt.Errorf("sim: %w", err)
	}
	return *p, nil
}

// Clone returns a deep copy: nothing the copy holds (slices, maps,
// RawMessages, Sweep) is shared with s, so a sweep can run variants of one
// scenario side by side.
func (s *Scenario) Clone() *Scenario {
	c := *s
	c.Agent.Tools = slices.Clone(s.Agent.Tools)
	for i := range c.Agent.Tools {
		c.Agent.Tools[i].Result = slices.Clone(c.Agent.Tools[i].Result)
	}
	c.Model = slices.Clone(s.Model)
	for i := range c.Model {
		c.Model[i].ToolCalls = slices.Clone(c.Model[i].ToolCalls)
		for j := range c.Model[i].ToolCalls {
			c.Model[i].ToolCalls[j].Args = slices.Clone(c.Model[i].ToolCalls[j].Args)
		}
	}
	if s.Line.Echo != nil {
		echo := *s.Line.Echo
		c.Line.Echo = &echo
	}
	c.User = slices.Clone(s.User)
	c.Faults = slices.Clone(s.Faults)
	c.Expect.ToolRuns = maps.Clone(s.Expect.ToolRuns)
	c.Expect.ToolRunsMax = maps.Clone(s.Expect.ToolRunsMax)
	c.Expect.FinalContextContains = slices.Clone(s.Expect.FinalContextContains)
	c.Expect.Events = slices.Clone(s.Expect.Events)
	if s.Sweep != nil {
		sw := *s.Sweep
		c.Sweep = &sw
	}
	return &c
}
