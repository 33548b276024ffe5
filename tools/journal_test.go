package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
)

var _ Journal = (*MemoryJournal)(nil)

func intent(session, id string) Record {
	args := json.RawMessage(fmt.Sprintf(`{"call":%q}`, id))
	return Record{Session: session, CallID: id, Tool: "book", Key: IdempotencyKey(session, "book", args), Args: args}
}

func unresolvedIDs(t *testing.T, j *MemoryJournal, session string) []string {
	t.Helper()
	recs, err := j.Unresolved(context.Background(), session)
	if err != nil {
		t.Fatalf("Unresolved(%q): %v", session, err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.CallID)
	}
	return ids
}

func TestMemoryJournalOutcomeResolvesIntent(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	in := intent("s1", "c1")
	if err := j.WriteIntent(ctx, in); err != nil {
		t.Fatal(err)
	}
	recs, err := j.Unresolved(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || !reflect.DeepEqual(recs[0], in) {
		t.Fatalf("Unresolved = %+v, want [%+v]", recs, in)
	}
	if _, ok := j.Outcome("s1", "c1"); ok {
		t.Error("Outcome found before one was written")
	}

	out := in
	out.State, out.Output = StateSucceeded, "booked B-7"
	if err := j.WriteOutcome(ctx, out); err != nil {
		t.Fatal(err)
	}
	if ids := unresolvedIDs(t, j, "s1"); len(ids) != 0 {
		t.Errorf("Unresolved after the outcome = %v, want none", ids)
	}
	got, ok := j.Outcome("s1", "c1")
	if !ok || !reflect.DeepEqual(got, out) {
		t.Errorf("Outcome = %+v, %v; want %+v", got, ok, out)
	}
}

func TestMemoryJournalUnresolved(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	// Interleave two sessions; resolve some calls of each.
	writes := []Record{intent("s1", "c3"), intent("s2", "c1"), intent("s1", "c1"), intent("s1", "c2"), intent("s2", "c2"), intent("s1", "c4")}
	for _, r := range writes {
		if err := j.WriteIntent(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []Record{{Session: "s1", CallID: "c1", State: StateFailed}, {Session: "s2", CallID: "c2", State: StateSucceeded}} {
		if err := j.WriteOutcome(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		session string
		want    []string
	}{
		{"s1", []string{"c3", "c2", "c4"}}, // write order, not id order
		{"s2", []string{"c1"}},             // s1's outcome for c1 does not resolve s2's c1
		{"s3", nil},
	}
	for _, tt := range tests {
		if got := unresolvedIDs(t, j, tt.session); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Unresolved(%q) = %v, want %v", tt.session, got, tt.want)
		}
	}
	recs, _ := j.Unresolved(ctx, "s1")
	for _, r := range recs {
		if r.Session != "s1" {
			t.Errorf("Unresolved(s1) returned a record of session %q", r.Session)
		}
		if want := intent("s1", r.CallID); !reflect.DeepEqual(r, want) {
			t.Errorf("Unresolved record = %+v, want the intent as written %+v", r, want)
		}
	}
}

func TestMemoryJournalOutcomeBeforeIntent(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	if err := j.WriteOutcome(ctx, Record{Session: "s1", CallID: "c1", State: StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	if err := j.WriteIntent(ctx, intent("s1", "c1")); err != nil {
		t.Fatal(err)
	}
	if ids := unresolvedIDs(t, j, "s1"); len(ids) != 0 {
		t.Errorf("Unresolved = %v; an outcome written first still resolves the intent", ids)
	}
}

func TestMemoryJournalCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	j := NewMemoryJournal()
	if err := j.WriteIntent(ctx, intent("s1", "c1")); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteIntent with a canceled ctx = %v, want context.Canceled", err)
	}
	if err := j.WriteOutcome(ctx, Record{Session: "s1", CallID: "c2", State: StateSucceeded}); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteOutcome with a canceled ctx = %v, want context.Canceled", err)
	}
	recs, err := j.Unresolved(ctx, "s1")
	if !errors.Is(err, context.Canceled) || recs != nil {
		t.Errorf("Unresolved with a canceled ctx = %v, %v; want nil, context.Canceled", recs, err)
	}
	// Nothing was written.
	if ids := unresolvedIDs(t, j, "s1"); len(ids) != 0 {
		t.Errorf("an intent written with a canceled ctx was recorded: %v", ids)
	}
	if _, ok := j.Outcome("s1", "c2"); ok {
		t.Error("an outcome written with a canceled ctx was recorded")
	}

	// And a canceled outcome leaves its intent unresolved.
	bg := context.Background()
	if err := j.WriteIntent(bg, intent("s1", "c3")); err != nil {
		t.Fatal(err)
	}
	if err := j.WriteOutcome(ctx, Record{Session: "s1", CallID: "c3", State: StateSucceeded}); err == nil {
		t.Fatal("WriteOutcome with a canceled ctx succeeded")
	}
	if ids := unresolvedIDs(t, j, "s1"); !reflect.DeepEqual(ids, []string{"c3"}) {
		t.Errorf("Unresolved = %v, want [c3]", ids)
	}
}

func TestMemoryJournalDeadlineExceeded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	if err := NewMemoryJournal().WriteIntent(ctx, intent("s1", "c1")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WriteIntent past its deadline = %v, want context.DeadlineExceeded", err)
	}
}

// Run with -race: writes run on the tools' goroutines.
func TestMemoryJournalConcurrent(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	const workers, per = 16, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("s%d", w%2)
			for i := range per {
				id := fmt.Sprintf("w%d-c%d", w, i)
				r := intent(session, id)
				if err := j.WriteIntent(ctx, r); err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					r.State, r.Output = StateSucceeded, "ok"
					if err := j.WriteOutcome(ctx, r); err != nil {
						t.Error(err)
						return
					}
				}
				if _, err := j.Unresolved(ctx, session); err != nil {
					t.Error(err)
					return
				}
				j.Outcome(session, id)
			}
		}()
	}
	wg.Wait()

	total := 0
	for _, s := range []string{"s0", "s1"} {
		ids := unresolvedIDs(t, j, s)
		total += len(ids)
		// Each worker's intents appear in the order it wrote them.
		last := map[string]int{}
		for _, id := range ids {
			var w, i int
			if _, err := fmt.Sscanf(id, "w%d-c%d", &w, &i); err != nil {
				t.Fatalf("bad id %q", id)
			}
			if i%2 == 0 {
				t.Errorf("%s: resolved call %s listed as unresolved", s, id)
			}
			if prev, ok := last[fmt.Sprint(w)]; ok && prev >= i {
				t.Errorf("%s: %s listed after w%d-c%d, out of write order", s, id, w, prev)
			}
			last[fmt.Sprint(w)] = i
		}
	}
	if want := workers * per / 2; total != want {
		t.Errorf("%d unresolved intents in all, want %d", total, want)
	}
}

