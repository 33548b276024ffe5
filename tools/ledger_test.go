package tools

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

const ledgerSession = "sess-1"

// request records a mutation call of tool with args, failing the test on error.
func request(t *testing.T, l *Ledger, id, tool, args string) *Call {
	t.Helper()
	c, err := l.Request(id, tool, json.RawMessage(args), Mutation, Defer, 1)
	if err != nil {
		t.Fatalf("Request(%q): %v", id, err)
	}
	return c
}

// permutations returns every ordering of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := make([]int, 0, n)
			q = append(q, p[:i]...)
			q = append(q, n-1)
			q = append(q, p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

func TestPermutationsHelper(t *testing.T) {
	ps := permutations(3)
	if len(ps) != 6 {
		t.Fatalf("permutations(3) gave %d orderings, want 6", len(ps))
	}
	seen := map[string]bool{}
	for _, p := range ps {
		seen[fmt.Sprint(p)] = true
	}
	if len(seen) != 6 {
		t.Fatalf("permutations(3) has duplicates: %v", ps)
	}
}

func TestLedgerRequestRecordsCall(t *testing.T) {
	l := NewLedger(ledgerSession)
	args := json.RawMessage(`{"party":4}`)
	c, err := l.Request("c1", "book", args, Mutation, Cancel, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := Call{
		ID: "c1", Tool: "book", Args: args, Effect: Mutation, Policy: Cancel, Epoch: 7,
		Key:   IdempotencyKey(ledgerSession, "book", args),
		State: StateRequested,
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("Request recorded\n%+v\nwant\n%+v", *c, want)
	}
	if got, ok := l.Get("c1"); !ok || got != c {
		t.Errorf("Get(c1) = %p, %v; want the call Request returned (%p)", got, ok, c)
	}
	if l.Len() != 1 {
		t.Errorf("Len = %d, want 1", l.Len())
	}
}

func TestLedgerRequestCopiesArgs(t *testing.T) {
	l := NewLedger(ledgerSession)
	args := json.RawMessage(`{"party":4}`)
	c, err := l.Request("c1", "book", args, Mutation, Defer, 1)
	if err != nil {
		t.Fatal(err)
	}
	args[len(args)-2] = '9' // the caller reuses its buffer
	if string(c.Args) != `{"party":4}` {
		t.Errorf("the call's Args alias the caller's buffer: %s", c.Args)
	}
	if c.Key != IdempotencyKey(ledgerSession, "book", json.RawMessage(`{"party":4}`)) {
		t.Error("the key does not match the recorded Args")
	}
}

func TestLedgerRequestDuplicateIDErrors(t *testing.T) {
	l := NewLedger(ledgerSession)
	first := request(t, l, "c1", "book", `{"party":4}`)
	c, err := l.Request("c1", "cancel_booking", json.RawMessage(`{}`), Read, Complete, 2)
	if err == nil {
		t.Fatal("Request with a duplicate id succeeded")
	}
	if c != nil {
		t.Errorf("Request with a duplicate id returned a call: %+v", c)
	}
	if !strings.Contains(err.Error(), `"c1"`) {
		t.Errorf("error %q does not name the id", err)
	}
	if l.Len() != 1 {
		t.Errorf("Len = %d after duplicate, want 1", l.Len())
	}
	if got, _ := l.Get("c1"); got != first || got.Tool != "book" || got.Epoch != 1 {
		t.Errorf("duplicate Request changed the original call: %+v", got)
	}
}

func TestLedgerUnknownIDIsIgnored(t *testing.T) {
	l := NewLedger(ledgerSession)
	request(t, l, "c1", "book", `{}`)
	if l.Start("nope") || l.RequestCancel("nope") || l.Defer("nope") ||
		l.Finish("nope", Outcome{State: StateSucceeded}) || l.Reuse("nope", &Call{ID: "c1", State: StateSucceeded}) {
		t.Error("an operation on an unknown id reported a change")
	}
	l.Commit("nope")
	l.Resolve("nope", Outcome{State: StateSucceeded})
	if _, ok := l.Get("nope"); ok {
		t.Error("Get(nope) found a call")
	}
	if d, p := l.Decide("nope"); d != Run || p != nil {
		t.Errorf("Decide(nope) = %v, %v; want run, nil", d, p)
	}
	if l.Len() != 1 {
		t.Errorf("Len = %d, want 1", l.Len())
	}
}

// Reports about a call can arrive in any order; whatever the order, the
// call ends in exactly one terminal state: the one Finish reported.
func TestLedgerReportsInAnyOrder(t *testing.T) {
	finishes := []struct {
		name string
		o    Outcome
	}{
		// A mutation that completed despite a cancel request is succeeded.
		{"succeeded", Outcome{State: StateSucceeded, Output: "booked B-7"}},
		{"cancelled", Outcome{State: StateCancelled, Output: "stopped", IsError: true}},
	}
	const (
		start = iota
		cancel
		finish
	)
	for _, f := range finishes {
		for _, perm := range permutations(3) {
			names := make([]string, len(perm))
			for i, op := range perm {
				names[i] = [...]string{"start", "cancel", "finish_" + f.name}[op]
			}
			t.Run(strings.Join(names, ","), func(t *testing.T) {
				l := NewLedger(ledgerSession)
				c := request(t, l, "c1", "book", `{"party":4}`)
				var terminal State
				finished := 0
				pos := map[int]int{}
				for i, op := range perm {
					pos[op] = i
					var changed bool
					switch op {
					case start:
						changed = l.Start("c1")
						if want := terminal == ""; changed != want {
							t.Errorf("Start reported %v, want %v (terminal %q)", changed, want, terminal)
						}
					case cancel:
						changed = l.RequestCancel("c1")
						if want := terminal == ""; changed != want {
							t.Errorf("RequestCancel reported %v, want %v (terminal %q)", changed, want, terminal)
						}
					case finish:
						if l.Finish("c1", f.o) {
							finished++
						}
					}
					switch {
					case terminal != "" && c.State != terminal:
						t.Errorf("after %s the state left terminal %q for %q", names[i], terminal, c.State)
					case terminal == "" && c.State.Terminal():
						if op != finish {
							t.Errorf("%s made the call terminal", names[i])
						}
						terminal = c.State
					}
				}
				if finished != 1 {
					t.Errorf("Finish reported the call ending %d times, want 1", finished)
				}
				if got := c.Outcome(); got != f.o {
					t.Errorf("outcome = %+v, want %+v", got, f.o)
				}
				if c.State != f.o.State || c.Output != f.o.Output || c.IsError != f.o.IsError {
					t.Errorf("call ended %q %q %v, want %+v", c.State, c.Output, c.IsError, f.o)
				}
				if !c.Ran {
					t.Error("Ran is false though Start was reported")
				}
				if c.Late != nil {
					t.Errorf("Late = %+v, want nil: there was one Finish", *c.Late)
				}
				if want := pos[cancel] < pos[finish]; c.CancelRequested != want {
					t.Errorf("CancelRequested = %v, want %v", c.CancelRequested, want)
				}
			})
		}
	}
}

func TestLedgerStartAfterFinishStillRan(t *testing.T) {
	for _, st := range []State{StateSucceeded, StateFailed, StateCancelled, StateTimedOut} {
		t.Run(string(st), func(t *testing.T) {
			l := NewLedger(ledgerSession)
			c := request(t, l, "c1", "book", `{}`)
			l.Finish("c1", Outcome{State: st})
			if l.Start("c1") {
				t.Error("Start after Finish reported a change of state")
			}
			if !c.Ran {
				t.Error("Start after Finish did not set Ran")
			}
			if c.State != st {
				t.Errorf("state = %q, want %q", c.State, st)
			}
		})
	}
}

func TestLedgerStartTransitions(t *testing.T) {
	l := NewLedger(ledgerSession)
	c := request(t, l, "c1", "book", `{}`)
	if !l.Defer("c1") {
		t.Fatal("Defer from requested failed")
	}
	if !l.Start("c1") || c.State != StateRunning || !c.Ran {
		t.Errorf("Start from deferred: state %q ran %v, want running, true", c.State, c.Ran)
	}
	if !l.RequestCancel("c1") || !c.CancelRequested {
		t.Error("RequestCancel of a running call did not record the request")
	}
	if c.State != StateRunning {
		t.Errorf("RequestCancel changed the state to %q: it must end nothing by itself", c.State)
	}
	if l.RequestCancel("c1") {
		t.Error("a second RequestCancel reported a change")
	}
}

func TestLedgerLateFinish(t *testing.T) {
	timedOut := Outcome{State: StateTimedOut, Output: "error: timed out", IsError: true}
	tests := []struct {
		name        string
		first, then Outcome
		wantLate    *Outcome
	}{
		{"different state is kept as late", timedOut, Outcome{State: StateSucceeded, Output: "booked"},
			&Outcome{State: StateSucceeded, Output: "booked"}},
		{"different output is kept as late", Outcome{State: StateCancelled, Output: "interrupted"},
			Outcome{State: StateCancelled, Output: "stopped by body"},
			&Outcome{State: StateCancelled, Output: "stopped by body"}},
		{"identical repeat is not late", Outcome{State: StateSucceeded, Output: "booked"},
			Outcome{State: StateSucceeded, Output: "booked"}, nil},
		{"non-terminal report is ignored", timedOut, Outcome{State: StateRunning, Output: "halfway"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger(ledgerSession)
			c := request(t, l, "c1", "book", `{}`)
			l.Start("c1")
			if !l.Finish("c1", tt.first) {
				t.Fatal("first Finish did not end the call")
			}
			if l.Finish("c1", tt.then) {
				t.Error("second Finish reported ending the call again")
			}
			if c.State != tt.first.State || c.Output != tt.first.Output || c.IsError != tt.first.IsError {
				t.Errorf("terminal outcome changed to %q %q %v, want %+v", c.State, c.Output, c.IsError, tt.first)
			}
			if !reflect.DeepEqual(c.Late, tt.wantLate) {
				t.Errorf("Late = %+v, want %+v", c.Late, tt.wantLate)
			}
			wantOutcome := tt.first
			if tt.wantLate != nil {
				wantOutcome = *tt.wantLate
			}
			if got := c.Outcome(); got != wantOutcome {
				t.Errorf("Outcome() = %+v, want %+v", got, wantOutcome)
			}
		})
	}
}

func TestLedgerFinishIgnoresNonTerminalState(t *testing.T) {
	for _, st := range []State{StateRequested, StateDeferred, StateRunning, ""} {
		t.Run(string(st), func(t *testing.T) {
			l := NewLedger(ledgerSession)
			c := request(t, l, "c1", "book", `{}`)
			l.Start("c1")
			if l.Finish("c1", Outcome{State: st, Output: "nope", IsError: true}) {
				t.Error("Finish with a non-terminal state reported a change")
			}
			if c.State != StateRunning || c.Output != "" || c.IsError || c.Late != nil {
				t.Errorf("call changed: %+v", *c)
			}
		})
	}
}

func TestLedgerDeferOnlyFromRequested(t *testing.T) {
	tests := []struct {
		name  string
		setup func(l *Ledger)
		want  bool
		state State
	}{
		{"requested", func(*Ledger) {}, true, StateDeferred},
		{"already deferred", func(l *Ledger) { l.Defer("c1") }, false, StateDeferred},
		{"running", func(l *Ledger) { l.Start("c1") }, false, StateRunning},
		{"cancel requested but not started", func(l *Ledger) { l.RequestCancel("c1") }, true, StateDeferred},
		{"succeeded", func(l *Ledger) { l.Finish("c1", Outcome{State: StateSucceeded}) }, false, StateSucceeded},
		{"cancelled", func(l *Ledger) { l.Finish("c1", Outcome{State: StateCancelled}) }, false, StateCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger(ledgerSession)
			c := request(t, l, "c1", "book", `{}`)
			tt.setup(l)
			if got := l.Defer("c1"); got != tt.want {
				t.Errorf("Defer = %v, want %v", got, tt.want)
			}
			if c.State != tt.state {
				t.Errorf("state = %q, want %q", c.State, tt.state)
			}
		})
	}
}

func TestLedgerCommitOnlyTerminal(t *testing.T) {
	l := NewLedger(ledgerSession)
	c := request(t, l, "c1", "book", `{}`)
	l.Start("c1")
	l.Commit("c1")
	if c.Committed {
		t.Error("Commit of a running call marked it committed")
	}
	l.Finish("c1", Outcome{State: StateSucceeded})
	l.Commit("c1")
	if !c.Committed {
		t.Error("Commit of a finished call did not mark it committed")
	}
}

func TestLedgerReuse(t *testing.T) {
	l := NewLedger(ledgerSession)
	p := request(t, l, "p", "book", `{"party":4}`)
	l.Start("p")
	l.Finish("p", Outcome{State: StateTimedOut, Output: "error: timed out", IsError: true})
	l.Finish("p", Outcome{State: StateSucceeded, Output: "booked B-7"})
	c := request(t, l, "c", "book", `{"party":4}`)
	if !l.Reuse("c", p) {
		t.Fatal("Reuse failed")
	}
	want := Outcome{State: StateSucceeded, Output: "booked B-7"}
	if got := c.Outcome(); got != want {
		t.Errorf("reused outcome = %+v, want the prior's late outcome %+v", got, want)
	}
	if c.ReusedFrom != "p" {
		t.Errorf("ReusedFrom = %q, want p", c.ReusedFrom)
	}
	if c.Ran {
		t.Error("a reused call is marked as having run")
	}
	if l.Reuse("c", p) {
		t.Error("Reuse of a terminal call reported a change")
	}
}

func TestLedgerCallsAreCopiesInRequestOrder(t *testing.T) {
	l := NewLedger(ledgerSession)
	ids := []string{"z", "a", "m"}
	for _, id := range ids {
		request(t, l, id, "book", `{"id":"`+id+`"}`)
	}
	l.Start("z")
	l.Finish("z", Outcome{State: StateTimedOut, Output: "timed out"})
	l.Finish("z", Outcome{State: StateSucceeded, Output: "booked"})

	calls := l.Calls()
	var got []string
	for _, c := range calls {
		got = append(got, c.ID)
	}
	if !reflect.DeepEqual(got, ids) {
		t.Fatalf("Calls order = %v, want request order %v", got, ids)
	}

	calls[0].Late.Output = "tampered"
	calls[0].Late.State = StateFailed
	calls[0].State = StateFailed
	calls[1].Output = "tampered"

	z, _ := l.Get("z")
	if z.Late == nil || z.Late.Output != "booked" || z.Late.State != StateSucceeded {
		t.Errorf("mutating the returned Late changed the ledger: %+v", z.Late)
	}
	if z.State != StateTimedOut {
		t.Errorf("mutating the returned call changed the ledger state to %q", z.State)
	}
	if a, _ := l.Get("a"); a.Output != "" {
		t.Errorf("mutating the returned call changed the ledger output to %q", a.Output)
	}
	if again := l.Calls(); again[0].Late.Output != "booked" {
		t.Errorf("a later Calls() sees the mutation: %+v", again[0].Late)
	}
}

// Calls promises copies, and deep-copies Late so that callers cannot reach
// into the ledger; Args must not be shared either.
func TestLedgerCallsDoesNotAliasArgs(t *testing.T) {
	l := NewLedger(ledgerSession)
	request(t, l, "c1", "book", `{"party":4}`)
	calls := l.Calls()
	calls[0].Args[len(calls[0].Args)-2] = '9'
	if c, _ := l.Get("c1"); string(c.Args) != `{"party":4}` {
		t.Errorf("mutating Args returned by Calls changed the ledger's call to %s", c.Args)
	}
}

func TestDecisionString(t *testing.T) {
	for d, want := range map[Decision]string{Run: "run", Reuse: "reuse", Join: "join", Reconcile: "reconcile", Decision(9): "Decision(9)"} {
		if got := d.String(); got != want {
			t.Errorf("Decision(%d).String() = %q, want %q", int(d), got, want)
		}
	}
}

func TestDecide(t *testing.T) {
	const args = `{"date":"2025-05-01","party":4}`
	succeeded := Outcome{State: StateSucceeded, Output: "booked B-7"}
	timedOut := Outcome{State: StateTimedOut, Output: "error: timed out", IsError: true}
	tests := []struct {
		name string
		// setup records the earlier calls; the call decided is then
		// requested as "new" with tool "book" and args newArgs (args
		// when empty).
		setup     func(t *testing.T, l *Ledger)
		newArgs   string
		want      Decision
		wantPrior string
	}{
		{"no prior runs", func(*testing.T, *Ledger) {}, "", Run, ""},
		{"prior succeeded is reused", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
			l.Finish("p", succeeded)
		}, "", Reuse, "p"},
		{"prior succeeded with reordered spaced args is reused", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
			l.Finish("p", succeeded)
		}, ` { "party" : 4.0, "date" : "2025-05-01" } `, Reuse, "p"},
		{"prior that succeeded late after timing out is reused", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
			l.Finish("p", timedOut)
			l.Finish("p", succeeded)
		}, "", Reuse, "p"},
		{"prior running is joined", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
		}, "", Join, "p"},
		{"prior running with a cancel request is joined", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
			l.RequestCancel("p")
		}, "", Join, "p"},
		{"prior timed out after running is reconciled", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
			l.Finish("p", timedOut)
		}, "", Reconcile, "p"},
		{"prior timed out after running then failed late runs", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
			l.Finish("p", timedOut)
			l.Finish("p", Outcome{State: StateFailed, Output: "no table", IsError: true})
		}, "", Run, ""},
		{"prior timed out without running runs", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Finish("p", timedOut)
		}, "", Run, ""},
		{"prior failed runs", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
			l.Finish("p", Outcome{State: StateFailed, Output: "no table", IsError: true})
		}, "", Run, ""},
		{"prior cancelled without running runs", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Defer("p")
			l.RequestCancel("p")
			l.Finish("p", Outcome{State: StateCancelled, Output: "not executed", IsError: true})
		}, "", Run, ""},
		{"prior restored with unknown outcome is reconciled", func(t *testing.T, l *Ledger) {
			l.Restore([]Record{{Session: ledgerSession, CallID: "p", Tool: "book", Args: json.RawMessage(args)}})
		}, "", Reconcile, "p"},
		{"success wins over running and unknown", func(t *testing.T, l *Ledger) {
			request(t, l, "unknown", "book", args)
			l.Start("unknown")
			l.Finish("unknown", timedOut)
			request(t, l, "running", "book", args)
			l.Start("running")
			request(t, l, "done", "book", args)
			l.Start("done")
			l.Finish("done", succeeded)
		}, "", Reuse, "done"},
		{"running wins over unknown", func(t *testing.T, l *Ledger) {
			request(t, l, "unknown", "book", args)
			l.Start("unknown")
			l.Finish("unknown", timedOut)
			request(t, l, "running", "book", args)
			l.Start("running")
		}, "", Join, "running"},
		{"failures are skipped for a later success", func(t *testing.T, l *Ledger) {
			request(t, l, "f1", "book", args)
			l.Start("f1")
			l.Finish("f1", Outcome{State: StateFailed})
			request(t, l, "ok", "book", args)
			l.Start("ok")
			l.Finish("ok", succeeded)
		}, "", Reuse, "ok"},
		{"succeeded call of a different tool does not interact", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "cancel_booking", args)
			l.Start("p")
			l.Finish("p", succeeded)
		}, "", Run, ""},
		{"running call of a different tool does not interact", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "cancel_booking", args)
			l.Start("p")
		}, "", Run, ""},
		{"succeeded call with different args does not interact", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", `{"date":"2025-05-01","party":5}`)
			l.Start("p")
			l.Finish("p", succeeded)
		}, "", Run, ""},
		{"unknown call with different args does not interact", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", `{"date":"2025-05-02","party":4}`)
			l.Start("p")
			l.Finish("p", timedOut)
		}, "", Run, ""},
		{"a call given an outcome by reuse is not a prior", func(t *testing.T, l *Ledger) {
			// r was given a success it did not produce; the call it was
			// reused from is not in this ledger, so nothing here did it.
			request(t, l, "r", "book", args)
			l.Reuse("r", &Call{ID: "elsewhere", State: StateSucceeded, Output: "booked"})
		}, "", Run, ""},
		{"a reused call does not outlive its prior's failure", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", args)
			l.Start("p")
			l.Finish("p", timedOut)
			l.Resolve("p", succeeded)
			request(t, l, "r", "book", args)
			l.Reuse("r", mustGet(t, l, "p"))
			// Reconciliation finds out after all that p did not take effect.
			l.Resolve("p", Outcome{State: StateFailed, IsError: true})
		}, "", Run, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger(ledgerSession)
			tt.setup(t, l)
			a := tt.newArgs
			if a == "" {
				a = args
			}
			request(t, l, "new", "book", a)
			d, prior := l.Decide("new")
			if d != tt.want {
				t.Errorf("Decide = %v, want %v", d, tt.want)
			}
			switch {
			case tt.wantPrior == "" && prior != nil:
				t.Errorf("Decide returned prior %q, want none", prior.ID)
			case tt.wantPrior != "" && prior == nil:
				t.Errorf("Decide returned no prior, want %q", tt.wantPrior)
			case tt.wantPrior != "":
				if p, _ := l.Get(tt.wantPrior); prior != p {
					t.Errorf("Decide returned prior %q (%p), want %q (%p)", prior.ID, prior, tt.wantPrior, p)
				}
			}
		})
	}
}

