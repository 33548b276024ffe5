// Package freeport finds loopback ports free just now, for tests that
// start servers and peers (redis-server, sipp, baresip, holdline serve)
// on ports of their own.
package freeport

import "net"

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
