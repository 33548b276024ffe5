package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkCheckpointSave measures what a turn costs the session's worker
// to checkpoint: one Save of a 30-turn session under a held lease. It
// reports the median and 99th-percentile latency of a Save, and the size
// of the checkpoint.
func BenchmarkCheckpointSave(b *testing.B) {
	payload := sessionPayload(b)
	b.Run("file", func(b *testing.B) {
		s, err := OpenFile(b.TempDir() + "/holdline.db")
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchmarkSave(b, s, payload)
	})
	b.Run("file-sync", func(b *testing.B) {
		s, err := OpenFile(b.TempDir()+"/holdline.db", WithSync())
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchmarkSave(b, s, payload)
	})
	b.Run("redis", func(b *testing.B) {
		benchmarkSave(b, openTestRedis(b), payload)
	})
}

func benchmarkSave(b *testing.B, s Store, payload []byte) {
	ctx := context.Background()
	l, err := s.Acquire(ctx, "bench-session", "bench-worker", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	timings := make([]time.Duration, b.N)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := s.Save(ctx, l, payload); err != nil {
			b.Fatal(err)
		}
		timings[i] = time.Since(start)
	}
	b.StopTimer()
	slices.Sort(timings)
	b.ReportMetric(micros(percentile(timings, 0.50)), "p50-µs")
	b.ReportMetric(micros(percentile(timings, 0.99)), "p99-µs")
	b.ReportMetric(float64(len(payload)), "bytes")
}

// percentile returns the p-th quantile of sorted timings (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Stand-ins for a session snapshot, shaped like the real one (being
// written in package handoff) so that the payload's size and JSON
// structure are realistic.
type (
	benchSnapshot struct {
		Session  string          `json:"session"`
		Agent    string          `json:"agent"`
		Started  time.Time       `json:"started"`
		Epoch    int             `json:"epoch"`
		Turns    []benchTurn     `json:"turns"`
		Calls    []benchToolCall `json:"calls"`
		Settings map[string]any  `json:"settings"`
	}
	benchTurn struct {
		Role    string `json:"role"`
		Text    string `json:"text"`
		StartMS int64  `json:"start_ms"`
		EndMS   int64  `json:"end_ms"`
		Cut     bool   `json:"cut,omitempty"`
	}
	benchToolCall struct {
		CallID string          `json:"call_id"`
		Tool   string          `json:"tool"`
		Key    string          `json:"key"`
		Turn   int             `json:"turn"`
		Args   json.RawMessage `json:"args"`
		State  string          `json:"state"`
		Output string          `json:"output"`
	}
)

// sessionPayload builds the checkpoint of a 30-turn voice-agent session:
// 30 user and 30 assistant turns of about 20 words, and 10 tool calls
// with about 100 bytes of JSON arguments and 150 bytes of output each.
func sessionPayload(tb testing.TB) []byte {
	tb.Helper()
	words := strings.Fields(`I would like to book a table for four people tomorrow evening
		around half past seven near the window if that is possible please and
		could you also check whether they have vegetarian options on the menu`)
	sentence := func(n int) string {
		var sb strings.Builder
		for i := range 20 {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(words[(n*7+i)%len(words)])
		}
		sb.WriteByte('.')
		return sb.String()
	}
	snap := benchSnapshot{
		Session:  "sess-7f3a9c2e-4b1d-4e8a-9f6c-2d5e8b1a0c3f",
		Agent:    "booking",
		Started:  time.Date(2026, 7, 14, 9, 0, 0, 0, time.UTC),
		Epoch:    3,
		Settings: map[string]any{"voice": "en-us", "language": "en", "barge_in": true},
	}
	var ms int64
	for i := range 30 {
		for _, role := range []string{"user", "assistant"} {
			snap.Turns = append(snap.Turns, benchTurn{Role: role, Text: sentence(len(snap.Turns)), StartMS: ms, EndMS: ms + 4200})
			ms += 5000
		}
		if i%3 == 0 && len(snap.Calls) < 10 {
			n := len(snap.Calls)
			snap.Calls = append(snap.Calls, benchToolCall{
				CallID: fmt.Sprintf("call_%02d_9f8e7d6c5b4a", n),
				Tool:   "book_table",
				Key:    fmt.Sprintf("idem-%02d-3c2b1a0f", n),
				Turn:   2*i + 1,
				Args: json.RawMessage(fmt.Sprintf(
					`{"restaurant":"Chez Marie","date":"2026-07-15","time":"19:30","party_size":%d,"seating":"window"}`, 2+n%4)),
				State: "succeeded",
				Output: fmt.Sprintf(`Booked a table for %d at Chez Marie on 2026-07-15 at 19:30, window seating. `+
					`Confirmation number CM-%05d; the table is held for fifteen minutes.`, 2+n%4, 48213+n),
			})
		}
	}
	if len(snap.Turns) != 60 || len(snap.Calls) != 10 {
		tb.Fatalf("payload has %d turns and %d calls, want 60 and 10", len(snap.Turns), len(snap.Calls))
	}
	data, err := json.Marshal(snap)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}
