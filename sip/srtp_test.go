package sip

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/srtp/v3"

	"github.com/holdline/holdline/media"
)

// srtpTestLeg is a PCMU leg whose SRTP reads what the caller protects
// with callerKey; its log goes to logs.
func srtpTestLeg(t testing.TB, callerKey Crypto, logs *bytes.Buffer) *leg {
	t.Helper()
	conn, err := listenRTP(netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLeg(conn, Codec{PayloadType: 0, Name: "PCMU", ClockRate: 8000, Channels: 1}, 101, media.Rate8k, time.Second,
		legHandler{}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.conn.Close() })
	ours, err := newCrypto(callerKey.Tag, callerKey.Suite)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := newSRTPSession(true, ours, callerKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.sec.Store(sec)
	return l
}

// callerPacket is the caller's n-th PCMU packet in the clear.
func callerPacket(n int) []byte {
	p := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: uint16(1000 + n), Timestamp: uint32(160 * n), SSRC: 0xCA11E5},
		Payload: bytes.Repeat([]byte{0x55}, 160)}
	b, _ := p.Marshal()
	return b
}

// On an SRTP call, the leg takes the caller's SRTP and SRTCP and drops,
// counts and logs once (with the reason, without the key) plain RTP, SRTP
// under another key and a replayed packet; what it took was decrypted.
func TestLegSRTPDropsWhatIsNotAuthentic(t *testing.T) {
	for _, suite := range []string{SuiteAES128SHA1_80, SuiteAES128SHA1_32} {
		t.Run(suite, func(t *testing.T) {
			caller, _ := newCrypto(1, suite)
			wrong, _ := newCrypto(1, suite)
			var logs bytes.Buffer
			l := srtpTestLeg(t, caller, &logs)
			enc, _ := srtpContext(caller)
			bad, _ := srtpContext(wrong)
			from := netip.MustParseAddrPort("127.0.0.1:4000")
			var p rtp.Packet
			var pcm []int16
			good := 0
			for i := range 10 {
				sealed, err := enc.EncryptRTP(nil, callerPacket(i), nil)
				if err != nil {
					t.Fatal(err)
				}
				pcm = l.handle(&p, sealed, from, pcm)
				good++
				if i == 3 {
					pcm = l.handle(&p, sealed, from, pcm) // replayed
				}
			}
			st := l.Stats()
			if st.PacketsIn != uint64(good) || st.SRTPFailed != 1 {
				t.Fatalf("%d good packets and a replay: %d taken, %d failed", good, st.PacketsIn, st.SRTPFailed)
			}
			if len(pcm) != 160 || pcm[0] == 0 {
				t.Fatalf("the last packet decoded to %d samples (%v...): not the caller's audio", len(pcm), pcm[:min(len(pcm), 2)])
			}
			for i := 10; i < 15; i++ {
				l.handle(&p, callerPacket(i), from, nil) // plain RTP
				sealed, _ := bad.EncryptRTP(nil, callerPacket(i+10), nil)
				l.handle(&p, sealed, from, nil) // another key
			}
			st = l.Stats()
			if st.PacketsIn != uint64(good) || st.SRTPFailed != 11 || st.Bad != 11 {
				t.Fatalf("after 5 plain and 5 wrong-key packets: %d taken, %d failed, %d bad; want %d, 11, 11", st.PacketsIn, st.SRTPFailed, st.Bad, good)
			}
			// SRTCP multiplexed on the RTP port: checked, and not media.
			rr, _ := (&rtcp.ReceiverReport{SSRC: 0xCA11E5}).Marshal()
			srtcp, err := enc.EncryptRTCP(nil, rr, nil)
			if err != nil {
				t.Fatal(err)
			}
			l.handle(&p, srtcp, from, nil)
			if st := l.Stats(); st.PacketsIn != uint64(good) || st.SRTPFailed != 11 || l.sec.Load().rtcp.Load() != 1 {
				t.Fatalf("SRTCP: %d taken, %d failed, %d RTCP", st.PacketsIn, st.SRTPFailed, l.sec.Load().rtcp.Load())
			}
			// A good packet after all that is still taken.
			sealed, _ := enc.EncryptRTP(nil, callerPacket(30), nil)
			l.handle(&p, sealed, from, nil)
			if st := l.Stats(); st.PacketsIn != uint64(good+1) {
				t.Fatalf("a good packet after the bad ones was not taken")
			}
			log := logs.String()
			if n := strings.Count(log, "SRTP packet dropped"); n != 1 {
				t.Errorf("logged %d times; want once:\n%s", n, log)
			}
			if !strings.Contains(log, "reason=") {
				t.Errorf("the log does not say why:\n%s", log)
			}
			for _, k := range []Crypto{caller, wrong, l.sec.Load().local} {
				if inline := k.Marshal()[len("1 "+suite+" inline:"):]; strings.Contains(log, inline[:12]) {
					t.Errorf("a key is in the log:\n%s", log)
				}
			}
		})
	}
}