func mustGet(t *testing.T, l *Ledger, id string) *Call {
	t.Helper()
	c, ok := l.Get(id)
	if !ok {
		t.Fatalf("no call %q", id)
	}
	return c
}

func TestDecideIgnoresTheCallItself(t *testing.T) {
	l := NewLedger(ledgerSession)
	request(t, l, "c1", "book", `{}`)
	l.Start("c1")
	if d, p := l.Decide("c1"); d != Run || p != nil {
		t.Errorf("Decide of a running call against itself = %v, %v; want run, nil", d, p)
	}
	l.Finish("c1", Outcome{State: StateSucceeded})
	if d, p := l.Decide("c1"); d != Run || p != nil {
		t.Errorf("Decide of a succeeded call against itself = %v, %v; want run, nil", d, p)
	}
}

func TestResolveChangesDecision(t *testing.T) {
	tests := []struct {
		name     string
		resolved Outcome
		want     Decision
	}{
		{"resolved succeeded is reused", Outcome{State: StateSucceeded, Output: "booked B-7"}, Reuse},
		{"resolved failed runs", Outcome{State: StateFailed, Output: "error: it did not take effect", IsError: true}, Run},
	}
	priors := []struct {
		name  string
		setup func(t *testing.T, l *Ledger)
		state State
	}{
		{"timed out", func(t *testing.T, l *Ledger) {
			request(t, l, "p", "book", `{"party":4}`)
			l.Start("p")
			l.Finish("p", Outcome{State: StateTimedOut, Output: "error: timed out", IsError: true})
		}, StateTimedOut},
		{"restored", func(t *testing.T, l *Ledger) {
			l.Restore([]Record{{Session: ledgerSession, CallID: "p", Tool: "book", Args: json.RawMessage(`{"party":4}`)}})
		}, StateUnknown},
	}
	for _, pr := range priors {
		for _, tt := range tests {
			t.Run(pr.name+"/"+tt.name, func(t *testing.T) {
				l := NewLedger(ledgerSession)
				pr.setup(t, l)
				request(t, l, "new", "book", `{"party":4}`)
				if d, p := l.Decide("new"); d != Reconcile || p == nil || p.ID != "p" {
					t.Fatalf("before Resolve: Decide = %v, %v; want reconcile, p", d, p)
				}
				l.Resolve("p", tt.resolved)
				d, prior := l.Decide("new")
				if d != tt.want {
					t.Errorf("after Resolve: Decide = %v, want %v", d, tt.want)
				}
				p := mustGet(t, l, "p")
				if p.State != pr.state {
					t.Errorf("Resolve changed the prior's terminal state to %q, want %q", p.State, pr.state)
				}
				if got := p.Outcome(); got != tt.resolved {
					t.Errorf("prior's Outcome() = %+v, want the resolved %+v", got, tt.resolved)
				}
				if tt.want == Reuse {
					if prior != p {
						t.Fatalf("Reuse prior = %v, want p", prior)
					}
					l.Reuse("new", prior)
					n := mustGet(t, l, "new")
					if n.State != StateSucceeded || n.Output != tt.resolved.Output || n.ReusedFrom != "p" {
						t.Errorf("reused call = %q %q from %q; want succeeded %q from p", n.State, n.Output, n.ReusedFrom, tt.resolved.Output)
					}
				}
			})
		}
	}
}

