// Package cheap looks after the C heap the process shares with the C
// libraries it calls (pocketsphinx, ONNX Runtime, libopus, speexdsp):
// glibc's allocator keeps what they free in per-thread arenas for reuse,
// so a server that ran a busy hour would otherwise stay at its peak
// memory. Tune makes what they free easier to give back, Trim gives it
// back, and Stats says how much the heap holds and how much is free.
//
// Without cgo, or on a C library other than glibc, both do nothing.
package cheap
