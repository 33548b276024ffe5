package sip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/dtmf"
	"github.com/holdline/holdline/media/jitter"
)

// ErrRTPTimeout ends a call whose caller sent no RTP for the RTP timeout.
var ErrRTPTimeout = errors.New("sip: no RTP from the caller")

// legHandler receives what a media leg gets from the caller. It is called
// from the leg's goroutines and must not block for long.
type legHandler struct {
	// Audio gets the caller's audio in 20 ms frames at the input rate,
	// one per frame period, from one goroutine.
	Audio func(media.Frame)
	// DTMF gets each key press once.
	DTMF func(rune)
}

// legStats counts what a leg did.
type legStats struct {
	PacketsIn, PacketsOut uint64
	Bad                   uint64 // not RTP, or a payload type not negotiated, or SRTPFailed
	SRTPFailed            uint64 // on an SRTP call: not authentic (a wrong key, plain RTP)
	Late, Lost            uint64 // arrived after their slot; slots concealed
	DTMF                  uint64
	// Gaps are beats the pacer found nothing of ours to send (the player
	// late); Dropped, packets it had no room for.
	Gaps, Dropped uint64
}

// leg is the RTP side of a call: it owns the UDP socket, sends the
// agent's audio one packet per player frame, and plays the caller's audio
// out of a jitter buffer into the session, one frame per period.
type leg struct {
	conn      *net.UDPConn
	codec     codec
	pt        uint8
	tePT      int // telephone-event payload type, -1 when none
	inputRate int
	frame     time.Duration
	timeout   time.Duration
	h         legHandler
	log       *slog.Logger

	remote    atomic.Pointer[netip.AddrPort]
	symmetric bool // send to where the caller's RTP comes from
	latched   atomic.Bool
	// sending and receiving follow the negotiated direction (hold).
	sending, receiving atomic.Bool
	lastRx             atomic.Int64 // unix nanoseconds of the last RTP in

	jb   *jitter.Buffer
	keys dtmf.Detector

	out struct {
		mu      sync.Mutex
		seq     uint16
		ts      uint32
		ssrc    uint32
		started bool
		payload []byte
		packet  []byte
		sealed  []byte // packet protected, on an SRTP call
	}
	// sec is the call's SRTP, nil for plain RTP; a re-INVITE may swap it.
	sec        atomic.Pointer[srtpSession]
	srtpLogged atomic.Bool
	srtpBad    atomic.Uint64
	lane       atomic.Pointer[lane] // where packets go, from the start of run
	pacer      *pacer               // sends the leg's packets on its schedule; set before run
	badLogged  atomic.Bool

	packetsIn, bad, keysIn atomic.Uint64
}

// listenRTP opens a leg's UDP socket on host (port chosen by the system).
func listenRTP(host netip.Addr) (*net.UDPConn, error) {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(host, 0)))
	if err != nil {
		return nil, fmt.Errorf("sip: RTP socket: %w", err)
	}
	return conn, nil
}

// newLeg makes the leg of conn for codec c; it owns conn from then on,
// and closes it on failure too.
func newLeg(conn *net.UDPConn, c Codec, tePT int, inputRate int, timeout time.Duration, h legHandler, log *slog.Logger) (*leg, error) {
	cd, err := newCodec(c)
	if err != nil {
		conn.Close()
		return nil, err
	}
	jb, err := jitter.New(cd.Rate(), media.DefaultFrameDuration)
	if err != nil {
		conn.Close()
		return nil, err
	}
	l := &leg{conn: conn, codec: cd, pt: c.PayloadType, tePT: tePT, inputRate: inputRate,
		frame: media.DefaultFrameDuration, timeout: timeout, h: h, log: log, jb: jb}
	l.out.ssrc = rand.Uint32()
	l.out.seq = uint16(rand.Uint32())
	l.out.ts = rand.Uint32()
	l.out.payload = make([]byte, 0, 1500)
	l.out.packet = make([]byte, 1500)
	l.out.sealed = make([]byte, 0, 1500)
	l.sending.Store(true)
	l.receiving.Store(true)
	return l, nil
}

