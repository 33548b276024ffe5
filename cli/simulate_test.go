package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holdline/holdline/sim"
)

func writeScenario(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const breaksBooking = `name: books-twice
agent:
  tools: [{name: book_table, dedupe: false, on_interrupt: complete}]
model:
  - text: "Booking."
    tool_calls: [{name: book_table, args: {party: 2}}]
  - text: "Booking again."
    tool_calls: [{name: book_table, args: {party: 2}}]
  - text: "Done."
user:
  - {at: 0s, inject: "Book it."}
expect:
  tool_runs: {book_table: 1}
sweep: {param: "model.0.ttfb", from: 100ms, to: 300ms}
`

func TestSimulateFailingRunPrintsReplay(t *testing.T) {
	path := writeScenario(t, "twice.yaml", breaksBooking)
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"simulate", path, "--sweep", "3", "--seed", "5"}, nil, &out, &errOut)
	if !errors.Is(err, errViolations) {
		t.Fatalf("err = %v; want a failure", err)
	}
	got := out.String()
	for _, want := range []string{
		"FAIL  " + path, "3 of 3 runs failed", "run seed=5 model.0.ttfb=100ms",
		"book_table ran 2 times; want 1", "timeline of seed=5", "tool_started", "replay: holdline simulate " + path + " --seed 5 --set model.0.ttfb=100ms",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// --timeline shows what a passing run did: here a backchannel over the
// answer pauses it and the answer resumes.
func TestSimulateTimelineOfAPassingRun(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"simulate", "../examples/scenarios/k1-backchannel-never-cuts-the-answer.yaml", "--timeline"}, nil, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"ok    ", "timeline of seed=1:", "barge_in_suspected reason=speech_over_agent",
		"barge_in_resumed reason=backchannel", `transcript_ignored reason=backchannel "uh-huh"`, "playout_done"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestSimulatePassesTheSuiteAsJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"simulate", "../examples/scenarios", "--sweep", "5", "--json"}, nil, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var results []struct {
		File string `json:"file"`
		Runs int    `json:"runs"`
	}
	if err := json.Unmarshal(out.Bytes(), &results); err != nil {
		t.Fatal(err)
	}
	if len(results) < 20 || results[0].Runs != 5 {
		t.Errorf("%d results, first %+v", len(results), results[0])
	}
}

func TestSimulateBadFileNamesFileLineKey(t *testing.T) {
	path := writeScenario(t, "bad.yaml", "name: bad\nagent:\n  tools:\n    - {name: t, on_interupt: cancel}\n")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"simulate", path}, nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), path+":4: agent.tools.0.on_interupt: unknown key") {
		t.Errorf("err = %v", err)
	}
}

func TestSimulateSchemaPrintsTheScenarioSchema(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"simulate", "--schema"}, nil, &out, &errOut); err != nil {
		t.Fatalf("simulate --schema: %v\n%s", err, errOut.String())
	}
	want, err := sim.JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("simulate --schema printed something other than sim.JSONSchema:\n%.300s", out.String())
	}
	var doc struct {
		Schema string `json:"$schema"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q, %v; want draft 2020-12", doc.Schema, err)
	}
}
