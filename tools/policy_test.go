package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func noopTool(context.Context, struct{}) (string, error) { return "", nil }

func TestDefaultPolicy(t *testing.T) {
	tests := []struct {
		effect Effect
		want   Policy
	}{
		{Read, Complete},
		{Mutation, Defer},
	}
	for _, tt := range tests {
		if got := DefaultPolicy(tt.effect); got != tt.want {
			t.Errorf("DefaultPolicy(%q) = %q, want %q", tt.effect, got, tt.want)
		}
		tool := MustNew("x", "", noopTool, WithEffect(tt.effect))
		if got := tool.Policy(); got != tt.want {
			t.Errorf("tool with effect %q has policy %q, want %q", tt.effect, got, tt.want)
		}
	}
	if got := MustNew("x", "", noopTool).Policy(); got != Defer {
		t.Errorf("tool with the default effect (mutation) has policy %q, want defer", got)
	}
}

func TestWithInterruptPolicyOverrides(t *testing.T) {
	for _, effect := range []Effect{Read, Mutation} {
		for _, p := range []Policy{Complete, Cancel, Defer, Detach} {
			t.Run(string(effect)+"/"+string(p), func(t *testing.T) {
				tool, err := New("x", "", noopTool, WithEffect(effect), WithInterruptPolicy(p))
				if err != nil {
					t.Fatal(err)
				}
				if tool.Policy() != p {
					t.Errorf("Policy() = %q, want %q", tool.Policy(), p)
				}
				raw, err := NewRaw("x", "", json.RawMessage(`{"type":"object"}`),
					HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "", nil }),
					WithEffect(effect), WithInterruptPolicy(p))
				if err != nil {
					t.Fatal(err)
				}
				if raw.Policy() != p {
					t.Errorf("NewRaw: Policy() = %q, want %q", raw.Policy(), p)
				}
			})
		}
	}
}

func TestWithInterruptPolicyLastWins(t *testing.T) {
	tool := MustNew("x", "", noopTool, WithInterruptPolicy(Cancel), WithInterruptPolicy(Detach))
	if tool.Policy() != Detach {
		t.Errorf("Policy() = %q, want the last option's, detach", tool.Policy())
	}
}

func TestUnknownPolicyFailsConstruction(t *testing.T) {
	for _, p := range []Policy{"later", "Complete", "cancelled", " defer"} {
		t.Run(string(p), func(t *testing.T) {
			tool, err := New("book_table", "", noopTool, WithInterruptPolicy(p))
			if err == nil {
				t.Fatalf("New with policy %q succeeded: %v", p, tool.Policy())
			}
			if tool != nil {
				t.Error("New returned a tool with its error")
			}
			for _, want := range []string{`"book_table"`, "unknown interrupt policy", `"` + string(p) + `"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %s", err, want)
				}
			}
			_, err = NewRaw("book_table", "", json.RawMessage(`{"type":"object"}`),
				HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "", nil }),
				WithInterruptPolicy(p))
			if err == nil || !strings.Contains(err.Error(), "unknown interrupt policy") {
				t.Errorf("NewRaw with policy %q: err = %v", p, err)
			}
		})
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustNew with an unknown policy did not panic")
			}
		}()
		MustNew("x", "", noopTool, WithInterruptPolicy("later"))
	}()
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in   string
		want Policy
		ok   bool
	}{
		{"complete", Complete, true},
		{"cancel", Cancel, true},
		{"defer", Defer, true},
		{"detach", Detach, true},
		{"", "", false},
		{"Complete", "", false},
		{"cancelled", "", false},
		{" defer", "", false},
		{"later", "", false},
	}
	for _, tt := range tests {
		got, ok := ParsePolicy(tt.in)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok {
			// A parsed policy is accepted at construction.
			if _, err := New("x", "", noopTool, WithInterruptPolicy(got)); err != nil {
				t.Errorf("New rejects parsed policy %q: %v", got, err)
			}
		}
	}
}

func TestDedupe(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want bool
	}{
		{"mutation by default", nil, true},
		{"explicit mutation", []Option{WithEffect(Mutation)}, true},
		{"read", []Option{WithEffect(Read)}, false},
		{"mutation turned off", []Option{WithDedupe(false)}, false},
		{"mutation turned off then on", []Option{WithDedupe(false), WithDedupe(true)}, true},
		{"mutation turned on explicitly", []Option{WithEffect(Mutation), WithDedupe(true)}, true},
		{"read turned on stays off", []Option{WithEffect(Read), WithDedupe(true)}, false},
		{"mutation with another policy", []Option{WithInterruptPolicy(Detach)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MustNew("x", "", noopTool, tt.opts...).Dedupe(); got != tt.want {
				t.Errorf("Dedupe() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestWithReconcile(t *testing.T) {
	if r := MustNew("x", "", noopTool).Reconciler(); r != nil {
		t.Error("a tool built without WithReconcile has a Reconciler")
	}
	errBoom := errors.New("boom")
	var gotCall CallInfo
	var gotArgs string
	hook := func(ctx context.Context, call CallInfo, args json.RawMessage) (Reconciliation, error) {
		gotCall, gotArgs = call, string(args)
		return Reconciliation{Done: true, Output: "booked B-7"}, errBoom
	}
	tool := MustNew("x", "", noopTool, WithReconcile(hook))
	r := tool.Reconciler()
	if r == nil {
		t.Fatal("Reconciler() = nil after WithReconcile")
	}
	ci := CallInfo{ID: "c1", Name: "x", Epoch: 3, IdempotencyKey: "k"}
	rec, err := r(context.Background(), ci, json.RawMessage(`{"party":4}`))
	if !errors.Is(err, errBoom) || rec != (Reconciliation{Done: true, Output: "booked B-7"}) {
		t.Errorf("Reconciler() returned %+v, %v; not the hook given", rec, err)
	}
	if gotCall != ci || gotArgs != `{"party":4}` {
		t.Errorf("hook saw %+v %s", gotCall, gotArgs)
	}
	if r := MustNew("x", "", noopTool, WithReconcile(hook), WithReconcile(nil)).Reconciler(); r != nil {
		t.Error("WithReconcile(nil) did not clear the hook")
	}
}
