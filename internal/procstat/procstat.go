//go:build linux

// Package procstat reads what processes cost, for the benchmarks that
// measure Holdline's CPU and memory beside other processes (a client
// fleet, livekit-server): this process's CPU time from getrusage, other
// processes' from /proc/PID/stat, the hypervisor's steal from /proc/stat,
// the Go heap and the resident set.
package procstat

import (
	"bytes"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// userHZ is the unit of the times in /proc (USER_HZ).
const userHZ = 100

// CPUSeconds is this process's user+sys CPU time.
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// StolenCPU is the CPU time the hypervisor took from this machine's CPUs
// (steal in /proc/stat), in seconds. (Its busy times are sampled at the
// tick and miss a load that wakes every 20 ms, so they are not used.)
func StolenCPU(tb testing.TB) float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		tb.Fatalf("/proc/stat: %q", line)
	}
	v, err := strconv.ParseFloat(f[8], 64) // user nice system idle iowait irq softirq steal
	if err != nil {
		tb.Fatalf("/proc/stat: %q", line)
	}
	return v / userHZ
}

// Procs is the CPU time, in seconds, of each of a set of processes, with
// their reaped children.
type Procs map[int]float64

// Others is Procs of every process but this one and the excluded.
func Others(exclude ...int) Procs {
	self := os.Getpid()
	return scan(func(pid, _ int) bool { return pid != self && !slices.Contains(exclude, pid) })
}

// Group is Procs of the processes of process group pgid (a process
// started with Setpgid and its children).
func Group(pgid int) Procs {
	return scan(func(_, pgrp int) bool { return pgrp == pgid })
}

func scan(keep func(pid, pgrp int) bool) Procs {
	out := Procs{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:])) // state ppid pgrp …
		if len(f) < 15 {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		if !keep(pid, pgrp) {
			continue
		}
		var ticks float64
		for _, s := range f[11:15] { // utime stime cutime cstime
			v, _ := strconv.ParseFloat(s, 64)
			ticks += v
		}
		out[pid] = ticks / userHZ
	}
	return out
}

// Since returns the CPU time used from then to p: by the processes of both,
// and all of it for processes started since.
func (p Procs) Since(then Procs) float64 {
	var sum float64
	for pid, v := range p {
		sum += max(0, v-then[pid])
	}
	return sum
}

// HeapStats returns the heap in use and the live heap, in bytes; call it
// after a GC.
func HeapStats() (inuse, live uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.HeapAlloc
}

// RSSKiB is this process's resident set (VmRSS).
func RSSKiB(tb testing.TB) int64 { return RSSKiBOf(tb, os.Getpid()) }

// RSSKiBOf is process pid's resident set (VmRSS).
func RSSKiBOf(tb testing.TB, pid int) int64 {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("VmRSS %q: %v", v, err)
			}
			return n
		}
	}
	tb.Fatalf("no VmRSS in %s", path)
	return 0
}
