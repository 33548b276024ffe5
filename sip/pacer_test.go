package sip

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/holdline/holdline/media"
)

// pacedPair is a lane on a pacer and the socket its packets go to.
func pacedPair(t *testing.T, p *pacer, network, host string) (*lane, *net.UDPConn) {
	t.Helper()
	src, err := net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(host)})
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	dst, err := net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(host)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(); dst.Close() })
	l, err := p.add(src)
	if err != nil {
		t.Fatal(err)
	}
	return l, dst
}

func newTestPacer(t *testing.T) *pacer {
	t.Helper()
	p, err := newPacer(media.DefaultFrameDuration, false, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.free)
	return p
}

// Packets queued all at once leave one per period, in order, and a lane
// holds no more than its ring: the rest are dropped and counted.
func TestPacerSendsOnePacketPerPeriodInOrder(t *testing.T) {
	p := newTestPacer(t)
	l, dst := pacedPair(t, p, "udp4", "127.0.0.1")
	to := dst.LocalAddr().(*net.UDPAddr).AddrPort()
	accepted := 0
	for i := range 6 {
		if l.push([]byte{byte(i)}, to) {
			accepted++
		}
	}
	if accepted != 4 {
		t.Fatalf("a lane took %d of 6 packets queued at once, want its ring of 4", accepted)
	}
	var arrivals []time.Time
	buf := make([]byte, 16)
	_ = dst.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range accepted {
		n, _, err := dst.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if n != 1 || buf[0] != byte(i) {
			t.Fatalf("packet %d arrived as %v, want [%d]", i, buf[:n], i)
		}
		arrivals = append(arrivals, time.Now())
	}
	// Early is what the pacer must never be; late only costs a test a
	// loaded machine.
	for i := 1; i < len(arrivals); i++ {
		if gap := arrivals[i].Sub(arrivals[i-1]); gap < 15*time.Millisecond {
			t.Errorf("packets %d and %d arrived %v apart, want a period (20 ms)", i-1, i, gap)
		}
	}
	l.remove()
	st := l.stats()
	if st.Sent != 4 || st.Overruns != 2 {
		t.Errorf("stats %+v, want 4 sent and 2 dropped", st)
	}
	if l.push([]byte{9}, to) {
		t.Error("a removed lane took a packet")
	}
	if late, missed := p.late(); missed != 0 {
		t.Logf("pacer late %d, missed %d", late, missed)
	}
}

// A lane on an IPv6 socket sends to an IPv6 peer; one on an IPv4 socket
// refuses an IPv6 address instead of sending it somewhere else.
func TestPacerAddressFamilies(t *testing.T) {
	p := newTestPacer(t)
	l6, dst6 := pacedPair(t, p, "udp6", "::1")
	if !l6.push([]byte{6}, dst6.LocalAddr().(*net.UDPAddr).AddrPort()) {
		t.Fatal("IPv6 lane refused an IPv6 peer")
	}
	buf := make([]byte, 4)
	_ = dst6.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _, err := dst6.ReadFromUDPAddrPort(buf); err != nil || n != 1 || buf[0] != 6 {
		t.Fatalf("IPv6 peer got %v, %v", buf[:n], err)
	}
	l4, _ := pacedPair(t, p, "udp4", "127.0.0.1")
	if l4.push([]byte{4}, netip.MustParseAddrPort("[::1]:9")) {
		t.Error("IPv4 lane took an IPv6 destination")
	}
	l4.remove()
	l6.remove()
}

// When the player misses a beat the lane sends nothing rather than
// anything stale, counts the gap, and goes on with the next packet.
func TestPacerCountsAGapWhenNothingIsQueued(t *testing.T) {
	p := newTestPacer(t)
	l, dst := pacedPair(t, p, "udp4", "127.0.0.1")
	to := dst.LocalAddr().(*net.UDPAddr).AddrPort()
	buf := make([]byte, 4)
	_ = dst.SetReadDeadline(time.Now().Add(5 * time.Second))
	l.push([]byte{1}, to)
	if _, _, err := dst.ReadFromUDPAddrPort(buf); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.stats().Underruns == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // waiting on the pacer's thread, which no fake clock drives
	}
	if l.stats().Underruns == 0 {
		t.Fatal("no gap counted with nothing queued")
	}
	l.push([]byte{2}, to)
	if n, _, err := dst.ReadFromUDPAddrPort(buf); err != nil || buf[0] != 2 {
		t.Fatalf("after a gap got %v, %v; want [2]", buf[:n], err)
	}
	l.remove()
}
