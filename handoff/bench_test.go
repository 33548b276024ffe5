package handoff

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/tools"
)

// thirtyTurns is a 30-turn session: each turn a caller's sentence and an
// agent's answer of about twenty words, with ten tool calls among them.
func thirtyTurns() Snapshot {
	st := engine.State{SessionID: "sip_5f2c9a7d1e3b4c60", Agent: "booking", Epoch: 40, NextCall: 10}
	words := strings.Repeat("table booking evening party guests window garden ", 3)
	for i := range 30 {
		st.Chat = append(st.Chat,
			llm.Item{Kind: llm.KindMessage, Role: llm.RoleUser, Text: fmt.Sprintf("Turn %d: I would like a table for four at seven please", i)},
			llm.Item{Kind: llm.KindMessage, Role: llm.RoleAssistant, Text: words[:120]})
		if i%3 == 0 {
			args := json.RawMessage(fmt.Sprintf(`{"party":4,"time":"19:%02d","name":"Martinez","notes":"window seat, birthday cake, high chair"}`, i))
			c := tools.Call{ID: fmt.Sprintf("call_%d", i), Tool: "book_table", Args: args, Effect: tools.Mutation, Policy: tools.Defer,
				Key: tools.IdempotencyKey(st.SessionID, "book_table", args), Epoch: uint64(i + 1), State: tools.StateSucceeded, Ran: true, Committed: true,
				Output: fmt.Sprintf(`{"code":"HB19%02d4","party":4,"time":"19:%02d","table":"garden 3","message":"confirmation sent by text message"}`, i, i)}
			st.Calls = append(st.Calls, c)
			st.Chat = append(st.Chat, llm.Item{Kind: llm.KindToolCall, CallID: c.ID, Name: c.Tool, Arguments: args})
		}
	}
	return Snapshot{State: st, Transport: map[string]string{"kind": "sip", "call_id": "a84b4c76e66710"}}
}

// BenchmarkSeal seals and opens a 30-turn session's snapshot, and reports
// its size (go test -run '^$' -bench Seal ./handoff).
func BenchmarkSeal(b *testing.B) {
	s := thirtyTurns()
	data, err := Seal(s, testKey)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("seal", func(b *testing.B) {
		b.ReportMetric(float64(len(data)), "sealed-bytes")
		for range b.N {
			if _, err := Seal(s, testKey); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		for range b.N {
			if _, err := Open(data, testKey); err != nil {
				b.Fatal(err)
			}
		}
	})
}
