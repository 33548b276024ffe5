//go:build cgo && linux

package cheap

/*
#include <malloc.h>
#include <features.h>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
static void cheap_stats(size_t *arena, size_t *mmapped, size_t *inuse, size_t *free_) {
	struct mallinfo2 mi = mallinfo2();
	*arena = mi.arena;
	*mmapped = mi.hblkhd;
	*inuse = mi.uordblks;
	*free_ = mi.fordblks;
}
static int cheap_trim(void) { return malloc_trim(0); }
static int cheap_tune(int arenas, int mmap_threshold) {
	int ok = 1;
	if (arenas > 0) ok &= mallopt(M_ARENA_MAX, arenas);
	if (mmap_threshold > 0) ok &= mallopt(M_MMAP_THRESHOLD, mmap_threshold);
	return ok;
}
#else
static void cheap_stats(size_t *arena, size_t *mmapped, size_t *inuse, size_t *free_) {
	*arena = *mmapped = *inuse = *free_ = 0;
}
static int cheap_trim(void) { return 0; }
static int cheap_tune(int arenas, int mmap_threshold) { return 0; }
#endif
*/
import "C"

import "os"

// Trim hands the free memory of every arena of the C heap back to the
// system (malloc_trim). It walks the whole heap: call it after freeing
// much, not per allocation.
func Trim() { C.cheap_trim() }

// Stats returns the C heap's state: the bytes its arenas span and the
// large blocks mapped apart from them, and of the arenas' bytes those in
// use and those free (mallinfo2; the main arena's figures are exact, the
// others' approximate).
func Stats() HeapStats {
	var arena, mmapped, inuse, free C.size_t
	C.cheap_stats(&arena, &mmapped, &inuse, &free)
	return HeapStats{Arenas: uint64(arena), Mapped: uint64(mmapped), InUse: uint64(inuse), Free: uint64(free)}
}

// Tune sets glibc's allocator for C libraries that allocate and free much
// in bursts, as decoders made and freed with the calls do: at most arenas
// arenas (M_ARENA_MAX), where glibc otherwise gives each busy thread one
// of its own, up to eight per core, and each keeps what it freed; and
// blocks of mmapThreshold bytes or more mapped apart (M_MMAP_THRESHOLD),
// so that freeing them gives them back at once, where glibc otherwise
// raises the threshold to the largest block freed and keeps such blocks
// in the arenas. A value of 0, or the setting's environment variable
// (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_) set, leaves it as it is. It
// reports whether it set something, and glibc took it.
func Tune(arenas, mmapThreshold int) bool {
	if os.Getenv("MALLOC_ARENA_MAX") != "" {
		arenas = 0
	}
	if os.Getenv("MALLOC_MMAP_THRESHOLD_") != "" {
		mmapThreshold = 0
	}
	if arenas <= 0 && mmapThreshold <= 0 {
		return false
	}
	return C.cheap_tune(C.int(arenas), C.int(mmapThreshold)) == 1
}
