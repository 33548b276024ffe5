package tools

import (
	"context"
	"slices"
	"testing"
)

func TestSet(t *testing.T) {
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	a, b, c := MustNew("a", "A", noop), MustNew("b", "B", noop), MustNew("c", "C", noop)
	s, err := NewSet(c, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Errorf("Len = %d", s.Len())
	}
	if got, ok := s.Lookup("a"); !ok || got != a {
		t.Errorf("Lookup(a) = %v, %v", got, ok)
	}
	if _, ok := s.Lookup("nope"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
	var names []string
	for _, sp := range s.Specs() {
		names = append(names, sp.Name+":"+sp.Description)
	}
	if want := []string{"c:C", "a:A", "b:B"}; !slices.Equal(names, want) {
		t.Errorf("Specs = %v, want %v (the order given)", names, want)
	}
	all := s.All()
	if !slices.Equal(all, []*Tool{c, a, b}) {
		t.Errorf("All = %v", all)
	}
	all[0] = nil
	if s.All()[0] != c {
		t.Error("modifying All's result changed the set")
	}
}

func TestSetRejects(t *testing.T) {
	noop := func(context.Context, struct{}) (string, error) { return "", nil }
	if _, err := NewSet(MustNew("a", "", noop), MustNew("b", "", noop), MustNew("a", "other", noop)); err == nil {
		t.Error("duplicate names accepted")
	}
	if _, err := NewSet(MustNew("a", "", noop), nil); err == nil {
		t.Error("nil tool accepted")
	}
}

func TestSetEmpty(t *testing.T) {
	for _, s := range []*Set{nil, must(NewSet())} {
		if s.Len() != 0 || len(s.Specs()) != 0 || len(s.All()) != 0 {
			t.Errorf("%v is not empty", s)
		}
		if _, ok := s.Lookup("a"); ok {
			t.Error("Lookup in an empty set succeeded")
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
