//go:build !cgo || !linux

package cheap

// Trim does nothing without cgo on Linux.
func Trim() {}

// Stats returns zeros without cgo on Linux.
func Stats() HeapStats { return HeapStats{} }

// Tune does nothing without cgo on Linux.
func Tune(arenas, mmapThreshold int) bool { return false }