func TestRestore(t *testing.T) {
	l := NewLedger(ledgerSession)
	recs := []Record{
		{Session: ledgerSession, CallID: "r1", Tool: "book", Key: IdempotencyKey(ledgerSession, "book", json.RawMessage(`{"party":4}`)), Args: json.RawMessage(`{"party":4}`)},
		{Session: ledgerSession, CallID: "r2", Tool: "charge", Args: json.RawMessage(`{"amount":10}`)},
	}
	l.Restore(recs)
	if l.Len() != 2 {
		t.Fatalf("Len = %d after restoring 2 records", l.Len())
	}
	for i, c := range l.Calls() {
		r := recs[i]
		if c.ID != r.CallID || c.Tool != r.Tool || string(c.Args) != string(r.Args) {
			t.Errorf("restored call %d = %s %s %s, want %s %s %s", i, c.ID, c.Tool, c.Args, r.CallID, r.Tool, r.Args)
		}
		if c.State != StateUnknown || !c.State.Terminal() {
			t.Errorf("%s: state = %q, want unknown", c.ID, c.State)
		}
		if !c.Ran {
			t.Errorf("%s: Ran = false; a restored intent may have run", c.ID)
		}
		if !c.Committed {
			t.Errorf("%s: Committed = false", c.ID)
		}
		if c.Effect != Mutation || c.Policy != Defer {
			t.Errorf("%s: effect %q policy %q, want mutation defer", c.ID, c.Effect, c.Policy)
		}
		if !c.IsError || !strings.Contains(c.Output, "unknown") {
			t.Errorf("%s: output %q (error %v), want an error saying the outcome is unknown", c.ID, c.Output, c.IsError)
		}
		if want := IdempotencyKey(ledgerSession, r.Tool, r.Args); c.Key != want {
			t.Errorf("%s: key %q, want %q", c.ID, c.Key, want)
		}
	}

	// A repeat of a restored call is reconciled, never run blindly.
	request(t, l, "again", "charge", `{ "amount": 10 }`)
	if d, p := l.Decide("again"); d != Reconcile || p == nil || p.ID != "r2" {
		t.Errorf("Decide on a repeat of a restored call = %v, %v; want reconcile, r2", d, p)
	}
}

