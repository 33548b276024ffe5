package cli

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hraban/opus"

	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/webrtc"
)

// impairment is what the relay does to the browser's RTP on its way to
// the server.
type impairment struct {
	loss       float64       // share of packets dropped at random
	burst      float64       // chance, per packet, that a burst of 2-4 losses starts
	reorder    float64       // share of packets held back
	holdFrom   time.Duration // for 20-60 ms
	holdToUpTo time.Duration
}

// relayCounts is what the relay did: RTP packets seen, dropped, held back,
// and of those held, overtaken (sent after a later one).
type relayCounts struct{ rtp, dropped, held, overtaken int }

// lossRelay is a UDP relay between the browser and the server's peer: the
// answer names it as the server's only candidate, so the browser sends it
// everything, and it forwards to the server's real address and back to the
// browser's latest. Only the browser's RTP is impaired (SRTP: first byte
// 128-191, not RTCP); STUN, DTLS and RTCP pass untouched.
type lossRelay struct {
	conn *net.UDPConn
	imp  impairment
	rng  *rand.Rand
	done chan struct{}

	mu      sync.Mutex
	server  *net.UDPAddr
	browser *net.UDPAddr
	counts  relayCounts
}

func newLossRelay(t *testing.T, imp impairment, seed uint64) *lossRelay {
	t.Helper()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &lossRelay{conn: conn, imp: imp, rng: rand.New(rand.NewPCG(seed, 7)), done: make(chan struct{})}
	go r.run()
	t.Cleanup(func() {
		conn.Close()
		<-r.done
	})
	return r
}

func (r *lossRelay) addr() *net.UDPAddr { return r.conn.LocalAddr().(*net.UDPAddr) }

func (r *lossRelay) setServer(a *net.UDPAddr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.server = a
}

func (r *lossRelay) stats() relayCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

// heldPacket is a browser packet held back, due at a time.
type heldPacket struct {
	due  time.Time
	data []byte
}

type heldQueue []heldPacket

func (q heldQueue) Len() int           { return len(q) }
func (q heldQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q heldQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *heldQueue) Push(x any)        { *q = append(*q, x.(heldPacket)) }
func (q *heldQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// run relays until the socket is closed. One goroutine does it all: held
// packets go out when a read times out at the first one's due time.
func (r *lossRelay) run() {
	defer close(r.done)
	var held heldQueue
	buf := make([]byte, 2048)
	burstLeft := 0
	var top uint16 // the latest sequence number sent on
	send := func(pkt []byte, server *net.UDPAddr) {
		if pkt[0] >= 128 && pkt[0] <= 191 && len(pkt) >= 12 && (pkt[1] < 192 || pkt[1] > 223) {
			if seq := binary.BigEndian.Uint16(pkt[2:]); int16(seq-top) > 0 {
				top = seq
			}
		}
		_, _ = r.conn.WriteToUDP(pkt, server)
	}
	for {
		deadline := time.Now().Add(50 * time.Millisecond)
		if len(held) > 0 && held[0].due.Before(deadline) {
			deadline = held[0].due
		}
		_ = r.conn.SetReadDeadline(deadline)
		n, from, err := r.conn.ReadFromUDP(buf)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return
			}
		}
		r.mu.Lock()
		server, browser := r.server, r.browser
		if n > 0 && (server == nil || !from.IP.Equal(server.IP) || from.Port != server.Port) {
			r.browser, browser = from, from
		}
		r.mu.Unlock()
		now := time.Now()
		for len(held) > 0 && !held[0].due.After(now) && server != nil {
			p := heap.Pop(&held).(heldPacket)
			if int16(binary.BigEndian.Uint16(p.data[2:])-top) < 0 {
				r.mu.Lock()
				r.counts.overtaken++
				r.mu.Unlock()
			}
			send(p.data, server)
		}
		if n == 0 || server == nil {
			continue
		}
		pkt := buf[:n]
		if from.IP.Equal(server.IP) && from.Port == server.Port {
			if browser != nil {
				_, _ = r.conn.WriteToUDP(pkt, browser)
			}
			continue
		}
		// RTP, not RTCP (payload types 72-95 with the marker bit are
		// RTCP's 200-223).
		if pkt[0] < 128 || pkt[0] > 191 || n < 12 || pkt[1] >= 192 && pkt[1] <= 223 {
			_, _ = r.conn.WriteToUDP(pkt, server)
			continue
		}
		r.mu.Lock()
		r.counts.rtp++
		r.mu.Unlock()
		imp := r.imp
		switch {
		case burstLeft > 0:
			burstLeft--
			r.drop()
		case imp.burst > 0 && r.rng.Float64() < imp.burst:
			burstLeft = 1 + r.rng.IntN(3)
			r.drop()
		case imp.loss > 0 && r.rng.Float64() < imp.loss:
			r.drop()
		case imp.reorder > 0 && r.rng.Float64() < imp.reorder:
			hold := imp.holdFrom + time.Duration(r.rng.Int64N(int64(imp.holdToUpTo-imp.holdFrom)+1))
			heap.Push(&held, heldPacket{due: now.Add(hold), data: bytes.Clone(pkt)})
			r.mu.Lock()
			r.counts.held++
			r.mu.Unlock()
		default:
			send(pkt, server)
		}
	}
}

