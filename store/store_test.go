package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/holdline/holdline/tools"
)

// Lease lengths the suite uses: long enough that a loaded machine never
// sees a long lease expire, short enough that waiting out a short one on
// Redis's real clock stays quick.
const (
	longTTL  = time.Minute
	shortTTL = 100 * time.Millisecond
)

func TestFile(t *testing.T) {
	testStore(t, func(t *testing.T) Store { return openTestFile(t) })
}

func TestRedis(t *testing.T) {
	testStore(t, func(t *testing.T) Store { return openTestRedis(t) })
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// clockedFile is a File on a fake clock; the suite moves time with pass
// instead of sleeping.
type clockedFile struct {
	*File
	clock *fakeClock
}

func (f clockedFile) pass(d time.Duration) { f.clock.Advance(d) }

// openTestFile opens a File in a fresh directory on a fake clock.
func openTestFile(t *testing.T) clockedFile {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 7, 14, 9, 0, 0, 0, time.UTC)}
	f, err := OpenFile(filepath.Join(t.TempDir(), "holdline.db"), WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return clockedFile{File: f, clock: clock}
}

// pass lets d go by on s's clock: the fake clock jumps, a real one is
// slept on. Callers poll with eventually afterwards, so that a server that
// expires a little late does not fail the test.
func pass(s Store, d time.Duration) {
	if c, ok := s.(interface{ pass(time.Duration) }); ok {
		c.pass(d)
		return
	}
	time.Sleep(d)
}

// eventually calls cond until it returns nil, failing the test with cond's
// last error after ten seconds.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 10s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func acquire(t *testing.T, s Store, session, owner string, ttl time.Duration) Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), session, owner, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", session, owner, err)
	}
	return l
}