func TestRestoreKeepsRecordKey(t *testing.T) {
	l := NewLedger(ledgerSession)
	l.Restore([]Record{{CallID: "r1", Tool: "book", Key: "custom-key", Args: json.RawMessage(`{}`)}})
	if c := mustGet(t, l, "r1"); c.Key != "custom-key" {
		t.Errorf("restored key = %q, want the record's", c.Key)
	}
}

func TestRestoreSkipsKnownIDs(t *testing.T) {
	l := NewLedger(ledgerSession)
	c := request(t, l, "c1", "book", `{"party":4}`)
	l.Start("c1")
	l.Finish("c1", Outcome{State: StateSucceeded, Output: "booked"})
	l.Restore([]Record{
		{CallID: "c1", Tool: "other", Args: json.RawMessage(`{"x":1}`)},
		{CallID: "r1", Tool: "book", Args: json.RawMessage(`{"party":5}`)},
		{CallID: "r1", Tool: "book", Args: json.RawMessage(`{"party":6}`)},
	})
	if l.Len() != 2 {
		t.Errorf("Len = %d, want 2 (c1 and r1 once)", l.Len())
	}
	if got := mustGet(t, l, "c1"); got != c || c.State != StateSucceeded || c.Tool != "book" || c.Output != "booked" {
		t.Errorf("Restore changed a known call: %+v", *got)
	}
	if r := mustGet(t, l, "r1"); string(r.Args) != `{"party":5}` {
		t.Errorf("r1 args = %s, want the first record's", r.Args)
	}
	if _, err := l.Request("r1", "book", nil, Mutation, Defer, 1); err == nil {
		t.Error("Request reused a restored id")
	}
}

