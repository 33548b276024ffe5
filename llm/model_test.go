package llm_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/holdline/holdline/llm"
)

func TestCallAccumulatorInterleavedFragments(t *testing.T) {
	deltas := []llm.ToolCallDelta{
		{Index: 3, Name: "book_table"}, // name first, id later
		{Index: 1, ID: "call_a", Name: "get_weather", Arguments: `{"ci`},
		{Index: 3, Arguments: `{"par`},
		{Index: 1, Arguments: `ty":"Pa`},
		{Index: 3, ID: "call_b", Arguments: `ty":`},
		{Index: 1, Arguments: `ris"`},
		{Index: 3, Arguments: `4}`},
		{Index: 1, Arguments: `}`},
		{Index: 7, Name: "hang_up"},            // no arguments, no id
		{Index: 5, ID: "call_c", Name: "noop"}, // no arguments
		{Index: 5, Arguments: ""},
	}
	var acc llm.CallAccumulator
	for _, d := range deltas {
		acc.Add(d)
	}
	got := acc.Calls()
	want := []llm.ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
		{ID: "call_b", Name: "book_table", Arguments: json.RawMessage(`{"party":4}`)},
		{ID: "call_c", Name: "noop", Arguments: json.RawMessage(`{}`)},
		{ID: "", Name: "hang_up", Arguments: json.RawMessage(`{}`)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d calls, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Name != w.Name || string(g.Arguments) != string(w.Arguments) {
			t.Errorf("call %d = {ID:%q Name:%q Args:%s}, want {ID:%q Name:%q Args:%s}",
				i, g.ID, g.Name, g.Arguments, w.ID, w.Name, w.Arguments)
		}
		if !json.Valid(g.Arguments) {
			t.Errorf("call %d arguments not valid JSON: %s", i, g.Arguments)
		}
	}

	// Calls is a read: asking again gives the same answer.
	if again := acc.Calls(); !reflect.DeepEqual(again, got) {
		t.Fatalf("second Calls() = %+v, want %+v", again, got)
	}
}

func TestCallAccumulatorManySmallFragments(t *testing.T) {
	args := `{"query":"a long argument string, streamed one byte at a time","n":12}`
	var acc llm.CallAccumulator
	acc.Add(llm.ToolCallDelta{Index: 2, ID: "x", Name: "search"})
	for i := 0; i < len(args); i++ {
		acc.Add(llm.ToolCallDelta{Index: 2, Arguments: args[i : i+1]})
	}
	calls := acc.Calls()
	if len(calls) != 1 {
		t.Fatalf("got %d calls, want 1", len(calls))
	}
	if string(calls[0].Arguments) != args {
		t.Fatalf("arguments = %s, want %s", calls[0].Arguments, args)
	}
}

func TestCallAccumulatorEmptyFragmentKeepsIDAndName(t *testing.T) {
	var acc llm.CallAccumulator
	acc.Add(llm.ToolCallDelta{Index: 0, ID: "first", Name: "a"})
	acc.Add(llm.ToolCallDelta{Index: 0, ID: "", Name: ""}) // empty does not erase
	c := acc.Calls()[0]
	if c.ID != "first" || c.Name != "a" {
		t.Fatalf("empty fragment erased header: %+v", c)
	}
}

func TestCallAccumulatorZeroValue(t *testing.T) {
	var acc llm.CallAccumulator
	if calls := acc.Calls(); len(calls) != 0 {
		t.Fatalf("zero accumulator returned %+v", calls)
	}
}
