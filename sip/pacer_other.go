//go:build !linux

package sip

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdline/holdline/media"
)

// pacer puts every call's RTP on the wire from one goroutine, one packet
// per leg per 20 ms beat. On Linux it is a thread of its own (see
// pacer_linux.go); here it is a goroutine, so its beats are as punctual as
// the Go scheduler makes them, and real-time priority is not offered.
type pacer struct {
	period time.Duration

	mu      sync.Mutex
	lanes   []*lane
	stop    chan struct{} // closed to end the running goroutine; nil when none runs
	stopped chan struct{} // closed by the goroutine when it has ended

	hist          [buckets]atomic.Uint64
	lates, missed atomic.Uint64
}

const buckets = 1001

func newPacer(period time.Duration, realtime bool, log *slog.Logger) (*pacer, error) {
	if realtime {
		log.Warn("RTP pacing runs at normal priority: real-time pacing needs Linux")
	}
	return &pacer{period: period}, nil
}

func (p *pacer) free() {}

func (p *pacer) histogram() []uint64 {
	out := make([]uint64, buckets)
	for i := range out {
		out[i] = p.hist[i].Load()
	}
	return out
}

func (p *pacer) late() (late, missed uint64) { return p.lates.Load(), p.missed.Load() }

// lane is one leg's place on the pacer.
type lane struct {
	p    *pacer
	conn *net.UDPConn
	v4   bool // the socket is AF_INET

	mu          sync.Mutex
	removed     bool
	queue       [4][]byte
	to          [4]netip.AddrPort
	head, count int
	lastSend    time.Time
	st          laneStats
}

func (p *pacer) add(conn *net.UDPConn) (*lane, error) {
	local, _ := conn.LocalAddr().(*net.UDPAddr)
	l := &lane{p: p, conn: conn, v4: local != nil && local.IP.To4() != nil}
	for i := range l.queue {
		l.queue[i] = make([]byte, 0, 1500)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lanes = append(p.lanes, l)
	if p.stop == nil {
		p.stop, p.stopped = make(chan struct{}), make(chan struct{})
		go p.run(p.stop, p.stopped)
	}
	return l, nil
}

func (l *lane) push(pkt []byte, to netip.AddrPort) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.removed || len(pkt) == 0 || (l.v4 && !to.Addr().Unmap().Is4()) {
		return false
	}
	if l.count == len(l.queue) {
		l.st.Overruns++
		return false
	}
	i := (l.head + l.count) % len(l.queue)
	l.queue[i] = append(l.queue[i][:0], pkt...)
	l.to[i] = to
	l.count++
	return true
}

func (l *lane) remove() {
	l.mu.Lock()
	l.removed = true
	l.mu.Unlock()
	p := l.p
	p.mu.Lock()
	if i := slices.Index(p.lanes, l); i >= 0 {
		p.lanes = slices.Delete(p.lanes, i, i+1)
	}
	var stopped chan struct{}
	if len(p.lanes) == 0 && p.stop != nil {
		close(p.stop)
		stopped = p.stopped
		p.stop, p.stopped = nil, nil
	}
	p.mu.Unlock()
	if stopped != nil {
		<-stopped
	}
}

type laneStats struct{ Sent, Underruns, Overruns, Errors uint64 }

func (l *lane) stats() laneStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// send sends the lane's oldest packet, once a beat.
func (l *lane) send() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.removed {
		return
	}
	if l.count == 0 {
		if !l.lastSend.IsZero() {
			l.st.Underruns++
		}
		return
	}
	pkt, to := l.queue[l.head], l.to[l.head]
	l.head = (l.head + 1) % len(l.queue)
	l.count--
	if _, err := l.conn.WriteToUDPAddrPort(pkt, to); err != nil {
		l.st.Errors++
		return
	}
	l.st.Sent++
	now := time.Now()
	if !l.lastSend.IsZero() {
		dev := now.Sub(l.lastSend) - l.p.period
		if dev < 0 {
			dev = -dev
		}
		l.p.hist[min(int(dev/(100*time.Microsecond)), buckets-1)].Add(1)
	}
	l.lastSend = now
}

// run beats until stop is closed, keeping a fixed schedule like
// media.Player: after a late wakeup it sends the beats that are due, up to
// media.MaxCatchUp of them, and skips the rest.
func (p *pacer) run(stop, stopped chan struct{}) {
	defer close(stopped)
	t := time.NewTicker(p.period)
	defer t.Stop()
	start := time.Now()
	var beats int64
	var lanes []*lane
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		due := int64(time.Since(start) / p.period)
		if behind := due - beats; behind > media.MaxCatchUp {
			p.missed.Add(uint64(behind - media.MaxCatchUp))
			beats += behind - media.MaxCatchUp
		}
		p.mu.Lock()
		lanes = append(lanes[:0], p.lanes...)
		p.mu.Unlock()
		for ; beats < due; beats++ {
			if due-beats > 1 {
				p.lates.Add(1)
			}
			for _, l := range lanes {
				l.send()
			}
		}
		clear(lanes)
	}
}
