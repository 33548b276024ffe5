package cheap

import "testing"

// TestTrimKeepsWhatIsInUse checks that Stats adds up and that Trim leaves
// the memory in use alone.
func TestTrimKeepsWhatIsInUse(t *testing.T) {
	s := Stats()
	if s == (HeapStats{}) {
		t.Skip("no C heap statistics without cgo on glibc")
	}
	if s.InUse+s.Free > s.Arenas+s.Mapped+1<<20 {
		t.Errorf("in use %d + free %d exceed the arenas %d and mapped blocks %d", s.InUse, s.Free, s.Arenas, s.Mapped)
	}
	Trim()
	after := Stats()
	if after.InUse > s.InUse+1<<20 || after.InUse+1<<20 < s.InUse {
		t.Errorf("in use %d before Trim, %d after: Trim frees only what is free", s.InUse, after.InUse)
	}
}
