package sim

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"gopkg.in/yaml.v3"
)

// scnTestSchema resolves the schema as JSONSchema prints it: what an
// editor reads.
func scnTestSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	b, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("the scenario schema does not resolve: %v", err)
	}
	return r
}

// scnTestInstance reads a scenario file as the JSON value an editor checks.
func scnTestInstance(t *testing.T, path string) any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func scnTestGlob(t *testing.T, patterns ...string) []string {
	t.Helper()
	var files []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no files match %v", patterns)
	}
	return files
}

func TestSchemaAcceptsEveryExampleScenario(t *testing.T) {
	schema := scnTestSchema(t)
	files := scnTestGlob(t,
		filepath.Join("..", "examples", "scenarios", "*.yaml"),
		filepath.Join("..", "examples", "pizza", "scenarios", "*.yaml"),
		filepath.Join("testdata", "*.yaml"))
	for _, f := range files {
		if err := schema.Validate(scnTestInstance(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestSchemaRefusesTheMisspelledNames: each file that Load refuses for a
// name is refused by the schema too, so an editor marks it as it is typed,
// unless the name is wrong only given the rest of the file.
func TestSchemaRefusesTheMisspelledNames(t *testing.T) {
	schema := scnTestSchema(t)
	for _, tt := range scnRefused {
		f := filepath.Join("testdata", "refused", tt.file)
		err := schema.Validate(scnTestInstance(t, f))
		if err == nil && !tt.wholeFile {
			t.Errorf("%s: the schema accepts it", f)
		}
		if err != nil && tt.wholeFile {
			t.Errorf("%s: the schema refuses a mistake only the whole file shows: %v", f, err)
		}
	}
}

func TestSchemaRefusesAMisspelledKind(t *testing.T) {
	schema := scnTestSchema(t)
	ok := map[string]any{"name": "x", "expect": map[string]any{"events": []any{map[string]any{"kind": "tool_committed", "count": 1}}}}
	if err := schema.Validate(ok); err != nil {
		t.Fatalf("a valid kind is refused: %v", err)
	}
	bad := map[string]any{"name": "x", "expect": map[string]any{"events": []any{map[string]any{"kind": "tool_complete", "count": 1}}}}
	err := schema.Validate(bad)
	if err == nil || !strings.Contains(err.Error(), "tool_complete") {
		t.Errorf("Validate(kind: tool_complete) = %v, want an error naming it", err)
	}
}

// TestSchemaListsTheParsersNames checks the printed schema's names against
// the lists the parser uses, so that neither can change alone.
func TestSchemaListsTheParsersNames(t *testing.T) {
	root := scnTestSchema(t).Schema()
	props := func(s *jsonschema.Schema) []string { return slices.Sorted(maps.Keys(s.Properties)) }
	if got, want := props(root), slices.Sorted(slices.Values(scnTopShape.keys())); !slices.Equal(got, want) {
		t.Errorf("top-level properties = %v, want %v", got, want)
	}
	if !slices.Equal(root.Required, []string{"name"}) {
		t.Errorf("required = %v, want [name]", root.Required)
	}
	event := root.Properties["expect"].Properties["events"].Items
	if got, want := enumOf(event.Properties["kind"]), scnEventKinds(); !slices.Equal(got, want) {
		t.Errorf("expect.events kind enum = %v\nwant events.Kinds() %v", got, want)
	}
	fault := root.Properties["faults"].Items
	if got := enumOf(fault.Properties["kind"]); !slices.Equal(got, scnFaultKinds) {
		t.Errorf("fault kind enum = %v, want %v", got, scnFaultKinds)
	}
	if !slices.Equal(fault.Required, []string{"at", "kind"}) {
		t.Errorf("fault required = %v, want [at kind]", fault.Required)
	}
}

func enumOf(s *jsonschema.Schema) []string {
	var out []string
	for _, v := range s.Enum {
		out = append(out, v.(string))
	}
	return out
}

// TestSchemaDurationsAreParseDurations holds the duration pattern to
// time.ParseDuration, which the parser uses.
func TestSchemaDurationsAreParseDurations(t *testing.T) {
	schema := scnTestSchema(t)
	for _, d := range []string{"0", "1s", "400ms", "1.5s", ".5s", "1h2m3s", "2us", "3µs", "1.s", "+1s", "-1s", "1", "1.5", "s", "1 s", "1sec", ""} {
		_, err := time.ParseDuration(d)
		parses := err == nil && !strings.HasPrefix(d, "-")
		doc := map[string]any{"name": "x", "timeout": "1s", "stt": map[string]any{"latency": d}}
		if got := schema.Validate(doc) == nil; got != parses {
			t.Errorf("latency %q: schema accepts = %v, Load accepts = %v", d, got, parses)
		}
	}
}
