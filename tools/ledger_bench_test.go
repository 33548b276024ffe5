package tools

import (
	"encoding/json"
	"strconv"
	"testing"
)

// BenchmarkLedgerCall is the ledger's cost for one mutation's whole life:
// request (with its idempotency key), the at-most-once decision, start,
// outcome and commit.
func BenchmarkLedgerCall(b *testing.B) {
	l := NewLedger("bench")
	args := json.RawMessage(`{"party":2,"time":"19:00","name":"Ada"}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		id := "c" + strconv.Itoa(i)
		if _, err := l.Request(id, "book_table", args, Mutation, Defer, uint64(i)); err != nil {
			b.Fatal(err)
		}
		l.Decide(id)
		l.Defer(id)
		l.Start(id)
		l.Finish(id, Outcome{State: StateSucceeded, Output: "ok"})
		l.Commit(id)
		if i%1024 == 1023 {
			l = NewLedger("bench") // one session's worth; keys would all dedupe otherwise
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/call")
}
