package sim

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/holdline/holdline/events"
)

// The format of a scenario file: every mapping's keys, which the parser
// checks files against and the JSON Schema (JSONSchema) is made from, so
// that an editor checking a file as it is typed and the simulator loading
// it agree on every name.

// scnField is one key of a mapping.
type scnField struct {
	key      string
	required bool
	// fromGo marks a Go tool's own setting, which a script may not
	// restate: the parser knows the key so as to say so, and the schema
	// forbids it.
	fromGo bool
	// value is the JSON Schema of the key's value; a function, because a
	// schema must be a tree and no two keys may share a node.
	value func() *jsonschema.Schema
}

// scnShape is the keys of one mapping, in the order messages list them.
type scnShape []scnField

func (s scnShape) keys() []string {
	keys := make([]string, len(s))
	for i, f := range s {
		keys[i] = f.key
	}
	return keys
}

func (s scnShape) required() []string {
	var keys []string
	for _, f := range s {
		if f.required {
			keys = append(keys, f.key)
		}
	}
	return keys
}

// schema is the JSON Schema of a mapping of this shape.
func (s scnShape) schema() *jsonschema.Schema {
	sc := &jsonschema.Schema{
		Type:                 "object",
		Properties:           map[string]*jsonschema.Schema{},
		PropertyOrder:        s.keys(),
		Required:             s.required(),
		AdditionalProperties: scnNever(),
	}
	for _, f := range s {
		if f.fromGo {
			sc.Properties[f.key] = scnNever()
			sc.Properties[f.key].Description = "set by the Go tool, not the script"
		} else {
			sc.Properties[f.key] = f.value()
		}
	}
	return sc
}