// takeOver lets a short lease of "a" on session expire and has "b" take
// the session, returning both leases.
func takeOver(t *testing.T, s Store, session string) (lost, won Lease) {
	t.Helper()
	ctx := context.Background()
	lost = acquire(t, s, session, "a", shortTTL)
	pass(s, shortTTL)
	eventually(t, "b takes the expired lease", func() error {
		var err error
		won, err = s.Acquire(ctx, session, "b", longTTL)
		return err
	})
	return lost, won
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func record(callID string, state tools.State) tools.Record {
	r := tools.Record{Session: "s1", CallID: callID, Tool: "book_table", Key: "k-" + callID,
		Args: json.RawMessage(`{"party":2}`), State: state}
	if state != "" {
		r.Output = "booked " + callID
	}
	return r
}

// testStore checks that a Store keeps the contract of the interface.
// open returns a fresh, empty store closed at the end of the test.
func testStore(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("AcquireReturnsLeaseWithToken", func(t *testing.T) {
		s := open(t)
		l := acquire(t, s, "s1", "a", longTTL)
		if l.Session != "s1" || l.Owner != "a" || l.Token == 0 || l.Expires.IsZero() {
			t.Fatalf("lease = %+v, want session s1, owner a, a token and an expiry", l)
		}
	})

	t.Run("RenewKeepsTokenAndExtendsExpiry", func(t *testing.T) {
		s := open(t)
		first := acquire(t, s, "s1", "a", longTTL)
		pass(s, 10*time.Millisecond)
		renewed := acquire(t, s, "s1", "a", longTTL)
		if renewed.Token != first.Token {
			t.Errorf("renewed token %d, want %d", renewed.Token, first.Token)
		}
		if !renewed.Expires.After(first.Expires) {
			t.Errorf("renewed expiry %v is not after %v", renewed.Expires, first.Expires)
		}
	})

	t.Run("LiveLeaseIsHeldAgainstOtherOwners", func(t *testing.T) {
		s := open(t)
		l := acquire(t, s, "s1", "a", longTTL)
		_, err := s.Acquire(ctx, "s1", "b", longTTL)
		wantErr(t, "Acquire by b", err, ErrLeaseHeld)
		if err := s.Save(ctx, l, []byte("a's")); err != nil {
			t.Fatalf("holder's Save after a refused Acquire: %v", err)
		}
		acquire(t, s, "s2", "b", longTTL) // other sessions are free
	})

	t.Run("TakeoverFencesOffALiveHolder", func(t *testing.T) {
		s := open(t)
		old := acquire(t, s, "s1", "a", longTTL)
		if err := s.Save(ctx, old, []byte("a's")); err != nil {
			t.Fatal(err)
		}
		l, err := s.Takeover(ctx, "s1", "b", longTTL)
		if err != nil {
			t.Fatalf("Takeover: %v", err)
		}
		if l.Owner != "b" || l.Token <= old.Token {
			t.Fatalf("takeover lease %+v after %+v; want b's with a newer token", l, old)
		}
		wantErr(t, "the old holder's Save", s.Save(ctx, old, []byte("stale")), ErrLeaseLost)
		if err := s.Save(ctx, l, []byte("b's")); err != nil {
			t.Fatalf("new holder's Save: %v", err)
		}
		if got, _ := s.Load(ctx, "s1"); string(got) != "b's" {
			t.Errorf("Load = %q, want b's", got)
		}
		_, err = s.Acquire(ctx, "s1", "a", longTTL)
		wantErr(t, "the old holder's Acquire", err, ErrLeaseHeld)
	})

	t.Run("ConcurrentAcquireHasOneWinner", func(t *testing.T) {
		s := open(t)
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, errs[i] = s.Acquire(ctx, "s1", fmt.Sprint("owner", i), longTTL)
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrLeaseHeld):
				t.Fatalf("Acquire: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d owners took the lease, want 1", won)
		}
	})

	t.Run("ExpiredLeaseIsTakenWithLargerToken", func(t *testing.T) {
		s := open(t)
		lost, won := takeOver(t, s, "s1")
		if won.Token <= lost.Token {
			t.Fatalf("new holder's token %d is not above %d", won.Token, lost.Token)
		}
	})

	t.Run("ReleasedLeaseIsTakenWithLargerToken", func(t *testing.T) {
		s := open(t)
		a := acquire(t, s, "s1", "a", longTTL)
		if err := s.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		b := acquire(t, s, "s1", "b", longTTL)
		if b.Token <= a.Token {
			t.Fatalf("new holder's token %d is not above %d", b.Token, a.Token)
		}
	})

	t.Run("TokenGrowsWithEveryChangeOfHands", func(t *testing.T) {
		s := open(t)
		var tokens []uint64
		for _, owner := range []string{"a", "b", "a", "a"} {
			l := acquire(t, s, "s1", owner, longTTL)
			tokens = append(tokens, l.Token)
			if err := s.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("tokens %v do not grow", tokens)
			}
		}
	})

	t.Run("ReleasingLostLeaseKeepsNewHolders", func(t *testing.T) {
		s := open(t)
		lost, won := takeOver(t, s, "s1")
		if err := s.Release(ctx, lost); err != nil {
			t.Fatalf("Release of a lost lease: %v", err)
		}
		if err := s.Save(ctx, won, []byte("b's")); err != nil {
			t.Fatalf("new holder's Save after the old one released: %v", err)
		}
		_, err := s.Acquire(ctx, "s1", "c", longTTL)
		wantErr(t, "Acquire by c", err, ErrLeaseHeld)
	})

	t.Run("SaveLoadRoundTrip", func(t *testing.T) {
		s := open(t)
		l := acquire(t, s, "s1", "a", longTTL)
		for _, data := range [][]byte{[]byte(`{"turn":1}`), []byte("\x00binary\xff"), []byte(`{"turn":2}`)} {
			if err := s.Save(ctx, l, data); err != nil {
				t.Fatal(err)
			}
			got, err := s.Load(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("Load = %q, want %q", got, data)
			}
		}
	})

	t.Run("LoadOfMissingIsNotFound", func(t *testing.T) {
		s := open(t)
		_, err := s.Load(ctx, "nobody")
		wantErr(t, "Load", err, ErrNotFound)
	})

	t.Run("WritesAfterTakeoverAreLeaseLost", func(t *testing.T) {
		s := open(t)
		lost, won := takeOver(t, s, "s1")
		if err := s.Save(ctx, won, []byte("b's")); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, won, record("c1", "")); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "old holder's Save", s.Save(ctx, lost, []byte("a's")), ErrLeaseLost)
		wantErr(t, "old holder's Append", s.Append(ctx, lost, record("c2", "")), ErrLeaseLost)
		wantErr(t, "old holder's Delete", s.Delete(ctx, lost), ErrLeaseLost)
		if got, err := s.Load(ctx, "s1"); err != nil || string(got) != "b's" {
			t.Fatalf("Load = %q, %v; want the new holder's checkpoint", got, err)
		}
		if recs, err := s.Journal(ctx, "s1"); err != nil || len(recs) != 1 || recs[0].CallID != "c1" {
			t.Fatalf("Journal = %+v, %v; want the new holder's record only", recs, err)
		}
	})

	t.Run("WriteWithStaleTokenIsLeaseLost", func(t *testing.T) {
		// The same owner took the session again after its lease expired:
		// only the new token may write.
		s := open(t)
		old := acquire(t, s, "s1", "a", shortTTL)
		pass(s, shortTTL)
		// Poll with a write, not with Acquire: an Acquire before the
		// expiry would renew the old lease.
		eventually(t, "the short lease expires", func() error {
			if err := s.Save(ctx, old, []byte("early")); !errors.Is(err, ErrLeaseLost) {
				return fmt.Errorf("Save = %v, want ErrLeaseLost", err)
			}
			return nil
		})
		cur := acquire(t, s, "s1", "a", longTTL)
		if cur.Token <= old.Token {
			t.Fatalf("retaken token %d is not above %d", cur.Token, old.Token)
		}
		wantErr(t, "Save under the old token", s.Save(ctx, old, []byte("stale")), ErrLeaseLost)
		if err := s.Save(ctx, cur, []byte("fresh")); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("WriteUnderUnacquiredLeaseIsLeaseLost", func(t *testing.T) {
		s := open(t)
		forged := Lease{Session: "s1", Owner: "a", Token: 1, Expires: time.Now().Add(time.Hour)}
		wantErr(t, "Save", s.Save(ctx, forged, []byte("x")), ErrLeaseLost)
		wantErr(t, "Append", s.Append(ctx, forged, record("c1", "")), ErrLeaseLost)
	})

	t.Run("JournalKeepsAppendOrder", func(t *testing.T) {
		s := open(t)
		l := acquire(t, s, "s1", "a", longTTL)
		other := acquire(t, s, "s2", "a", longTTL)
		want := []tools.Record{
			record("c1", ""), record("c2", ""), record("c1", tools.StateSucceeded),
			record("c3", ""), record("c2", tools.StateFailed),
		}
		want[4].IsError = true
		for i, r := range want {
			if err := s.Append(ctx, l, r); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(ctx, other, tools.Record{CallID: fmt.Sprint("x", i)}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Journal(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if !recordsEqual(got, want) {
			t.Fatalf("Journal =\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("AppendFillsRecordSession", func(t *testing.T) {
		s := open(t)
		l := acquire(t, s, "s1", "a", longTTL)
		if err := s.Append(ctx, l, tools.Record{CallID: "c1"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, l, tools.Record{Session: "s2", CallID: "c2"}); err == nil {
			t.Fatal("Append of another session's record under s1's lease succeeded")
		}
		got, err := s.Journal(ctx, "s1")
		if err != nil || len(got) != 1 || got[0].Session != "s1" {
			t.Fatalf("Journal = %+v, %v; want one record of s1", got, err)
		}
	})

	t.Run("JournalOfUnknownSessionIsEmpty", func(t *testing.T) {
		s := open(t)
		got, err := s.Journal(ctx, "nobody")
		if err != nil || len(got) != 0 {
			t.Fatalf("Journal = %+v, %v; want none", got, err)
		}
	})

	t.Run("DeleteRemovesCheckpointAndJournal", func(t *testing.T) {
		s := open(t)
		l := acquire(t, s, "s1", "a", longTTL)
		if err := s.Save(ctx, l, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, l, record("c1", "")); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, l); err != nil {
			t.Fatal(err)
		}
		_, err := s.Load(ctx, "s1")
		wantErr(t, "Load after Delete", err, ErrNotFound)
		if recs, err := s.Journal(ctx, "s1"); err != nil || len(recs) != 0 {
			t.Fatalf("Journal after Delete = %+v, %v; want none", recs, err)
		}
	})

	t.Run("AliasGetLeavesItTakeRemovesIt", func(t *testing.T) {
		s := open(t)
		if err := s.PutAlias(ctx, "resume-1", "s1", longTTL); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if got, err := s.GetAlias(ctx, "resume-1"); err != nil || got != "s1" {
				t.Fatalf("GetAlias = %q, %v; want s1", got, err)
			}
		}
		if got, err := s.TakeAlias(ctx, "resume-1"); err != nil || got != "s1" {
			t.Fatalf("TakeAlias = %q, %v; want s1", got, err)
		}
		_, err := s.TakeAlias(ctx, "resume-1")
		wantErr(t, "second TakeAlias", err, ErrNotFound)
		_, err = s.GetAlias(ctx, "resume-1")
		wantErr(t, "GetAlias after TakeAlias", err, ErrNotFound)
	})

	t.Run("ConcurrentTakeAliasHasOneWinner", func(t *testing.T) {
		s := open(t)
		if err := s.PutAlias(ctx, "handoff-1", "s1", longTTL); err != nil {
			t.Fatal(err)
		}
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = s.TakeAlias(ctx, "handoff-1") })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrNotFound):
				t.Fatalf("TakeAlias: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d takers got the alias, want 1", won)
		}
	})

	t.Run("PutAliasReplacesEarlierValue", func(t *testing.T) {
		s := open(t)
		for _, session := range []string{"s1", "s2"} {
			if err := s.PutAlias(ctx, "+15550100", session, longTTL); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.GetAlias(ctx, "+15550100"); err != nil || got != "s2" {
			t.Fatalf("GetAlias = %q, %v; want s2", got, err)
		}
	})

	t.Run("ExpiredAliasIsNotFound", func(t *testing.T) {
		s := open(t)
		if err := s.PutAlias(ctx, "resume-1", "s1", shortTTL); err != nil {
			t.Fatal(err)
		}
		if err := s.PutAlias(ctx, "resume-2", "s2", longTTL); err != nil {
			t.Fatal(err)
		}
		pass(s, shortTTL)
		eventually(t, "GetAlias of the expired alias", func() error {
			if _, err := s.GetAlias(ctx, "resume-1"); !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("GetAlias = %v, want ErrNotFound", err)
			}
			return nil
		})
		_, err := s.TakeAlias(ctx, "resume-1")
		wantErr(t, "TakeAlias of the expired alias", err, ErrNotFound)
		if got, err := s.TakeAlias(ctx, "resume-2"); err != nil || got != "s2" {
			t.Fatalf("TakeAlias of the live alias = %q, %v; want s2", got, err)
		}
	})

	t.Run("MissingAliasIsNotFound", func(t *testing.T) {
		s := open(t)
		_, err := s.GetAlias(ctx, "nothing")
		wantErr(t, "GetAlias", err, ErrNotFound)
		_, err = s.TakeAlias(ctx, "nothing")
		wantErr(t, "TakeAlias", err, ErrNotFound)
	})

	t.Run("JournalAdapterUnresolvedListsIntentsWithoutLaterOutcome", func(t *testing.T) {
		s := open(t)
		l := acquire(t, s, "s1", "a", longTTL)
		j := NewJournal(s, func() Lease { return l })
		other := NewJournal(s, func() Lease { return acquire(t, s, "s2", "a", longTTL) })
		steps := []struct {
			outcome bool
			r       tools.Record
		}{
			{true, record("early", tools.StateSucceeded)}, // an outcome before its intent resolves nothing
			{false, record("c1", "")},
			{false, record("c2", "")},
			{false, record("early", "")},
			{true, record("c2", tools.StateSucceeded)},
			{false, record("c3", "")},
			{true, record("c1", tools.StateCancelled)},
			{false, record("c4", "")},
		}
		for _, st := range steps {
			write := j.WriteIntent
			if st.outcome {
				write = j.WriteOutcome
			}
			if err := write(ctx, st.r); err != nil {
				t.Fatalf("write %+v: %v", st.r, err)
			}
		}
		if err := other.WriteIntent(ctx, tools.Record{Session: "s2", CallID: "elsewhere"}); err != nil {
			t.Fatal(err)
		}
		got, err := j.Unresolved(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		want := []tools.Record{record("early", ""), record("c3", ""), record("c4", "")}
		if !recordsEqual(got, want) {
			t.Fatalf("Unresolved =\n%+v\nwant\n%+v", got, want)
		}
	})

	t.Run("JournalAdapterRefusesMislabelledRecords", func(t *testing.T) {
		s := open(t)
		l := acquire(t, s, "s1", "a", longTTL)
		j := NewJournal(s, func() Lease { return l })
		if err := j.WriteIntent(ctx, record("c1", tools.StateRunning)); err == nil {
			t.Error("WriteIntent of a record with a state succeeded")
		}
		if err := j.WriteOutcome(ctx, record("c1", "")); err == nil {
			t.Error("WriteOutcome of a record without a state succeeded")
		}
		if recs, err := s.Journal(ctx, "s1"); err != nil || len(recs) != 0 {
			t.Fatalf("Journal = %+v, %v; want none", recs, err)
		}
	})

	t.Run("JournalAdapterWritesAfterTakeoverAreLeaseLost", func(t *testing.T) {
		s := open(t)
		lost, _ := takeOver(t, s, "s1")
		j := NewJournal(s, func() Lease { return lost })
		wantErr(t, "WriteIntent", j.WriteIntent(ctx, record("c1", "")), ErrLeaseLost)
		wantErr(t, "WriteOutcome", j.WriteOutcome(ctx, record("c1", tools.StateSucceeded)), ErrLeaseLost)
	})

	t.Run("CancelledContextIsRefused", func(t *testing.T) {
		s := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Acquire(cctx, "s1", "a", longTTL)
		wantErr(t, "Acquire", err, context.Canceled)
		_, err = s.Load(cctx, "s1")
		wantErr(t, "Load", err, context.Canceled)
	})
}

func recordsEqual(a, b []tools.Record) bool {
	return slices.EqualFunc(a, b, func(x, y tools.Record) bool {
		return x.Session == y.Session && x.CallID == y.CallID && x.Tool == y.Tool && x.Key == y.Key &&
			bytes.Equal(x.Args, y.Args) && x.State == y.State && x.Output == y.Output && x.IsError == y.IsError
	})
}