func TestRestoreCopiesArgs(t *testing.T) {
	l := NewLedger(ledgerSession)
	args := json.RawMessage(`{"party":4}`)
	l.Restore([]Record{{CallID: "r1", Tool: "book", Args: args}})
	args[len(args)-2] = '9'
	if c := mustGet(t, l, "r1"); string(c.Args) != `{"party":4}` {
		t.Errorf("restored Args alias the record's: %s", c.Args)
	}
}

// The write-ahead journal and the ledger together: after a crash, an intent
// without an outcome comes back as unknown, and its repeat is reconciled.
func TestRestoreFromJournal(t *testing.T) {
	ctx := context.Background()
	j := NewMemoryJournal()
	key := func(args string) string { return IdempotencyKey(ledgerSession, "book", json.RawMessage(args)) }
	for _, r := range []Record{
		{Session: ledgerSession, CallID: "done", Tool: "book", Key: key(`{"party":2}`), Args: json.RawMessage(`{"party":2}`)},
		{Session: ledgerSession, CallID: "cut", Tool: "book", Key: key(`{"party":4}`), Args: json.RawMessage(`{"party":4}`)},
	} {
		if err := j.WriteIntent(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.WriteOutcome(ctx, Record{Session: ledgerSession, CallID: "done", Tool: "book", State: StateSucceeded}); err != nil {
		t.Fatal(err)
	}
	recs, err := j.Unresolved(ctx, ledgerSession)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLedger(ledgerSession)
	l.Restore(recs)
	if l.Len() != 1 {
		t.Fatalf("restored %d calls, want only the unresolved one", l.Len())
	}
	request(t, l, "again", "book", `{"party":4}`)
	if d, p := l.Decide("again"); d != Reconcile || p == nil || p.ID != "cut" {
		t.Errorf("Decide = %v, %v; want reconcile, cut", d, p)
	}
	request(t, l, "other", "book", `{"party":2}`)
	if d, _ := l.Decide("other"); d != Run {
		t.Errorf("Decide for a call whose outcome was journaled = %v, want run", d)
	}
}

func TestIdempotencyKeyEqual(t *testing.T) {
	tests := []struct {
		name string
		a, b string
	}{
		{"key order", `{"a":1,"b":2}`, `{"b":2,"a":1}`},
		{"whitespace", `{"a":1,"b":[1,2]}`, " {\n\t\"a\" : 1 ,\r\n \"b\" : [ 1 , 2 ] } \n"},
		{"2 and 2.0", `{"n":2}`, `{"n":2.0}`},
		{"2 and 2e0", `{"n":2}`, `{"n":2e0}`},
		{"2.0 and 20E-1", `{"n":2.0}`, `{"n":20E-1}`},
		{"0.5 and 5e-1", `{"n":0.5}`, `{"n":5e-1}`},
		{"large float spellings", `{"n":1e21}`, `{"n":1000000000000000000000}`},
		{"100 and 1e2", `{"n":100}`, `{"n":1E+2}`},
		{"0.001 and 1e-3", `{"n":0.001}`, `{"n":1e-3}`},
		{"small decimal spellings", `{"n":0.00000015}`, `{"n":1.5e-7}`},
		{"negative decimal spellings", `{"n":-0.50}`, `{"n":-5e-1}`},
		{"out of float64 range spellings", `{"n":1e400}`, `{"n":10E399}`},
		{"nested objects", `{"x":{"b":1,"a":{"d":2,"c":3}}}`, `{"x":{"a":{"c":3,"d":2},"b":1}}`},
		{"objects in arrays", `{"x":[{"b":1,"a":2},{"d":[3.0,{"f":1,"e":2}]}]}`, `{"x":[{"a":2,"b":1},{"d":[3,{"e":2,"f":1}]}]}`},
		{"empty args and {}", ``, `{}`},
		{"blank args and {}", " \n\t", `{}`},
		{"spaced empty object and {}", `{ }`, `{}`},
		{"unicode escape", `{"name":"\u00e9"}`, `{"name":"é"}`},
		{"escaped slash", `{"url":"a\/b"}`, `{"url":"a/b"}`},
		{"escaped key", `{"\u0061":1}`, `{"a":1}`},
		{"duplicate key, last wins", `{"a":1,"a":2}`, `{"a":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka := IdempotencyKey(ledgerSession, "book", json.RawMessage(tt.a))
			kb := IdempotencyKey(ledgerSession, "book", json.RawMessage(tt.b))
			if ka != kb {
				t.Errorf("keys differ for %s (%s) and %s (%s)", tt.a, Canonical(json.RawMessage(tt.a)), tt.b, Canonical(json.RawMessage(tt.b)))
			}
		})
	}
	if IdempotencyKey("s", "t", nil) != IdempotencyKey("s", "t", json.RawMessage(`{}`)) {
		t.Error("nil args and {} give different keys")
	}
}

func TestIdempotencyKeyDiffers(t *testing.T) {
	type in struct{ session, tool, args string }
	base := in{"s1", "book", `{"a":1,"b":[1,2],"c":{"d":"x"}}`}
	tests := []struct {
		name  string
		other in
	}{
		{"session", in{"s2", base.tool, base.args}},
		{"tool", in{base.session, "cancel", base.args}},
		{"top-level value", in{base.session, base.tool, `{"a":2,"b":[1,2],"c":{"d":"x"}}`}},
		{"number and string", in{base.session, base.tool, `{"a":"1","b":[1,2],"c":{"d":"x"}}`}},
		{"array order", in{base.session, base.tool, `{"a":1,"b":[2,1],"c":{"d":"x"}}`}},
		{"nested value", in{base.session, base.tool, `{"a":1,"b":[1,2],"c":{"d":"y"}}`}},
		{"extra key", in{base.session, base.tool, `{"a":1,"b":[1,2],"c":{"d":"x"},"e":null}`}},
		{"missing key", in{base.session, base.tool, `{"a":1,"b":[1,2]}`}},
		{"empty args", in{base.session, base.tool, ``}},
		{"fraction", in{base.session, base.tool, `{"a":1.5,"b":[1,2],"c":{"d":"x"}}`}},
		// The separator keeps the session/tool boundary: "s1"+"book" must
		// not be confused with "s1b"+"ook".
		{"boundary between session and tool", in{"s1b", "ook", base.args}},
	}
	kb := IdempotencyKey(base.session, base.tool, json.RawMessage(base.args))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ko := IdempotencyKey(tt.other.session, tt.other.tool, json.RawMessage(tt.other.args))
			if ko == kb {
				t.Errorf("same key for %+v and %+v", base, tt.other)
			}
		})
	}
}

// Numbers are compared as numbers, but two different numbers must not be
// confused: ids beyond 2^53 and long decimals lose precision as float64, and
// a collision here makes the ledger reuse one booking's outcome for another.
func TestIdempotencyKeyDistinguishesNumbersBeyondFloat64(t *testing.T) {
	pairs := [][2]string{
		{`{"order":9007199254740993}`, `{"order":9007199254740992}`},
		{`{"order":1234567890123456789}`, `{"order":1234567890123456788}`},
		{`{"order":123456789012345678901234567}`, `{"order":123456789012345678901234568}`},
		{`{"amount":0.1}`, `{"amount":0.10000000000000001}`},
		{`{"n":1e400}`, `{"n":1e401}`},
	}
	for _, p := range pairs {
		ka := IdempotencyKey(ledgerSession, "refund", json.RawMessage(p[0]))
		kb := IdempotencyKey(ledgerSession, "refund", json.RawMessage(p[1]))
		if ka == kb {
			t.Errorf("%s and %s get the same key (both canonical %s)", p[0], p[1], Canonical(json.RawMessage(p[0])))
		}
	}
}

func TestIdempotencyKeyFormat(t *testing.T) {
	k := IdempotencyKey("s", "t", json.RawMessage(`{"a":1}`))
	if len(k) != 32 {
		t.Errorf("key %q has length %d, want 32 hex digits", k, len(k))
	}
	if _, err := hex.DecodeString(k); err != nil {
		t.Errorf("key %q is not hex: %v", k, err)
	}
	if k != IdempotencyKey("s", "t", json.RawMessage(`{"a":1}`)) {
		t.Error("key is not deterministic")
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{}`},
		{`   `, `{}`},
		{`{}`, `{}`},
		{` {"b" : 1, "a" : 2} `, `{"a":2,"b":1}`},
		{`{"n":2.0,"m":2e0,"k":-0.50,"big":1e21}`, `{"big":1e+21,"k":-0.5,"m":2,"n":2}`},
		{`{"a":[3,{"z":null,"y":true}],"b":"x"}`, `{"a":[3,{"y":true,"z":null}],"b":"x"}`},
		{`[1, 2.0, "3"]`, `[1,2,"3"]`},
		{`"just a string"`, `"just a string"`},
		{`null`, `null`},
	}
	for _, tt := range tests {
		if got := string(Canonical(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("Canonical(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestCanonicalInvalidJSON(t *testing.T) {
	garbage := []string{
		`{"a":`,
		`not json`,
		`{"a":1,}`,
		`{'a':1}`,
		`}{`,
		"\x00\xff",
		`[1,2`,
	}
	keys := map[string]string{}
	for _, g := range garbage {
		var k1, k2 string
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("IdempotencyKey(%q) panicked: %v", g, p)
				}
			}()
			k1 = IdempotencyKey(ledgerSession, "book", json.RawMessage(g))
			k2 = IdempotencyKey(ledgerSession, "book", json.RawMessage(g))
		}()
		if k1 != k2 {
			t.Errorf("identical garbage %q gives different keys", g)
		}
		if k := IdempotencyKey(ledgerSession, "book", json.RawMessage("  "+g+"\n")); k != k1 {
			t.Errorf("garbage %q with surrounding space gives a different key", g)
		}
		if prev, dup := keys[k1]; dup {
			t.Errorf("different garbage %q and %q give the same key", prev, g)
		}
		keys[k1] = g
		if k1 == IdempotencyKey(ledgerSession, "book", json.RawMessage(`{}`)) {
			t.Errorf("garbage %q has the key of {}", g)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"b":1,"a":[2.0,{"d":null,"c":"x"}]}`, `{"n":1e21}`, `{"a":`, `[1e400]`, `"\u00e9"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := Canonical(json.RawMessage(s))
		if !json.Valid([]byte(s)) {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("Canonical(%q) = %q, not valid JSON", s, c)
		}
		if again := Canonical(c); string(again) != string(c) {
			t.Fatalf("Canonical is not idempotent: %q -> %q -> %q", s, c, again)
		}
	})
}
