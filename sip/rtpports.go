package sip

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
)

// ErrRTPPortsExhausted: every port of the RTP range (WithRTPPorts) is in
// use. An INVITE that finds none free is answered 503 with Retry-After.
var ErrRTPPortsExhausted = errors.New("sip: every RTP port of the range is in use")

// rtpRetryAfter is the Retry-After, in seconds, of a 503 for want of RTP
// ports: about a short call's length, when one is likely free again.
const rtpRetryAfter = "30"

// WithRTPPorts binds RTP sockets in [lo, hi] only (a firewall's opened
// range) rather than on ephemeral ports. Each call takes one port.
func WithRTPPorts(lo, hi uint16) Option {
	return func(c *config) error {
		if lo == 0 || hi < lo {
			return fmt.Errorf("sip: RTP port range %d-%d", lo, hi)
		}
		c.ports = &portRange{lo: lo, hi: hi, next: lo}
		return nil
	}
}

// portRange hands out the ports of a range round robin, so that a port
// just freed is the last to be taken again: a late packet of the call
// that had it then goes nowhere rather than into the next call.
type portRange struct {
	lo, hi uint16
	mu     sync.Mutex
	next   uint16
}

// listen binds a UDP socket on host at the range's next free port.
func (r *portRange) listen(host netip.Addr) (*net.UDPConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int(r.hi-r.lo) + 1
	for range n {
		p := r.next
		if r.next == r.hi {
			r.next = r.lo
		} else {
			r.next++
		}
		conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(host, p)))
		if err == nil {
			return conn, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("sip: RTP socket on port %d: %w", p, err)
		}
	}
	return nil, fmt.Errorf("%w (%d-%d)", ErrRTPPortsExhausted, r.lo, r.hi)
}

// listenRTP opens a call's RTP socket: in the configured range, else on a
// port the system chooses.
func (s *Server) listenRTP() (*net.UDPConn, error) {
	if s.cfg.ports != nil {
		return s.cfg.ports.listen(s.cfg.mediaAddr)
	}
	return listenRTP(s.cfg.mediaAddr)
}

// sdpAddr is the address the server's SDP gives for its media: the public
// address (WithPublicAddr) when there is one.
func (s *Server) sdpAddr() netip.Addr {
	if s.cfg.public.IsValid() {
		return s.cfg.public
	}
	return s.cfg.mediaAddr
}
