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

// TestTuneLeavesWhatTheEnvironmentSets checks that an operator's
// MALLOC_ARENA_MAX or MALLOC_MMAP_THRESHOLD_ wins over Tune: with both set
// there is nothing to set.
func TestTuneLeavesWhatTheEnvironmentSets(t *testing.T) {
	if Stats() == (HeapStats{}) {
		t.Skip("no glibc allocator without cgo")
	}
	if !Tune(2, 64<<10) {
		t.Fatal("glibc refused two arenas and a 64 KiB mmap threshold")
	}
	t.Setenv("MALLOC_ARENA_MAX", "4")
	t.Setenv("MALLOC_MMAP_THRESHOLD_", "131072")
	if Tune(2, 64<<10) {
		t.Error("Tune set the allocator although the environment had")
	}
}