// What the leg protects, the other side's context decrypts; and with an
// MKI on the caller's key, the caller's packets carry it and are taken.
func TestSRTPSessionsPair(t *testing.T) {
	a, _ := newCrypto(1, SuiteAES128SHA1_80)
	b, _ := newCrypto(1, SuiteAES128SHA1_80)
	b.MKI = []byte{0, 7}
	ours, err := newSRTPSession(true, a, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := newSRTPSession(true, b, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The caller sends with its MKI.
	mkiOut, err := srtpContext(b, srtp.MasterKeyIndicator(b.MKI))
	if err != nil {
		t.Fatal(err)
	}
	theirs.out = mkiOut
	for i := range 5 {
		sealed, err := ours.protect(nil, callerPacket(i))
		if err != nil {
			t.Fatal(err)
		}
		if len(sealed) != len(callerPacket(i))+10 {
			t.Fatalf("sealed %d bytes; want the packet and an 80-bit tag", len(sealed))
		}
		if plain, why := theirs.unprotect(sealed); why != "" || !bytes.Equal(plain, callerPacket(i)) {
			t.Fatalf("their side read %q", why)
		}
		back, err := theirs.protect(nil, callerPacket(i))
		if err != nil {
			t.Fatal(err)
		}
		if plain, why := ours.unprotect(back); why != "" || !bytes.Equal(plain, callerPacket(i)) {
			t.Fatalf("our side read %q", why)
		}
	}
}

// The per-packet cost of a call's media on the legs, without the
// socket: one packet made by one leg as WriteFrame makes it (encoded,
// marshalled, protected on an SRTP call) and taken by the other leg as
// read takes it (unprotected, parsed, decoded into the jitter buffer, one
// frame out). A call sends 50 packets a second and takes 50, so it costs
// 50 of these a second; the cpu%/call metric is that as a share of one
// core.
func BenchmarkLegRTP(b *testing.B)  { benchmarkLeg(b, false) }
func BenchmarkLegSRTP(b *testing.B) { benchmarkLeg(b, true) }

func benchmarkLeg(b *testing.B, secure bool) {
	var logs bytes.Buffer
	senderKey, _ := newCrypto(1, SuiteAES128SHA1_80)
	rx := srtpTestLeg(b, senderKey, &logs)
	tx := srtpTestLeg(b, rx.sec.Load().local, &logs)
	sec, err := newSRTPSession(true, senderKey, rx.sec.Load().local, nil)
	if err != nil {
		b.Fatal(err)
	}
	tx.sec.Store(sec)
	if !secure {
		rx.sec.Store(nil)
		tx.sec.Store(nil)
	}
	from := netip.MustParseAddrPort("127.0.0.1:4000")
	pcm := make([]int16, 160)
	for i := range pcm {
		pcm[i] = int16(i * 97)
	}
	var p rtp.Packet
	frame := make([]int16, 160)
	var scratch []int16
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		o := &tx.out
		payload, _ := tx.codec.Encode(o.payload[:0], pcm)
		pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SequenceNumber: uint16(n), Timestamp: uint32(160 * n), SSRC: 1}, Payload: payload}
		k, _ := pkt.MarshalTo(o.packet)
		datagram := o.packet[:k]
		if sec := tx.sec.Load(); sec != nil {
			if datagram, err = sec.protect(o.sealed[:0], datagram); err != nil {
				b.Fatal(err)
			}
		}
		scratch = rx.handle(&p, datagram, from, scratch)
		rx.jb.Pop(frame)
		n++
	}
	b.StopTimer()
	if st := rx.Stats(); st.PacketsIn != uint64(n) {
		b.Fatalf("%d of %d packets taken", st.PacketsIn, n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)*50/1e9*100, "cpu%/call")
}

// FuzzLegSRTPPacket feeds arbitrary datagrams to an SRTP call's leg: it
// never panics, and each datagram is the caller's media only if it
// authenticates, SRTCP (checked, dropped), or counted as failed.
func FuzzLegSRTPPacket(f *testing.F) {
	caller := Crypto{Tag: 1, Suite: SuiteAES128SHA1_80, Key: bytes.Repeat([]byte{0x42}, sdesKeyLen)}
	enc, _ := srtpContext(caller)
	good, _ := enc.EncryptRTP(nil, callerPacket(1), nil)
	f.Add(good)
	f.Add(callerPacket(2))
	rr, _ := (&rtcp.ReceiverReport{SSRC: 1}).Marshal()
	sr, _ := enc.EncryptRTCP(nil, rr, nil)
	f.Add(sr)
	f.Add(rr)
	f.Add([]byte{0x80, 0xc9})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, datagram []byte) {
		var logs bytes.Buffer
		l := srtpTestLeg(t, caller, &logs)
		var p rtp.Packet
		from := netip.MustParseAddrPort("127.0.0.1:4000")
		l.handle(&p, datagram, from, nil)
		st := l.Stats()
		if n := st.PacketsIn + st.Bad + l.sec.Load().rtcp.Load(); n != 1 {
			t.Fatalf("1 datagram counted %d times: %+v", n, st)
		}
		// Of the caller's RTP, only the seed sealed with its key
		// authenticates: any change to it breaks the tag.
		if st.PacketsIn == 1 && !bytes.Equal(datagram, good) {
			t.Fatalf("a datagram other than the sealed seed was taken: %x", datagram)
		}
	})
}
