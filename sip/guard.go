package sip

import (
	"bytes"
	"fmt"
	"net"
	"strings"

	sipmsg "github.com/emiago/sipgo/sip"
)

// guardConn stands between the UDP socket and sipgo: a datagram sipgo
// cannot parse would be dropped in silence, so a request that can be told
// apart as one (a request line, the headers a response must copy) gets a
// 400 that says what is wrong, and anything else is dropped here.
type guardConn struct {
	net.PacketConn
	parser *sipmsg.Parser
}

func newGuardConn(c net.PacketConn) *guardConn {
	return &guardConn{PacketConn: c, parser: sipmsg.NewParser()}
}

func (g *guardConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, addr, err := g.PacketConn.ReadFrom(p)
		if err != nil || n <= 4 && len(bytes.Trim(p[:n], "\r\n")) == 0 {
			return n, addr, err // errors and keep-alives: sipgo's to handle
		}
		_, perr := g.parser.ParseSIP(p[:n])
		if perr == nil {
			return n, addr, nil
		}
		if res := badRequest(p[:n], perr); res != nil {
			_, _ = g.PacketConn.WriteTo(res, addr)
		}
	}
}

// badRequest is the 400 for a malformed request, or nil when msg is not
// recognisably a request (no request line, or none of the headers a
// response must echo).
func badRequest(msg []byte, why error) []byte {
	head, _, _ := bytes.Cut(msg, []byte("\r\n\r\n"))
	lines := strings.Split(strings.ReplaceAll(string(head), "\r\n", "\n"), "\n")
	if len(lines) == 0 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "SIP/2.0") || strings.HasPrefix(lines[0], "SIP/") {
		return nil
	}
	method, _, _ := strings.Cut(lines[0], " ")
	if method == "ACK" { // never answered
		return nil
	}
	var b strings.Builder
	b.WriteString("SIP/2.0 400 Bad Request\r\n")
	need := map[string]bool{"via": false, "from": false, "to": false, "call-id": false, "cseq": false}
	short := map[string]string{"v": "via", "f": "from", "t": "to", "i": "call-id"}
	for _, l := range lines[1:] {
		name, _, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		key := strings.ToLower(strings.TrimSpace(name))
		if long, ok := short[key]; ok {
			key = long
		}
		if _, ok := need[key]; ok {
			need[key] = true
			b.WriteString(strings.TrimSpace(l))
			b.WriteString("\r\n")
		}
	}
	if !need["via"] || !need["call-id"] || !need["cseq"] {
		return nil // a response could not be matched to it
	}
	reason := strings.NewReplacer("\r", " ", "\n", " ", `"`, "'").Replace(why.Error())
	if len(reason) > 200 {
		reason = reason[:200]
	}
	fmt.Fprintf(&b, "Warning: 399 holdline \"malformed request: %s\"\r\nContent-Length: 0\r\n\r\n", reason)
	return []byte(b.String())
}
