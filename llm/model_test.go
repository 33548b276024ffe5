package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/scripted"
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

func TestReasonString(t *testing.T) {
	seen := map[string]llm.Reason{}
	for r := llm.ReasonUnspecified; r <= llm.ReasonSummary; r++ {
		s := r.String()
		if s == "" || strings.HasPrefix(s, "Reason(") {
			t.Errorf("reason %d has no name: %q", int(r), s)
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("reasons %d and %d are both named %q", int(prev), int(r), s)
		}
		seen[s] = r
	}
	if got := llm.ReasonUserTurn.String(); got != "user_turn" {
		t.Errorf("ReasonUserTurn = %q", got)
	}
	for _, r := range []llm.Reason{-1, llm.ReasonSummary + 1} {
		if got, want := r.String(), fmt.Sprintf("Reason(%d)", int(r)); got != want {
			t.Errorf("out of range %d = %q; want %q", int(r), got, want)
		}
	}
}

func TestRequestNewItems(t *testing.T) {
	items := []llm.Item{
		{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "a"},
		{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: "b"},
		{Kind: llm.KindMessage, Role: llm.RoleUser, Text: "c"},
	}
	for _, tc := range []struct{ new, want int }{
		{0, 3}, {1, 2}, {3, 0}, {-2, 3}, {7, 0},
	} {
		req := llm.Request{Context: llm.ChatContext{Items: items}, New: tc.new}
		got := req.NewItems()
		if len(got) != tc.want {
			t.Errorf("New %d: %d new items; want %d", tc.new, len(got), tc.want)
			continue
		}
		if tc.want > 0 && got[0].Text != items[len(items)-tc.want].Text {
			t.Errorf("New %d: new items start at %+v", tc.new, got[0])
		}
	}
	if got := (llm.Request{}).NewItems(); len(got) != 0 {
		t.Errorf("empty request has new items %+v", got)
	}
}

func TestIsProvisional(t *testing.T) {
	for _, out := range []string{llm.ProvisionalRunning, llm.ProvisionalDetached, llm.ProvisionalDeferred} {
		if !llm.IsProvisional(out) {
			t.Errorf("IsProvisional(%s) = false", out)
		}
		if !json.Valid([]byte(out)) {
			t.Errorf("provisional output %s is not JSON", out)
		}
	}
	for _, out := range []string{"", "3 left", `{"status":"still running"}`} {
		if llm.IsProvisional(out) {
			t.Errorf("IsProvisional(%q) = true", out)
		}
	}
}

// ReadAll joins a response's text and puts its calls together; a stream
// that fails midway gives what came before the failure, with the error.
func TestReadAllKeepsWhatCameBeforeAFailure(t *testing.T) {
	broken := errors.New("connection reset")
	model := scripted.NewLLM(
		scripted.Response{Text: "Booking it now.", ToolCalls: []scripted.Call{{ID: "c1", Name: "book", Args: map[string]int{"party": 2}}}, TokensPerSecond: math.Inf(1)},
		scripted.Response{Text: "one two three four", Err: broken, ErrAfter: 2, TokensPerSecond: math.Inf(1)},
	)
	s, err := model.Stream(context.Background(), llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := llm.ReadAll(s)
	if err != nil || a.Text != "Booking it now." || len(a.Calls) != 1 || a.Calls[0].Name != "book" || string(a.Calls[0].Arguments) != `{"party":2}` {
		t.Fatalf("ReadAll = %+v, %v", a, err)
	}
	s, err = model.Stream(context.Background(), llm.Request{})
	if err != nil {
		t.Fatal(err)
	}
	a, err = llm.ReadAll(s)
	if !errors.Is(err, broken) || a.Text != "one two " {
		t.Fatalf("ReadAll of a broken stream = %q, %v; want the two chunks before it broke and the error", a.Text, err)
	}
}
