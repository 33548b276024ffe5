package engine

import (
	"testing"
	"time"
)

func TestVirtualClockRunsCallbacksInTimeOrder(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := NewVirtualClock(start)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+v.Now().Sub(start).String()) }
	}
	v.AfterFunc(300*time.Millisecond, at("c"))
	v.AfterFunc(100*time.Millisecond, at("a"))
	v.AfterFunc(100*time.Millisecond, at("b")) // same time: scheduling order
	stopped := v.AfterFunc(200*time.Millisecond, at("never"))
	v.AfterFunc(150*time.Millisecond, func() {
		got = append(got, "nested@"+v.Now().Sub(start).String())
		v.AfterFunc(0, at("zero")) // scheduled from a callback, due now
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop must report true once, then false")
	}
	v.Advance(250 * time.Millisecond)
	if now := v.Now().Sub(start); now != 250*time.Millisecond {
		t.Errorf("after Advance(250ms) the clock reads %v", now)
	}
	want := []string{"a@100ms", "b@100ms", "nested@150ms", "zero@150ms"}
	if len(got) != len(want) {
		t.Fatalf("ran %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ran %v; want %v", got, want)
		}
	}
	if next, ok := v.Next(); !ok || next.Sub(start) != 300*time.Millisecond {
		t.Errorf("Next = %v %v; want 300ms", next.Sub(start), ok)
	}
	if !v.RunNext() || got[len(got)-1] != "c@300ms" {
		t.Errorf("RunNext did not run c at 300ms: %v", got)
	}
	if v.RunNext() {
		t.Error("RunNext with nothing pending reported true")
	}
}