// Port is the leg's local RTP port.
func (l *leg) Port() int { return l.conn.LocalAddr().(*net.UDPAddr).Port }

// Rate is the PCM rate the leg sends and plays at.
func (l *leg) Rate() int { return l.codec.Rate() }

// setRemote points the leg at the caller's RTP address and says which ways
// media flows ("sendrecv", "sendonly", "recvonly", "inactive", as seen from
// Holdline's side).
func (l *leg) setRemote(addr netip.AddrPort, direction string) {
	l.remote.Store(&addr)
	l.sending.Store(direction == "sendrecv" || direction == "sendonly")
	l.receiving.Store(direction == "sendrecv" || direction == "recvonly")
	if addr.Addr().IsUnspecified() {
		l.sending.Store(false)
	}
	// A direction change restarts the inactivity clock: a caller back from
	// hold gets a whole timeout to start sending again.
	l.lastRx.Store(time.Now().UnixNano())
}

// WriteFrame queues one frame of the agent's audio as one RTP packet for
// the pacer: a media.Sink for the session's player. It never blocks for
// long and never fails the player: a frame that cannot go is dropped.
func (l *leg) WriteFrame(f media.Frame) error {
	o := &l.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if f.SampleRate != l.codec.Rate() || len(f.Samples) == 0 {
		return nil
	}
	step := uint32(len(f.Samples) * l.codec.ClockRate() / l.codec.Rate())
	marker := !o.started
	o.started = true
	defer func() { o.seq++; o.ts += step }()
	remote, ln := l.remote.Load(), l.lane.Load()
	if ln == nil || !l.sending.Load() || remote == nil || !remote.IsValid() {
		return nil
	}
	payload, err := l.codec.Encode(o.payload[:0], f.Samples)
	if err != nil {
		return nil
	}
	p := rtp.Packet{Header: rtp.Header{Version: 2, Marker: marker, PayloadType: l.pt, SequenceNumber: o.seq, Timestamp: o.ts, SSRC: o.ssrc}, Payload: payload}
	n, err := p.MarshalTo(o.packet)
	if err != nil {
		return nil
	}
	pkt := o.packet[:n]
	if sec := l.sec.Load(); sec != nil {
		if pkt, err = sec.protect(o.sealed[:0], pkt); err != nil {
			return nil
		}
	}
	ln.push(pkt, *remote)
	return nil
}

// run reads and plays the caller's audio until ctx ends, the socket fails
// or no RTP came for the timeout (ErrRTPTimeout).
func (l *leg) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.lastRx.Store(time.Now().UnixNano())
	if l.pacer != nil {
		ln, err := l.pacer.add(l.conn)
		if err != nil {
			return err
		}
		l.lane.Store(ln)
		defer ln.remove()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		<-ctx.Done()
		l.conn.Close() // ends read
	})
	wg.Go(func() { l.read() })
	err := l.play(ctx)
	cancel()
	wg.Wait()
	return err
}

// read takes packets off the socket until it is closed.
func (l *leg) read() {
	buf := make([]byte, 1500)
	pcm := make([]int16, 0, 5760)
	var p rtp.Packet
	for {
		n, from, err := l.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		pcm = l.handle(&p, buf[:n], from, pcm)
	}
}

