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
#else
static void cheap_stats(size_t *arena, size_t *mmapped, size_t *inuse, size_t *free_) {
	*arena = *mmapped = *inuse = *free_ = 0;
}
static int cheap_trim(void) { return 0; }
#endif
*/
import "C"

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
