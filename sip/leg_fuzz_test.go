package sip

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/pion/rtp"

	"github.com/holdline/holdline/media"
)

// FuzzLegPacket feeds arbitrary datagrams to a call's RTP leg, as anyone
// on the network can: it never panics, a datagram is either counted as the
// caller's media or as bad, and the jitter buffer still hands out whole
// frames.
func FuzzLegPacket(f *testing.F) {
	good := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: 1, Timestamp: 160}, Payload: make([]byte, 160)}
	b, _ := good.Marshal()
	f.Add(b)
	key := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 101, SequenceNumber: 2, Timestamp: 320, Marker: true}, Payload: []byte{1, 0x8a, 3, 0x20}}
	b, _ = key.Marshal()
	f.Add(b)
	f.Add([]byte("not RTP"))
	f.Add([]byte{0x80})
	ext := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, Extension: true, ExtensionProfile: 0xBEDE, CSRC: []uint32{1, 2}}, Payload: []byte{0xff}}
	_ = ext.SetExtension(1, []byte{1, 2})
	b, _ = ext.Marshal()
	f.Add(b)
	f.Fuzz(func(t *testing.T, datagram []byte) {
		var keys int
		conn, err := listenRTP(netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		l, err := newLeg(conn, Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1}, 101, media.Rate8k, time.Second,
			legHandler{DTMF: func(rune) { keys++ }}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer l.conn.Close()
		var p rtp.Packet
		from := netip.MustParseAddrPort("127.0.0.1:4000")
		pcm := l.handle(&p, datagram, from, nil)
		pcm = l.handle(&p, datagram, from, pcm) // a repeat is harmless too
		st := l.Stats()
		if st.PacketsIn+st.Bad != 2 {
			t.Fatalf("2 datagrams: %d taken, %d bad", st.PacketsIn, st.Bad)
		}
		if keys > 1 {
			t.Fatalf("one key press reported %d times", keys)
		}
		out := make([]int16, 160)
		for range 10 {
			l.jb.Pop(out)
		}
	})
}
