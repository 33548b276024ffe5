//go:build linux

package sip

/*
#cgo LDFLAGS: -lpthread
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define HL_RING 4
#define HL_MTU 1500
#define HL_BUCKETS 1001
#define HL_PHASES 10

typedef union {
	struct sockaddr sa;
	struct sockaddr_in in4;
	struct sockaddr_in6 in6;
} hl_addr;

typedef struct {
	uint16_t len;
	socklen_t tolen;
	hl_addr to;
	uint8_t data[HL_MTU];
} hl_slot;

// A lane is one leg's packets: a single-producer (Go), single-consumer
// (the pacer thread) ring.
typedef struct {
	int fd; // a dup of the leg's socket, closed with the lane
	int phase; // which tenth of the period the lane's packets leave in
	uint32_t head, tail; // atomics: head is the pacer's, tail Go's
	hl_slot slots[HL_RING];
	int64_t last_send; // pacer thread only
	uint64_t sent, underruns, overruns, errors; // atomics
} hl_lane;

typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;
	hl_lane **lanes;
	int n, cap;
	int64_t period;
	int load[HL_PHASES]; // lanes per phase
	int want_rt, rt_err, running, stop;
	pthread_t thread;
	uint64_t hist[HL_BUCKETS]; // atomics: spacing deviation in 0.1 ms steps
	uint64_t late, missed;     // atomics
} hl_pacer;

static int64_t hl_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void hl_send(hl_pacer *p, hl_lane *l) {
	uint32_t head = __atomic_load_n(&l->head, __ATOMIC_RELAXED);
	uint32_t tail = __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE);
	if (head == tail) {
		if (l->last_send) __atomic_add_fetch(&l->underruns, 1, __ATOMIC_RELAXED);
		return;
	}
	hl_slot *s = &l->slots[head % HL_RING];
	ssize_t n = sendto(l->fd, s->data, s->len, MSG_DONTWAIT, &s->to.sa, s->tolen);
	__atomic_store_n(&l->head, head + 1, __ATOMIC_RELEASE);
	if (n < 0) {
		__atomic_add_fetch(&l->errors, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_add_fetch(&l->sent, 1, __ATOMIC_RELAXED);
	int64_t now = hl_now();
	if (l->last_send) {
		int64_t dev = now - l->last_send - p->period;
		if (dev < 0) dev = -dev;
		int64_t i = dev / 100000;
		if (i >= HL_BUCKETS) i = HL_BUCKETS - 1;
		__atomic_add_fetch(&p->hist[i], 1, __ATOMIC_RELAXED);
	}
	l->last_send = now;
}

// hl_run beats until told to stop. The lanes are spread over the period
// in HL_PHASES groups, each sent at its own tenth of it, so that a lane's
// packets leave at the same instant of every period however many lanes
// go before it (a few hundred sends one after another take milliseconds),
// and the line sees no burst. It sleeps to each step on an absolute clock,
// so lateness never accumulates, and after a late wakeup sends the steps
// that are due, at most three periods' worth (what media.Player catches
// up), skipping the rest.
static void *hl_run(void *arg) {
	hl_pacer *p = arg;
	int64_t step = p->period / HL_PHASES;
	int64_t start = hl_now(), steps = 0;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		int64_t next = start + (steps + 1) * step;
		struct timespec ts = {next / 1000000000, next % 1000000000};
		int rc = 0;
		while (!p->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&p->wake, &p->mu, &ts);
		if (p->stop) break;
		int64_t due = (hl_now() - start) / step;
		if (due - steps > 3 * HL_PHASES) {
			__atomic_add_fetch(&p->missed, (uint64_t)(due - steps - 3 * HL_PHASES) / HL_PHASES, __ATOMIC_RELAXED);
			steps = due - 3 * HL_PHASES;
		}
		for (; steps < due; steps++) {
			int phase = (int)(steps % HL_PHASES);
			if (phase == 0 && due - steps > HL_PHASES) __atomic_add_fetch(&p->late, 1, __ATOMIC_RELAXED);
			for (int i = 0; i < p->n; i++)
				if (p->lanes[i]->phase == phase) hl_send(p, p->lanes[i]);
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static hl_pacer *hl_pacer_new(int64_t period, int want_rt) {
	hl_pacer *p = calloc(1, sizeof *p);
	if (!p) return NULL;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&p->mu, NULL);
	p->period = period;
	p->want_rt = want_rt;
	return p;
}

static void hl_pacer_free(hl_pacer *p) {
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->mu);
	free(p->lanes);
	free(p);
}

// hl_start starts the thread, at real-time priority if asked and allowed;
// p->rt_err says why not when it was asked and refused. Called with mu held.
static int hl_start(hl_pacer *p) {
	p->stop = 0;
	p->rt_err = 0;
	if (p->want_rt) {
		pthread_attr_t a;
		struct sched_param sp = {.sched_priority = 10};
		pthread_attr_init(&a);
		pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&a, SCHED_FIFO);
		pthread_attr_setschedparam(&a, &sp);
		int rc = pthread_create(&p->thread, &a, hl_run, p);
		pthread_attr_destroy(&a);
		if (rc == 0) {
			p->running = 1;
			return 0;
		}
		p->rt_err = rc;
	}
	int rc = pthread_create(&p->thread, NULL, hl_run, p);
	if (rc == 0) p->running = 1;
	return rc;
}

// hl_lane_add makes a lane for the socket fd and puts it on the schedule,
// starting the thread with the first lane. It returns NULL and sets *err
// on failure.
static hl_lane *hl_lane_add(hl_pacer *p, int fd, int *err) {
	hl_lane *l = calloc(1, sizeof *l);
	if (!l) {
		*err = ENOMEM;
		return NULL;
	}
	l->fd = dup(fd);
	if (l->fd < 0) {
		*err = errno;
		free(l);
		return NULL;
	}
	pthread_mutex_lock(&p->mu);
	if (p->n == p->cap) {
		int cap = p->cap ? 2 * p->cap : 64;
		hl_lane **lanes = realloc(p->lanes, cap * sizeof *lanes);
		if (!lanes) {
			pthread_mutex_unlock(&p->mu);
			close(l->fd);
			free(l);
			*err = ENOMEM;
			return NULL;
		}
		p->lanes = lanes;
		p->cap = cap;
	}
	if (!p->running && (*err = hl_start(p)) != 0) {
		pthread_mutex_unlock(&p->mu);
		close(l->fd);
		free(l);
		return NULL;
	}
	for (int i = 1; i < HL_PHASES; i++)
		if (p->load[i] < p->load[l->phase]) l->phase = i;
	p->load[l->phase]++;
	p->lanes[p->n++] = l;
	pthread_mutex_unlock(&p->mu);
	return l;
}

// hl_lane_remove takes l off the schedule and frees it, leaving its final
// counts in out; with the last lane gone, the thread has ended when it
// returns.
static void hl_lane_stats(hl_lane *l, uint64_t out[4]);

static void hl_lane_remove(hl_pacer *p, hl_lane *l, uint64_t out[4]) {
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < p->n; i++) {
		if (p->lanes[i] == l) {
			p->lanes[i] = p->lanes[--p->n];
			p->load[l->phase]--;
			break;
		}
	}
	// The thread sends only while holding mu: l is no longer in use.
	hl_lane_stats(l, out);
	int join = p->n == 0 && p->running;
	if (join) {
		p->stop = 1;
		p->running = 0;
		pthread_cond_signal(&p->wake);
	}
	pthread_mutex_unlock(&p->mu);
	if (join) pthread_join(p->thread, NULL);
	close(l->fd);
	free(l);
}

// hl_lane_push queues one packet; 0 when the ring is full (dropped).
static int hl_lane_push(hl_lane *l, const uint8_t *pkt, int len, const hl_addr *to, socklen_t tolen) {
	uint32_t tail = __atomic_load_n(&l->tail, __ATOMIC_RELAXED);
	uint32_t head = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE);
	if (tail - head >= HL_RING || len > HL_MTU) {
		__atomic_add_fetch(&l->overruns, 1, __ATOMIC_RELAXED);
		return 0;
	}
	hl_slot *s = &l->slots[tail % HL_RING];
	memcpy(s->data, pkt, len);
	s->len = len;
	s->to = *to;
	s->tolen = tolen;
	__atomic_store_n(&l->tail, tail + 1, __ATOMIC_RELEASE);
	return 1;
}

static void hl_lane_stats(hl_lane *l, uint64_t out[4]) {
	out[0] = __atomic_load_n(&l->sent, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&l->underruns, __ATOMIC_RELAXED);
	out[2] = __atomic_load_n(&l->overruns, __ATOMIC_RELAXED);
	out[3] = __atomic_load_n(&l->errors, __ATOMIC_RELAXED);
}

static void hl_pacer_hist(hl_pacer *p, uint64_t out[HL_BUCKETS]) {
	for (int i = 0; i < HL_BUCKETS; i++) out[i] = __atomic_load_n(&p->hist[i], __ATOMIC_RELAXED);
}

static void hl_pacer_counts(hl_pacer *p, uint64_t out[2]) {
	out[0] = __atomic_load_n(&p->late, __ATOMIC_RELAXED);
	out[1] = __atomic_load_n(&p->missed, __ATOMIC_RELAXED);
}

static int hl_pacer_rt_err(hl_pacer *p) {
	pthread_mutex_lock(&p->mu);
	int e = p->rt_err;
	pthread_mutex_unlock(&p->mu);
	return e;
}

static void hl_addr_set4(hl_addr *a, const uint8_t ip[4], uint16_t port) {
	memset(a, 0, sizeof *a);
	a->in4.sin_family = AF_INET;
	a->in4.sin_port = htons(port);
	memcpy(&a->in4.sin_addr, ip, 4);
}

static void hl_addr_set6(hl_addr *a, const uint8_t ip[16], uint16_t port) {
	memset(a, 0, sizeof *a);
	a->in6.sin6_family = AF_INET6;
	a->in6.sin6_port = htons(port);
	memcpy(&a->in6.sin6_addr, ip, 16);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// pacer puts every call's RTP on the wire from one thread of its own, one
// packet per leg per 20 ms beat.
//
// Each session's player writes its frames on a goroutine, and with
// hundreds of calls those goroutines queue for the CPU behind each other:
// a player that runs a few milliseconds late would send its packet that
// late, and one catching up would send two at once, which the caller's
// jitter buffer hears as jitter. So the players only encode and queue
// (leg.WriteFrame), and the pacer, a C thread that sleeps to each beat on
// an absolute clock, does nothing but write datagrams: no goroutine has to
// be scheduled for a packet to leave on time. With real-time priority
// (WithRealtimePacing), it also goes ahead of whatever else the machine
// runs, the way media servers run their timing threads.
//
// A lane's queue settles at the lead its player needs: a frame that misses
// its beat leaves a gap once, and from then on the queue holds one frame
// more. The echo canceller's reference is unaffected (it counts samples,
// not time), and the lead is at most a frame or two of latency.
type pacer struct {
	mu       sync.Mutex // guards c against free
	c        *C.hl_pacer
	log      *slog.Logger
	realtime bool
	warned   atomic.Bool
}

// buckets is how many 0.1 ms steps the pacing histogram has.
const buckets = C.HL_BUCKETS

func newPacer(period time.Duration, realtime bool, log *slog.Logger) (*pacer, error) {
	rt := C.int(0)
	if realtime {
		rt = 1
	}
	c := C.hl_pacer_new(C.int64_t(period.Nanoseconds()), rt)
	if c == nil {
		return nil, errors.New("sip: pacer: out of memory")
	}
	return &pacer{c: c, log: log, realtime: realtime}, nil
}

// free releases the pacer once no lane is left.
func (p *pacer) free() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil {
		C.hl_pacer_free(p.c)
		p.c = nil
	}
}

// realtimeRefused says why the thread runs at normal priority although
// real-time was asked for, or nil.
func (p *pacer) realtimeRefused() error {
	if e := C.hl_pacer_rt_err(p.c); e != 0 {
		return syscall.Errno(e)
	}
	return nil
}

// histogram returns how far the spacing of the packets sent strayed from
// the period, in 0.1 ms steps.
func (p *pacer) histogram() []uint64 {
	out := make([]uint64, buckets)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil {
		C.hl_pacer_hist(p.c, (*C.uint64_t)(unsafe.Pointer(&out[0])))
	}
	return out
}

// late and missed count the pacer's late wakeups, as media.Player's Late
// and Missed do.
func (p *pacer) late() (late, missed uint64) {
	var out [2]C.uint64_t
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c != nil {
		C.hl_pacer_counts(p.c, &out[0])
	}
	return uint64(out[0]), uint64(out[1])
}

// lane is one leg's place on the pacer.
type lane struct {
	p     *pacer
	mu    sync.Mutex
	c     *C.hl_lane // nil once removed
	final laneStats  // the counts when it was removed
	to    netip.AddrPort
	addr  C.hl_addr
	alen  C.socklen_t
	v6    bool // the socket is AF_INET6
	valid bool // addr is set
}

// add puts conn's packets on the schedule.
func (p *pacer) add(conn *net.UDPConn) (*lane, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("sip: RTP socket: %w", err)
	}
	var c *C.hl_lane
	var cerr C.int
	if err := rc.Control(func(fd uintptr) { c = C.hl_lane_add(p.c, C.int(fd), &cerr) }); err != nil {
		return nil, fmt.Errorf("sip: RTP socket: %w", err)
	}
	if c == nil {
		return nil, fmt.Errorf("sip: pacing the RTP socket: %w", syscall.Errno(cerr))
	}
	if p.realtime && !p.warned.Load() {
		if err := p.realtimeRefused(); err != nil && !p.warned.Swap(true) {
			p.log.Warn("RTP pacing runs at normal priority: real-time priority was refused (it needs root or CAP_SYS_NICE)", "err", err)
		}
	}
	local, _ := conn.LocalAddr().(*net.UDPAddr)
	return &lane{p: p, c: c, v6: local == nil || local.IP.To4() == nil}, nil
}

// push queues pkt for to; false when it was dropped: the lane full or
// removed, or an address the socket cannot send to.
func (l *lane) push(pkt []byte, to netip.AddrPort) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil || len(pkt) == 0 {
		return false
	}
	if !l.valid || to != l.to {
		ip, port := to.Addr(), C.uint16_t(to.Port())
		switch {
		case l.v6:
			b := ip.As16()
			C.hl_addr_set6(&l.addr, (*C.uint8_t)(&b[0]), port)
			l.alen = C.socklen_t(unsafe.Sizeof(C.struct_sockaddr_in6{}))
		case ip.Unmap().Is4():
			b := ip.Unmap().As4()
			C.hl_addr_set4(&l.addr, (*C.uint8_t)(&b[0]), port)
			l.alen = C.socklen_t(unsafe.Sizeof(C.struct_sockaddr_in{}))
		default:
			return false // an IPv6 peer on an IPv4 socket
		}
		l.to, l.valid = to, true
	}
	return C.hl_lane_push(l.c, (*C.uint8_t)(unsafe.Pointer(&pkt[0])), C.int(len(pkt)), &l.addr, l.alen) == 1
}

// remove takes the lane off the schedule; nothing is sent for it after.
func (l *lane) remove() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		return
	}
	var out [4]C.uint64_t
	C.hl_lane_remove(l.p.c, l.c, &out[0])
	l.final = laneStats{uint64(out[0]), uint64(out[1]), uint64(out[2]), uint64(out[3])}
	l.c = nil
}

// laneStats counts what a lane did.
type laneStats struct{ Sent, Underruns, Overruns, Errors uint64 }

func (l *lane) stats() laneStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c == nil {
		return l.final
	}
	return l.statsLocked()
}

func (l *lane) statsLocked() laneStats {
	var out [4]C.uint64_t
	C.hl_lane_stats(l.c, &out[0])
	return laneStats{uint64(out[0]), uint64(out[1]), uint64(out[2]), uint64(out[3])}
}
