package cheap

// HeapStats is the C heap's state, in bytes.
type HeapStats struct {
	Arenas uint64 // spanned by the allocator's arenas
	Mapped uint64 // in large blocks mapped apart from the arenas
	InUse  uint64 // allocated, in the arenas
	Free   uint64 // free, in the arenas: what Trim can hand back
}