func (r *lossRelay) drop() {
	r.mu.Lock()
	r.counts.dropped++
	r.mu.Unlock()
}

// throughRelay rewrites an answer's candidates to the relay's one, and
// returns the server's own loopback candidate.
func throughRelay(answer string, relay *net.UDPAddr) (string, *net.UDPAddr, error) {
	var out []string
	var server *net.UDPAddr
	added := false
	for _, line := range strings.Split(strings.TrimRight(answer, "\r\n"), "\r\n") {
		if !strings.HasPrefix(line, "a=candidate:") {
			out = append(out, line)
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 8 && strings.EqualFold(f[2], "udp") && f[4] == "127.0.0.1" && server == nil {
			a, err := net.ResolveUDPAddr("udp4", f[4]+":"+f[5])
			if err != nil {
				return "", nil, err
			}
			server = a
		}
		if !added {
			out = append(out, fmt.Sprintf("a=candidate:1 1 udp 2130706431 127.0.0.1 %d typ host", relay.Port))
			added = true
		}
	}
	if server == nil {
		return "", nil, fmt.Errorf("no 127.0.0.1 candidate in the answer:\n%s", answer)
	}
	return strings.Join(out, "\r\n") + "\r\n", server, nil
}

// withoutCandidates returns sdp without its candidate lines.
func withoutCandidates(sdp string) string {
	var out []string
	for _, line := range strings.Split(sdp, "\r\n") {
		if !strings.HasPrefix(line, "a=candidate:") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\r\n")
}

// lossBrowser is what test/browser/loss.mjs prints.
type lossBrowser struct {
	OK                 bool    `json:"ok"`
	Error              string  `json:"error"`
	PacketsSent        int     `json:"packetsSent"`
	BytesSent          int     `json:"bytesSent"`
	RemoteFractionLost float64 `json:"remoteFractionLost"`
	Sent               []struct {
		TS      uint32 `json:"ts"`
		Payload []byte `json:"payload"`
	} `json:"sent"`
}

// sentAudio decodes every frame the browser sent, in timestamp order, at
// 16 kHz: what the peer would hand on over a perfect network.
func sentAudio(t *testing.T, b lossBrowser) []int16 {
	t.Helper()
	dec, err := opus.NewDecoder(16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	frames := slices.Clone(b.Sent)
	slices.SortFunc(frames, func(x, y struct {
		TS      uint32 `json:"ts"`
		Payload []byte `json:"payload"`
	}) int {
		return int(int32(x.TS - y.TS))
	})
	var out []int16
	pcm := make([]int16, 1920)
	for _, f := range frames {
		n, err := dec.Decode(f.Payload, pcm)
		if err != nil {
			t.Fatalf("decoding a frame the browser sent: %v", err)
		}
		out = append(out, pcm[:n]...)
	}
	return out
}

// lossRun is one call from the browser through the relay.
type lossRun struct {
	pcm          []int16      // what the peer handed the session, 16 kHz
	warm, end    webrtc.Stats // the peer's figures after warmFrames, and at the end
	relay        relayCounts
	browser      lossBrowser
	connectAfter time.Duration
}

// warmFrames is how much audio (2 s) the measures leave out at the start:
// the connection settling, the sender learning of the loss.
const warmFrames = 100

// callThroughRelay has the browser call a bare webrtc.Transport through a
// relay impairing its audio as imp says, for secs seconds, and records
// what the peer handed the session.
func callThroughRelay(t *testing.T, ctx context.Context, node, script, wav string, imp impairment, seed uint64, secs int) lossRun {
	t.Helper()
	tr, err := webrtc.NewTransport(webrtc.WithInterfaces("lo"), webrtc.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	relay := newLossRelay(t, imp, seed)
	var (
		mu    sync.Mutex
		run   lossRun
		peer  atomic.Pointer[webrtc.Peer]
		peers []*webrtc.Peer
	)
	audio := func(f media.Frame) {
		mu.Lock()
		defer mu.Unlock()
		run.pcm = append(run.pcm, f.Samples...)
		if len(run.pcm) == warmFrames*320 {
			if p := peer.Load(); p != nil {
				run.warm = p.Stats()
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "<!doctype html><title>a lossy path</title>")
	})
	mux.HandleFunc("POST /offer", func(w http.ResponseWriter, r *http.Request) {
		offer, _ := io.ReadAll(r.Body)
		// Without the browser's candidates the peer cannot reach it but
		// through the relay: it learns the relay's address from the
		// browser's checks.
		p, err := tr.Answer(r.Context(), withoutCandidates(string(offer)), webrtc.Handler{Audio: audio})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		peers = append(peers, p)
		mu.Unlock()
		peer.Store(p)
		answer, server, err := throughRelay(p.Answer(), relay.addr())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		relay.setServer(server)
		w.Header().Set("Content-Type", "application/sdp")
		io.WriteString(w, answer)
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()

	cmd := exec.CommandContext(ctx, node, script, hs.URL, wav, fmt.Sprint(secs))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if jerr := json.Unmarshal(stdout.Bytes(), &run.browser); jerr != nil || !run.browser.OK {
		t.Fatalf("browser: %v %s; output %q\n%s", err, run.browser.Error, stdout.String(), stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range peers {
		run.end = p.Stats()
		p.Close()
	}
	run.relay = relay.stats()
	if len(run.pcm) < (warmFrames+100)*320 {
		t.Fatalf("the peer handed on %d ms of audio in %d s", len(run.pcm)/16, secs)
	}
	return run
}

// envelope is the RMS of each 10 ms of pcm (16 kHz), less its mean.
func envelope(pcm []int16) []float64 {
	env := make([]float64, len(pcm)/160)
	var mean float64
	for i := range env {
		var s float64
		for _, v := range pcm[i*160 : (i+1)*160] {
			s += float64(v) * float64(v)
		}
		env[i] = math.Sqrt(s / 160)
		mean += env[i]
	}
	mean /= float64(len(env))
	for i := range env {
		env[i] -= mean
	}
	return env
}

// residual is the energy of a - b.
func residual(a, b []int16) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return s
}

func dot(a, b []int16) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// alignedSNR compares x, what the peer handed on, with ref, the same
// speech decoded from what the browser sent, sample by sample. x is placed
// in ref by its loudness envelope, then to the sample over its first
// 3 s; from there each 20 ms frame of x follows the frame before or
// moves by whole frames (at most two), because that is how the jitter
// buffer moves the audio when it grows or shrinks its delay: such a move
// is no noise, what was lost or concealed is. SNR is 10 log10 of ref's
// energy over the energy of the difference, at the gain that fits best.
func alignedSNR(ref, x []int16) float64 {
	const frame = 320
	ex, er := envelope(x), envelope(ref)
	bestLag, best := 0, math.Inf(-1)
	for lag := 0; lag+len(ex) <= len(er); lag++ {
		var c float64
		for i, v := range ex {
			c += v * er[i+lag]
		}
		if c > best {
			best, bestLag = c, lag
		}
	}
	fits := func(at, l, n int) bool { return at+l >= 0 && at+l+n <= len(ref) && at+n <= len(x) }
	lag, bc := bestLag*160, math.Inf(-1)
	n := min(len(x), 48000)
	for l := bestLag*160 - 320; l <= bestLag*160+320; l++ {
		if fits(0, l, n) {
			if c := dot(x[:n], ref[l:l+n]); c > bc {
				bc, lag = c, l
			}
		}
	}
	var sxx, srr, sxr float64
	for at := 0; at+frame <= len(x); at += frame {
		xb := x[at : at+frame]
		// Another lag only if it leaves clearly less difference than
		// this one, and little: in a quiet frame any lag fits as badly.
		bl, be := lag, 0.25*dot(xb, xb)
		if fits(at, lag, frame) {
			be = min(be, 0.5*residual(xb, ref[at+lag:at+lag+frame]))
		}
		for _, k := range []int{-2, -1, 1, 2} {
			if l := lag + k*frame; fits(at, l, frame) {
				if e := residual(xb, ref[at+l:at+l+frame]); e < be {
					be, bl = e, l
				}
			}
		}
		if !fits(at, bl, frame) {
			continue
		}
		lag = bl
		for i, v := range xb {
			a, b := float64(v), float64(ref[at+lag+i])
			sxx, srr, sxr = sxx+a*a, srr+b*b, sxr+a*b
		}
	}
	// At the gain that fits best: a level change is no noise.
	g := sxr / srr
	return 10 * math.Log10(g*g*srr/(sxx-2*g*sxr+g*g*srr))
}

// inputCounts are the peer's figures the test reports: packets dropped as
// late, and lost packets rebuilt from FEC.
func inputCounts(s webrtc.Stats) (late, fec uint64) { return s.Late, s.FECRecovered }

// In headless Chromium, a caller's speech crosses a relay that reorders or
// loses its packets on the way to a WebRTC peer. Reordering (one packet in
// ten held 20-60 ms) costs no packet once the jitter buffer has adapted;
// at 5% random loss the browser, told of it by the peer's RTCP reports,
// sends in-band FEC, and the peer rebuilds lost packets from it. What the
// peer hands the session is compared, sample by sample, with a clean
// run's: the SNR of each path is logged against that of a second clean run
// (the measure's own floor: two encodings of the same speech).
func TestBrowserLossyPathReordersAndRecoversByFEC(t *testing.T) {
	node, script := needBrowser(t)
	script = filepath.Join(filepath.Dir(script), "loss.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wav := callerWAV(t, "The quick brown fox jumps over the lazy dog, and then books a table for two at seven.", 0.3, 0.4)

	clean := callThroughRelay(t, ctx, node, script, wav, impairment{}, 1, 9)
	reordered := callThroughRelay(t, ctx, node, script, wav, impairment{reorder: 0.1, holdFrom: 20 * time.Millisecond, holdToUpTo: 60 * time.Millisecond}, 3, 9)
	lossy := callThroughRelay(t, ctx, node, script, wav, impairment{loss: 0.05}, 4, 9)

	// Each run's audio is compared with the same run's frames decoded as
	// the browser sent them: a perfect network's audio of that very
	// encoding, so that only what the path and the peer lost counts.
	snr := func(r lossRun) float64 {
		return alignedSNR(sentAudio(t, r.browser), r.pcm[warmFrames*320:len(r.pcm)-25*320])
	}
	for _, c := range []struct {
		name string
		r    lossRun
	}{{"clean", clean}, {"reordered", reordered}, {"5% loss", lossy}} {
		late, fec := inputCounts(c.r.end)
		t.Logf("%-9s relay: %d RTP, %d dropped, %d held back (%d overtaken); peer: %d in, %d lost, %d late, %d FEC-recovered, %d concealed, jitter delay %v; browser saw %.1f%% lost",
			c.name, c.r.relay.rtp, c.r.relay.dropped, c.r.relay.held, c.r.relay.overtaken, c.r.end.PacketsIn, c.r.end.Lost, late, fec, c.r.end.Concealed,
			c.r.end.JitterDelay, 100*c.r.browser.RemoteFractionLost)
	}
	cleanSNR, reorderSNR, lossSNR := snr(clean), snr(reordered), snr(lossy)
	t.Logf("SNR against what the browser sent, decoded cleanly: clean %.1f dB, reordered %.1f dB, 5%% loss %.1f dB", cleanSNR, reorderSNR, lossSNR)

	lateWarm, _ := inputCounts(reordered.warm)
	lateEnd, _ := inputCounts(reordered.end)
	t.Logf("reordering: %d packets held back, %d dropped as late (%d after the first %d ms)", reordered.relay.held, lateEnd, lateEnd-lateWarm, warmFrames*20)
	if lateEnd-lateWarm != 0 {
		t.Errorf("%d reordered packets dropped as late once the buffer had adapted; want 0", lateEnd-lateWarm)
	}
	lossEnd, fecEnd := lossy.end.Lost, func() uint64 { _, f := inputCounts(lossy.end); return f }()
	t.Logf("5%% loss: %d packets lost, %d rebuilt from FEC (%.0f%%)", lossEnd, fecEnd, 100*float64(fecEnd)/float64(max(lossEnd, 1)))
	if fecEnd == 0 {
		t.Error("no lost packet was rebuilt from FEC: the browser sent none, or the peer did not use it")
	}
	if cleanSNR < 30 || reorderSNR < 20 || lossSNR < 10 {
		t.Errorf("SNR %.1f dB clean, %.1f dB reordered, %.1f dB at 5%% loss; want at least 30, 20 and 10", cleanSNR, reorderSNR, lossSNR)
	}
}