// The shapes of the format's mappings.
var (
	scnTopShape = scnShape{
		{key: "name", required: true, value: scnNonEmptyText},
		{key: "seed", value: scnInteger(nil)},
		{key: "timeout", value: scnDuration(true)},
		{key: "speculate", value: scnBool},
		{key: "agent", value: scnAgent},
		{key: "tools", value: scnScripts},
		{key: "model", value: scnList(scnModelShape.schema)},
		{key: "tts", value: scnTTSShape.schema},
		{key: "stt", value: scnSTTShape.schema},
		{key: "vad", value: scnVADShape.schema},
		{key: "line", value: scnLineShape.schema},
		{key: "user", value: scnList(scnUserShape.schema)},
		{key: "faults", value: scnList(scnFaultShape.schema)},
		{key: "expect", value: scnExpectShape.schema},
		{key: "sweep", value: scnSweepShape.schema},
	}
	scnAgentShape = scnShape{
		{key: "instructions", value: scnText},
		{key: "tools", value: scnList(scnToolShape.schema)},
	}
	scnToolShape = scnShape{
		{key: "name", required: true, value: scnPattern(scnToolName.String())},
		{key: "effect", value: scnEnum(scnEffects)},
		{key: "on_interrupt", value: scnEnum(scnToolPolicies)},
		{key: "duration", value: scnDuration(false)},
		{key: "timeout", value: scnDuration(true)},
		{key: "result", value: scnAny},
		{key: "error", value: scnText},
		{key: "ignores_cancel", value: scnBool},
		{key: "hang", value: scnBool},
		{key: "dedupe", value: scnBool},
		{key: "speculative", value: scnBool},
	}
	scnScriptShape = scnShape{
		{key: "duration", value: scnDuration(false)},
		{key: "result", value: scnAny},
		{key: "error", value: scnText},
		{key: "ignores_cancel", value: scnBool},
		{key: "hang", value: scnBool},
		{key: "effect", fromGo: true},
		{key: "on_interrupt", fromGo: true},
		{key: "timeout", fromGo: true},
		{key: "dedupe", fromGo: true},
		{key: "speculative", fromGo: true},
	}
	scnModelShape = scnShape{
		{key: "ttfb", value: scnDuration(false)},
		{key: "text", value: scnText},
		{key: "tool_calls", value: scnList(scnToolCallShape.schema)},
	}
	scnToolCallShape = scnShape{
		{key: "id", value: scnText},
		{key: "name", required: true, value: scnNonEmptyText},
		{key: "args", value: scnObject},
	}
	scnTTSShape = scnShape{
		{key: "ttfb", value: scnDuration(false)},
		{key: "words_per_second", value: scnPositiveNumber},
		{key: "backup", value: scnBool},
	}
	scnSTTShape = scnShape{
		{key: "latency", value: scnDuration(false)},
	}
	scnVADShape = scnShape{
		{key: "onset", value: scnDuration(false)},
		{key: "endpointing", value: scnDuration(true)},
		{key: "endpointing_min", value: scnDuration(true)},
		{key: "endpointing_max", value: scnDuration(true)},
	}
	scnLineShape = scnShape{
		{key: "echo", value: scnEchoShape.schema},
		{key: "echo_free", value: scnBool},
	}
	scnEchoShape = scnShape{
		{key: "delay", value: scnDuration(false)},
		{key: "gain_db", value: scnNumber(-60, 20)},
		{key: "learn", value: scnDuration(false)},
	}
	scnUserShape = scnShape{
		{key: "at", required: true, value: scnDuration(false)},
		{key: "say", value: scnNonEmptyText},
		{key: "inject", value: scnNonEmptyText},
		{key: "backchannel", value: scnNonEmptyText},
		{key: "noise", value: scnNonEmptyText},
		{key: "duration", value: scnDuration(false)},
		{key: "level_db", value: scnNumber(-30, 20)},
	}
	scnFaultShape = scnShape{
		{key: "at", required: true, value: scnDuration(false)},
		{key: "kind", required: true, value: scnEnum(scnFaultKinds)},
		{key: "duration", value: scnDuration(false)},
	}
	scnExpectShape = scnShape{
		{key: "max_stall", value: scnDuration(true)},
		{key: "tool_runs", value: scnToolCounts},
		{key: "tool_runs_max", value: scnToolCounts},
		{key: "every_call_answered", value: scnAlways},
		{key: "context_matches_playout", value: scnAlways},
		{key: "final_context_contains", value: scnList(scnNonEmptyText)},
		{key: "events", value: scnList(scnEventExpectSchema)},
	}
	scnEventShape = scnShape{
		{key: "kind", required: true, value: scnEnum(scnEventKinds())},
		{key: "within", value: scnDuration(false)},
		{key: "after", value: scnPattern(`^(|start|user\.(0|[1-9][0-9]*)|fault\.(0|[1-9][0-9]*))$`)},
		{key: "tool", value: scnText},
		{key: "state", value: scnEventState},
		{key: "reason", value: scnText},
		{key: "count", value: scnInteger(new(int64))},
	}
	scnSweepShape = scnShape{
		{key: "param", required: true, value: scnText},
		{key: "from", required: true, value: scnDuration(false)},
		{key: "to", required: true, value: scnDuration(false)},
	}
)

// JSONSchema returns the JSON Schema (draft 2020-12) of a scenario file,
// made from the lists the parser checks files against. Editors use it to
// check a file as it is typed, e.g. VS Code's YAML extension with a first
// line of
//
//	# yaml-language-server: $schema=scenario.schema.json
//
// It checks the names (keys, event kinds and the states and reasons each
// kind carries, fault kinds, effects, policies) and the types; what needs
// the whole file (a tool named in expect being declared, user.N being in
// range, a Go agent's tools) only Load checks.
func JSONSchema() ([]byte, error) {
	b, err := json.MarshalIndent(scnSchema(), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("sim: scenario schema: %w", err)
	}
	return append(b, '\n'), nil
}

func scnSchema() *jsonschema.Schema {
	s := scnTopShape.schema()
	s.Schema = "https://json-schema.org/draft/2020-12/schema"
	s.Title = "Holdline scenario"
	s.Description = "A scenario for holdline simulate (format v1); see the README's Simulator section."
	return s
}

// scnEventState is any state an event carries; which of them a kind
// carries, scnEventExpectSchema says.
func scnEventState() *jsonschema.Schema {
	var states []string
	for _, k := range events.Kinds() {
		for _, st := range scnEventStates[k] {
			if !slices.Contains(states, st) {
				states = append(states, st)
			}
		}
	}
	return scnEnum(states)()
}

