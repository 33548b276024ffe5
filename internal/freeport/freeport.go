// Package freeport finds loopback ports free just now, for tests that
// start servers and peers (redis-server, sipp, baresip, holdline serve)
// on ports of their own.
package freeport

import (
	"fmt"
	"net"
)

// TCP returns a TCP port free on 127.0.0.1 just now.
func TCP() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// UDP returns a UDP port free on 127.0.0.1 just now.
func UDP() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// UDPRun returns the first of n consecutive UDP ports on 127.0.0.1 that are
// all free just now. sipp binds its audio and video RTP sockets on a base
// port and the ones after it; a base free on its own can collide there.
func UDPRun(n int) (int, error) {
	const tries = 50
	for range tries {
		base, err := UDP()
		if err != nil {
			return 0, err
		}
		if base+n > 65535 {
			continue
		}
		if runFree(base, n) {
			return base, nil
		}
	}
	return 0, fmt.Errorf("freeport: no run of %d free UDP ports found in %d tries", n, tries)
}

func runFree(base, n int) bool {
	var held []net.PacketConn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for p := base; p < base+n; p++ {
		c, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		held = append(held, c)
	}
	return true
}
