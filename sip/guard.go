package sip

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	sipmsg "github.com/emiago/sipgo/sip"
)

// maxDatagram is the largest UDP payload there is (65,535 less the IPv4
// and UDP headers, rounded up): a buffer this size never cuts a datagram,
// so a message too large for sipgo can be told apart from a malformed one
// and its size told to the sender.
const maxDatagram = 64 << 10

// guardConn stands between the UDP socket and sipgo: a datagram sipgo
// cannot parse would be dropped in silence, so a request that can be told
// apart as one (a request line, the headers a response must copy) gets a
// 400 that says what is wrong, one larger than sipgo's read buffer a 513
// that states the limit (sipgo would see it cut short and call its body
// incomplete), and anything else is dropped here.
type guardConn struct {
	net.PacketConn
	parser *sipmsg.Parser
	log    *slog.Logger

	mu  sync.Mutex
	buf []byte // read into first: see maxDatagram
	// warned: the first oversized message is logged as a warning, the
	// others at debug level, so a sender cannot flood the log.
	warned bool
}

func newGuardConn(c net.PacketConn, log *slog.Logger) *guardConn {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &guardConn{PacketConn: c, parser: sipmsg.NewParser(), log: log, buf: make([]byte, maxDatagram)}
}

func (g *guardConn) ReadFrom(p []byte) (int, net.Addr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		n, addr, err := g.PacketConn.ReadFrom(g.buf)
		if err != nil {
			return 0, addr, err
		}
		msg := g.buf[:n]
		if n <= 4 && len(bytes.Trim(msg, "\r\n")) == 0 {
			return copy(p, msg), addr, nil // keep-alives: sipgo's to handle
		}
		if n > len(p) {
			g.tooLarge(msg, len(p), addr)
			continue
		}
		_, perr := g.parser.ParseSIP(msg)
		if perr == nil {
			return copy(p, msg), addr, nil
		}
		if res := errorResponse(msg, "400 Bad Request", "malformed request: "+perr.Error()); res != nil {
			_, _ = g.PacketConn.WriteTo(res, addr)
		}
	}
}

// tooLarge answers a message of more than limit bytes with 513, the limit
// in its reason phrase (what a softphone shows) and in a Warning.
func (g *guardConn) tooLarge(msg []byte, limit int, from net.Addr) {
	level := slog.LevelWarn
	if g.warned {
		level = slog.LevelDebug
	}
	g.warned = true
	g.log.Log(context.Background(), level, "SIP message larger than the limit refused", "from", from.String(), "bytes", len(msg), "limit_bytes", limit)
	status := fmt.Sprintf("513 Message Too Large (limit %d bytes)", limit)
	warning := fmt.Sprintf("message of %d bytes is over the limit of %d bytes over UDP", len(msg), limit)
	if res := errorResponse(msg, status, warning); res != nil {
		_, _ = g.PacketConn.WriteTo(res, from)
	}
}

// errorResponse is the response with status ("400 Bad Request") and a
// Warning saying why to a request that cannot be handed to sipgo, or nil
// when msg is not recognisably a request (no request line, or none of the
// headers a response must echo).
func errorResponse(msg []byte, status, why string) []byte {
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
	b.WriteString("SIP/2.0 " + status + "\r\n")
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
	reason := strings.NewReplacer("\r", " ", "\n", " ", `"`, "'").Replace(why)
	if len(reason) > 220 {
		reason = reason[:220]
	}
	fmt.Fprintf(&b, "Warning: 399 holdline \"%s\"\r\nContent-Length: 0\r\n\r\n", reason)
	return []byte(b.String())
}