func TestMemoryJournalDoesNotAliasArgs(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	const orig = `{"party":4}`
	args := json.RawMessage(orig)
	if err := j.WriteIntent(ctx, Record{Session: "s1", CallID: "c1", Tool: "book", Args: args}); err != nil {
		t.Fatal(err)
	}
	args[len(args)-2] = '9' // the caller reuses its buffer
	recs, _ := j.Unresolved(ctx, "s1")
	if string(recs[0].Args) != orig {
		t.Fatalf("intent Args alias the caller's: %s", recs[0].Args)
	}
	recs[0].Args[len(recs[0].Args)-2] = '7' // the reader scribbles on its copy
	again, _ := j.Unresolved(ctx, "s1")
	if string(again[0].Args) != orig {
		t.Errorf("Args returned by Unresolved alias the journal's: %s", again[0].Args)
	}
}

func TestMemoryJournalOutcomeDoesNotAliasWrittenArgs(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	const orig = `{"party":4}`
	args := json.RawMessage(orig)
	if err := j.WriteOutcome(ctx, Record{Session: "s1", CallID: "c1", Args: args, State: StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	args[len(args)-2] = '9'
	if r, _ := j.Outcome("s1", "c1"); string(r.Args) != orig {
		t.Errorf("outcome Args alias the caller's: %s", r.Args)
	}
}

// MemoryJournal is safe for concurrent use and copies Args on the way in
// and (in Unresolved) on the way out; Outcome must not hand out its
// internal Args either.
func TestMemoryJournalOutcomeDoesNotAliasReturnedArgs(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	const orig = `{"party":4}`
	if err := j.WriteOutcome(ctx, Record{Session: "s1", CallID: "c1", Args: json.RawMessage(orig), State: StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	r, _ := j.Outcome("s1", "c1")
	r.Args[len(r.Args)-2] = '7'
	if again, _ := j.Outcome("s1", "c1"); string(again.Args) != orig {
		t.Errorf("Args returned by Outcome alias the journal's: now %s", again.Args)
	}
}

func TestRecordJSON(t *testing.T) {
	in := Record{Session: "s1", CallID: "c1", Tool: "book", Key: "k", Args: json.RawMessage(`{"party":4}`)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"session":"s1","call_id":"c1","tool":"book","key":"k","args":{"party":4}}`; string(b) != want {
		t.Errorf("intent record encodes as %s, want %s", b, want)
	}
	out := Record{Session: "s1", CallID: "c1", Tool: "book", Key: "k", State: StateFailed, Output: "no table", IsError: true}
	b, err = json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, out) {
		t.Errorf("outcome record round-trips as %+v, want %+v", back, out)
	}
}