// handle takes one datagram from the caller's side: RTP of the call's
// codec into the jitter buffer, telephone-events to the key detector,
// anything else counted and dropped. pcm is scratch space, returned for
// reuse.
func (l *leg) handle(p *rtp.Packet, datagram []byte, from netip.AddrPort, pcm []int16) []int16 {
	if sec := l.sec.Load(); sec != nil {
		plain, why := sec.unprotect(datagram)
		if why != "" {
			l.rejectSRTP(from, why)
		}
		if plain == nil {
			return pcm
		}
		datagram = plain
	}
	if err := p.Unmarshal(datagram); err != nil || p.Version != 2 {
		l.reject(from, "not an RTP packet")
		return pcm
	}
	switch {
	case p.PayloadType == l.pt:
	case l.tePT >= 0 && int(p.PayloadType) == l.tePT:
	default:
		l.reject(from, fmt.Sprintf("payload type %d was not negotiated", p.PayloadType))
		return pcm
	}
	l.lastRx.Store(time.Now().UnixNano())
	// Symmetric RTP (RFC 4961), when asked for: answer where the caller's
	// media comes from, which behind a NAT is not what its SDP says.
	if l.symmetric && !l.latched.Swap(true) {
		if r := l.remote.Load(); r == nil || *r != from {
			l.remote.Store(&from)
		}
	}
	if !l.receiving.Load() {
		l.packetsIn.Add(1) // on hold: taken, not played
		return pcm
	}
	if int(p.PayloadType) == l.tePT {
		ev, err := dtmf.Parse(p.Payload)
		if err != nil {
			l.reject(from, err.Error())
			return pcm
		}
		l.packetsIn.Add(1)
		if d, ok := l.keys.Push(p.Timestamp, ev); ok {
			l.keysIn.Add(1)
			if l.h.DTMF != nil {
				l.h.DTMF(d)
			}
		}
		return pcm
	}
	pcm, err := l.codec.Decode(pcm[:0], p.Payload)
	if err != nil || len(pcm) == 0 {
		l.reject(from, "undecodable payload")
		return pcm
	}
	l.packetsIn.Add(1)
	_ = l.jb.Push(p.SequenceNumber, p.Timestamp, p.Marker, pcm)
	return pcm
}

// reject counts a packet that is not the caller's media; the first is
// logged with its reason, the rest only counted.
func (l *leg) reject(from netip.AddrPort, why string) {
	l.bad.Add(1)
	if !l.badLogged.Swap(true) {
		l.log.Warn("RTP packet ignored", "from", from, "reason", why)
	}
}

// rejectSRTP counts a datagram an SRTP call could not authenticate; the
// first is logged with its reason (never with the key), apart from other
// bad packets, so that a key mismatch is always told.
func (l *leg) rejectSRTP(from netip.AddrPort, why string) {
	l.bad.Add(1)
	l.srtpBad.Add(1)
	if !l.srtpLogged.Swap(true) {
		l.log.Warn("SRTP packet dropped", "from", from, "reason", why)
	}
}

// play hands the caller's audio to the session one frame per period, from
// the jitter buffer, and watches for the caller going quiet on the wire.
func (l *leg) play(ctx context.Context) error {
	framer, err := media.NewFramer(l.inputRate, l.frame)
	if err != nil {
		return err
	}
	emit := func(f media.Frame) error {
		if l.h.Audio != nil {
			l.h.Audio(f)
		}
		return nil
	}
	out := make([]int16, media.SamplesFor(l.codec.Rate(), l.frame))
	t := time.NewTicker(l.frame)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if l.receiving.Load() && l.timeout > 0 && now.Sub(time.Unix(0, l.lastRx.Load())) > l.timeout {
				return ErrRTPTimeout
			}
			l.jb.Pop(out)
			_ = framer.Write(out, l.codec.Rate(), emit)
		}
	}
}

// Stats returns the leg's counters.
func (l *leg) Stats() legStats {
	js := l.jb.Stats()
	var out laneStats
	if ln := l.lane.Load(); ln != nil {
		out = ln.stats()
	}
	return legStats{
		PacketsIn: l.packetsIn.Load(), PacketsOut: out.Sent, Bad: l.bad.Load(), SRTPFailed: l.srtpBad.Load(),
		Late: js.Late, Lost: js.Concealed, DTMF: l.keysIn.Load(),
		Gaps: out.Underruns, Dropped: out.Overruns + out.Errors,
	}
}