// scnEventExpectSchema is an expect.events entry: its kind is one of the
// event kinds, and its state and reason are among those of its kind where
// the kind's are a closed set.
func scnEventExpectSchema() *jsonschema.Schema {
	s := scnEventShape.schema()
	for _, k := range events.Kinds() {
		then := &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"state": scnNever()}}
		if st, ok := scnEventStates[k]; ok {
			then.Properties["state"] = scnEnum(st)()
		}
		if rs, ok := scnEventReasons[k]; ok {
			then.Properties["reason"] = scnEnum(rs)()
		}
		s.AllOf = append(s.AllOf, &jsonschema.Schema{
			If:   &jsonschema.Schema{Properties: map[string]*jsonschema.Schema{"kind": {Const: scnConst(string(k))}}, Required: []string{"kind"}},
			Then: then,
		})
	}
	return s
}

// scnConst is v as a schema's const.
func scnConst(v any) *any { return &v }

// The schemas of the values. They follow the parser's decoders: str takes
// any scalar, a duration is time.ParseDuration's text (or a bare 0), and
// so on.

// scnDurationPattern is time.ParseDuration's syntax without a sign: one or
// more numbers, each with its unit.
const scnDurationPattern = `(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+`

// scnDuration is a duration >= 0, or > 0 when positive. A schema cannot
// tell "0s" from "1s" without spelling out every way to write zero, so for
// a positive duration it refuses only the bare 0 and leaves "0s" to Load.
func scnDuration(positive bool) func() *jsonschema.Schema {
	return func() *jsonschema.Schema {
		text := &jsonschema.Schema{Type: "string", Pattern: `^\+?` + scnDurationPattern + `$`}
		if positive {
			return text
		}
		text.Pattern = `^\+?(0|` + scnDurationPattern + `)$`
		return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{text, {Const: scnConst(0)}}}
	}
}

func scnText() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"string", "number", "boolean", "null"}}
}

func scnNonEmptyText() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"string", "number", "boolean"}, MinLength: new(1)}
}

func scnPattern(re string) func() *jsonschema.Schema {
	return func() *jsonschema.Schema { return &jsonschema.Schema{Type: "string", Pattern: re} }
}

func scnEnum(names []string) func() *jsonschema.Schema {
	return func() *jsonschema.Schema {
		s := &jsonschema.Schema{Type: "string"}
		for _, n := range names {
			s.Enum = append(s.Enum, n)
		}
		return s
	}
}

func scnBool() *jsonschema.Schema { return &jsonschema.Schema{Type: "boolean"} }

// scnAlways is a check that cannot be turned off: only true.
func scnAlways() *jsonschema.Schema { return &jsonschema.Schema{Const: scnConst(true)} }

func scnInteger(min *int64) func() *jsonschema.Schema {
	return func() *jsonschema.Schema {
		s := &jsonschema.Schema{Type: "integer"}
		if min != nil {
			s.Minimum = new(float64(*min))
		}
		return s
	}
}

func scnNumber(lo, hi float64) func() *jsonschema.Schema {
	return func() *jsonschema.Schema { return &jsonschema.Schema{Type: "number", Minimum: &lo, Maximum: &hi} }
}

func scnPositiveNumber() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "number", ExclusiveMinimum: new(0.0)}
}

func scnAny() *jsonschema.Schema    { return &jsonschema.Schema{} }
func scnObject() *jsonschema.Schema { return &jsonschema.Schema{Type: "object"} }

// scnNever is the schema nothing satisfies (JSON Schema's false).
func scnNever() *jsonschema.Schema { return &jsonschema.Schema{Not: &jsonschema.Schema{}} }

func scnList(item func() *jsonschema.Schema) func() *jsonschema.Schema {
	return func() *jsonschema.Schema { return &jsonschema.Schema{Type: "array", Items: item()} }
}

func scnToolCounts() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", AdditionalProperties: scnInteger(new(int64))()}
}

// scnAgent is an inline agent, or the name of a Go agent.
func scnAgent() *jsonschema.Schema {
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		{Type: "string", MinLength: new(1), Description: "the name of a Go agent (sim.WithAgents)"},
		scnAgentShape.schema(),
		{Type: "null"},
	}}
}

// scnScripts is the top-level tools: a Go agent's tool names to scripts.
func scnScripts() *jsonschema.Schema {
	script := scnScriptShape.schema()
	return &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{
		AnyOf: []*jsonschema.Schema{script, {Type: "null"}},
	}}
}
