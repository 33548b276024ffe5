package sip_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/zaf/g711"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/internal/need"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
)

// needSipp returns sipp's path, or skips (fails under make test, which
// installs it).
func needSipp(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("sipp")
	if err != nil {
		need.Missing(t, "sipp is missing: make test-deps installs it (Debian package sip-tester)")
	}
	return path
}

// recorder collects a call's events, from the agent's OnEnter on.
type recorder struct {
	mu  sync.Mutex
	evs []events.Event
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		s := string(e.Kind)
		if e.Text != "" {
			s += "(" + e.Text + ")"
		}
		if e.Reason != "" {
			s += "[" + e.Reason + "]"
		}
		out = append(out, s)
	}
	return out
}

func (r *recorder) find(kind events.Kind, text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.evs, func(e events.Event) bool { return e.Kind == kind && (text == "" || e.Text == text) })
}

// startServer serves SIP on a loopback port with a scripted agent that
// greets, answers a key press, and records its events.
func startServer(t *testing.T, opts ...sip.Option) (*sip.Server, netip.AddrPort, *recorder) {
	t.Helper()
	rec := &recorder{}
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000))
		if err != nil {
			return nil, nil, err
		}
		model := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
			return scripted.Response{TTFB: 50 * time.Millisecond, Text: "Hello, you have reached Holdline. How can I help you today?"}
		})
		return &runtime.Agent{
			Name: "phone", Instructions: "Be brief.", Model: model, TTS: voice, STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				rec.attach(s)
				return s.GenerateReply(ctx, "")
			},
		}, nil, nil
	}
	srv, addr := serveAgent(t, newAgent, opts...)
	return srv, addr, rec
}

// attach records s's events from now on.
func (r *recorder) attach(s *runtime.Session) {
	sub := s.Subscribe(4096)
	go func() {
		for e := range sub.C() {
			r.mu.Lock()
			r.evs = append(r.evs, e)
			r.mu.Unlock()
		}
	}()
}

// serveAgent serves SIP on a loopback port with newAgent until the test
// ends.
func serveAgent(t *testing.T, newAgent sip.AgentFunc, opts ...sip.Option) (*sip.Server, netip.AddrPort) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := sip.New(newAgent, append([]sip.Option{sip.WithLogger(logger)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeUDP(ctx, conn) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeUDP: %v", err)
		}
	})
	return srv, netip.MustParseAddrPort(conn.LocalAddr().String())
}

// listener is the RTP endpoint the caller's SDP names: it counts and
// decodes what Holdline sends.
type listener struct {
	conn *net.UDPConn
	mu   sync.Mutex
	pkts []heard
}

type heard struct {
	at  time.Time
	seq uint16
	ts  uint32
	pt  uint8
	rms float64
}

func listen(t *testing.T) *listener {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{conn: conn}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			at := time.Now()
			var p rtp.Packet
			if p.Unmarshal(buf[:n]) != nil {
				continue
			}
			var sum float64
			for _, b := range p.Payload {
				v := float64(g711.DecodeAlawFrame(b)) / 32768
				sum += v * v
			}
			l.mu.Lock()
			l.pkts = append(l.pkts, heard{at, p.SequenceNumber, p.Timestamp, p.PayloadType, math.Sqrt(sum / float64(max(len(p.Payload), 1)))})
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return l
}

func (l *listener) port() int { return l.conn.LocalAddr().(*net.UDPAddr).Port }

func (l *listener) heard() []heard {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.pkts)
}

// freePort returns a UDP port free on loopback just now, for sipp.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.UDP()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// uacScenario is a sipp UAC: an INVITE offering PCMA and telephone-event
// with RTP to rtpPort, the ACK, a wait while the greeting plays, then a
// recorded caller (g711a.pcap, 7 s),
// the key 1 (RFC 4733, dtmf_2833_1.pcap), and a BYE.
const uacScenario = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="holdline uac">
  <send retrans="500">
    <![CDATA[
      INVITE sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 1 INVITE
      Contact: sip:caller@[local_ip]:[local_port]
      Max-Forwards: 70
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio %d RTP/AVP 8 101
      a=rtpmap:8 PCMA/8000
      a=rtpmap:101 telephone-event/8000
      a=fmtp:101 0-15
      a=sendrecv
    ]]>
  </send>
  <recv response="100" optional="true"/>
  <recv response="180" optional="true"/>
  <recv response="200" rtd="true"/>
  <send>
    <![CDATA[
      ACK sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 1 ACK
      Contact: sip:caller@[local_ip]:[local_port]
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <pause milliseconds="6000"/>
  <nop><action><exec play_pcap_audio="/usr/share/sip-tester/g711a.pcap"/></action></nop>
  <pause milliseconds="8000"/>
  <nop><action><exec play_pcap_audio="/usr/share/sip-tester/dtmf_2833_1.pcap"/></action></nop>
  <pause milliseconds="2000"/>
  <send retrans="500">
    <![CDATA[
      BYE sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 2 BYE
      Contact: sip:caller@[local_ip]:[local_port]
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <recv response="200" crlf="true"/>
</scenario>
`

func runSipp(t *testing.T, ctx context.Context, scenario string, target netip.AddrPort, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	sf := filepath.Join(dir, "scenario.xml")
	if err := os.WriteFile(sf, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-sf", sf, "-i", "127.0.0.1", "-p", fmt.Sprint(freePort(t)),
		"-mi", "127.0.0.1", "-mp", fmt.Sprint(sippMediaPort(t)), "-nostdin", "-trace_err", "-trace_screen",
		"-timeout", "60s", "-timeout_error"}, extra...)
	args = append(args, target.String())
	cmd := exec.CommandContext(ctx, needSipp(t), args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var all strings.Builder
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		fmt.Fprintf(&all, "--- %s\n%s\n", filepath.Base(f), b)
	}
	if err != nil {
		t.Fatalf("sipp: %v\n%s\n%s", err, out.String(), all.String())
	}
	return out.String()
}

// sipp calls Holdline as a phone would, tried as a new user would: the
// INVITE is answered, the agent's greeting goes out as PCMA RTP at a
// steady 20 ms (measured at the address the caller's SDP named), the
// caller's recorded audio reaches the session, the key 1 pressed as RFC 4733
// events is one dtmf event, and the caller's BYE ends the call.
func TestSippCallIsAnsweredHeardAndHungUp(t *testing.T) {
	needSipp(t)
	srv, addr, rec := startServer(t)
	l := listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	runSipp(t, ctx, fmt.Sprintf(uacScenario, l.port()), addr, "-m", "1")

	deadline := time.Now().Add(5 * time.Second)
	for srv.Calls() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := srv.Calls(); n != 0 {
		t.Errorf("%d calls still up after the BYE", n)
	}
	pkts := l.heard()
	var loud int
	var gaps []float64
	for i, p := range pkts {
		if p.pt != 8 {
			t.Fatalf("packet %d has payload type %d; want 8 (PCMA)", i, p.pt)
		}
		if p.rms > 0.02 {
			loud++
		}
		if i > 0 {
			gaps = append(gaps, float64(p.at.Sub(pkts[i-1].at))/float64(time.Millisecond))
			if p.seq != pkts[i-1].seq+1 || p.ts-pkts[i-1].ts != 160 {
				t.Errorf("packet %d: seq %d ts %d after seq %d ts %d; want +1, +160", i, p.seq, p.ts, pkts[i-1].seq, pkts[i-1].ts)
			}
		}
	}
	// About 16 s of call at 50 packets a second.
	if len(pkts) < 700 {
		t.Fatalf("Holdline sent %d RTP packets over the call; want about 800", len(pkts))
	}
	if loud < 50 {
		t.Errorf("%d of %d packets carried the greeting's sound; want at least 50 (1 s)", loud, len(pkts))
	}
	slices.Sort(gaps)
	p50, p99 := gaps[len(gaps)/2], gaps[len(gaps)*99/100]
	t.Logf("Holdline's RTP at the caller: %d packets, %d loud; spacing p50 %.1f ms, p99 %.1f ms", len(pkts), loud, p50, p99)
	if !rec.find(events.DTMF, "1") {
		t.Errorf("no dtmf event for the key 1: %v", rec.kinds())
	}
	if !rec.find(events.UserTurn, engine.DTMFText('1')) {
		t.Errorf("the key press was not a user turn: %v", rec.kinds())
	}
	if !rec.find(events.PlayoutDone, "Hello, you have reached Holdline. How can I help you today?") {
		t.Errorf("the greeting never finished playing: %v", rec.kinds())
	}
	if !rec.find(events.SpeechStarted, "") {
		t.Errorf("the caller's recorded speech was never heard: %v", rec.kinds())
	}
}

// loadScenario: each call offers PCMA, plays the recorded caller and
// stays up for holdMS before its BYE.
const loadScenario = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="holdline load">
  <send retrans="500">
    <![CDATA[
      INVITE sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 1 INVITE
      Contact: sip:caller@[local_ip]:[local_port]
      Max-Forwards: 70
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 8 101
      a=rtpmap:8 PCMA/8000
      a=rtpmap:101 telephone-event/8000
    ]]>
  </send>
  <recv response="100" optional="true"/>
  <recv response="200" rtd="true"/>
  <send>
    <![CDATA[
      ACK sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 1 ACK
      Contact: sip:caller@[local_ip]:[local_port]
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <nop><action><exec play_pcap_audio="/usr/share/sip-tester/g711a.pcap"/></action></nop>
  <pause milliseconds="%d"/>
  <send retrans="500">
    <![CDATA[
      BYE sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 2 BYE
      Contact: sip:caller@[local_ip]:[local_port]
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <recv response="200" crlf="true"/>
</scenario>
`

// The load run (HOLDLINE_SIP_LOAD=200 go test -run TestSippLoad -v ./sip;
// HOLDLINE_SIP_LOAD_AEC=0 turns echo cancellation off): sipp places the
// calls at 50 a second, each with the recorded caller's RTP, and holds
// them; over a window with every call up it reports CPU and memory per
// call and the p99 deviation of Holdline's RTP send spacing from 20 ms.
// sipp's exit status says whether any call failed.
func TestSippLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HOLDLINE_SIP_LOAD"))
	if n <= 0 {
		t.Skip("HOLDLINE_SIP_LOAD=N runs the load test with N concurrent calls")
	}
	var opts []sip.Option
	aec := os.Getenv("HOLDLINE_SIP_LOAD_AEC") != "0"
	if !aec {
		opts = append(opts, sip.WithSessionOptions(engine.WithInput(engine.InputConfig{Rate: 8000, NoEchoCancellation: true})))
	}
	rt := os.Getenv("HOLDLINE_SIP_LOAD_RT") == "1"
	if rt {
		opts = append(opts, sip.WithRealtimePacing())
	}
	srv, addr, _ := startServer(t, opts...)
	const window = 5 * time.Second
	rampUp := time.Duration(n) * time.Second / 50
	hold := rampUp + window + 4*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), hold+2*time.Minute)
	defer cancel()
	debug.FreeOSMemory()
	var m0 goruntime.MemStats
	goruntime.ReadMemStats(&m0)
	rss0 := rssKiB(t)

	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("%v", r)}
			}
		}()
		sf := filepath.Join(t.TempDir(), "load.xml")
		_ = os.WriteFile(sf, fmt.Appendf(nil, loadScenario, hold.Milliseconds()), 0o644)
		cmd := exec.CommandContext(ctx, needSipp(t), "-sf", sf, "-i", "127.0.0.1", "-p", fmt.Sprint(freePort(t)),
			"-mi", "127.0.0.1", "-mp", fmt.Sprint(sippMediaPort(t)), "-nostdin", "-m", fmt.Sprint(n), "-l", fmt.Sprint(n),
			"-r", "50", "-timeout", fmt.Sprint(int((hold+time.Minute).Seconds()))+"s", "-timeout_error", addr.String())
		cmd.Dir = filepath.Dir(sf)
		out, err := cmd.CombinedOutput()
		done <- result{string(out), err}
	}()
	deadline := time.Now().Add(rampUp + 30*time.Second)
	for srv.Calls() < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := srv.Calls(); got < n {
		t.Fatalf("only %d of %d calls up", got, n)
	}
	time.Sleep(time.Second) // past the greetings' start
	hist0 := sip.SendHistogram(srv)
	late0, missed0, gaps0, dropped0 := sip.PacerCounts(srv)
	cpu0, wall0 := cpuSeconds(), time.Now()
	time.Sleep(window)
	cpu := cpuSeconds() - cpu0
	wall := time.Since(wall0).Seconds()
	calls := srv.Calls()
	hist := sip.SendHistogram(srv)
	for i := range hist {
		hist[i] -= hist0[i]
	}
	late, missed, gaps, dropped := sip.PacerCounts(srv)
	var m1 goruntime.MemStats
	goruntime.ReadMemStats(&m1)
	rss1 := rssKiB(t)
	r := <-done
	if r.err != nil {
		t.Fatalf("sipp: %v\n%s", r.err, r.out)
	}
	p50, n50 := sip.SpacingQuantile(hist, 0.5)
	p99, _ := sip.SpacingQuantile(hist, 0.99)
	p999, _ := sip.SpacingQuantile(hist, 0.999)
	allP99, all := srv.SendJitter(0.99)
	t.Logf("%d calls (echo cancellation %v, real-time pacing %v), all completed by sipp; during %.1fs with %d up: server %.0f%% of a core = %.2f%% per call; heap %+.0f KiB and RSS %+d KiB per call",
		n, aec, rt, wall, calls, 100*cpu/wall, 100*cpu/wall/float64(calls),
		(float64(m1.HeapInuse)-float64(m0.HeapInuse))/1024/float64(calls), (rss1-rss0)/int64(calls))
	t.Logf("RTP send spacing off 20 ms in that window: p50 %v, p99 %v, p99.9 %v (%d spacings); pacer late %d, missed %d; gaps %d, dropped %d; over the whole test p99 %v (%d spacings)",
		p50, p99, p999, n50, late-late0, missed-missed0, gaps-gaps0, dropped-dropped0, allP99, all)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func rssKiB(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return 0
}

// Holdline places a call to sipp's built-in UAS, tried as a new user
// would: the callee answers (PCMU), the agent speaks into the call, and
// when the caller's side is done Holdline hangs up with a BYE that sipp
// counts as a successful call.
func TestCallPlacedToSippIsAnsweredAndHungUp(t *testing.T) {
	sippPath := needSipp(t)
	srv, _, rec := startServer(t)
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, sippPath, "-sn", "uas", "-i", "127.0.0.1", "-p", fmt.Sprint(port),
		"-mi", "127.0.0.1", "-mp", fmt.Sprint(sippMediaPort(t)), "-m", "1", "-nostdin", "-trace_err", "-timeout", "30s", "-timeout_error")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sippDone := make(chan error, 1)
	go func() { sippDone <- cmd.Wait() }()
	time.Sleep(300 * time.Millisecond) // sipp binds its port

	callCtx, hangUp := context.WithTimeout(ctx, 4*time.Second)
	defer hangUp()
	start := time.Now()
	if err := srv.Call(callCtx, fmt.Sprintf("sip:uas@127.0.0.1:%d", port)); err != nil {
		t.Fatalf("Call: %v\n%s", err, out.String())
	}
	t.Logf("the call lasted %v", time.Since(start).Round(time.Millisecond))
	if err := <-sippDone; err != nil {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		var all strings.Builder
		for _, f := range logs {
			b, _ := os.ReadFile(f)
			all.Write(b)
		}
		t.Fatalf("sipp UAS: %v (it counts a call that did not end with BYE and 200 as failed)\n%s\n%s", err, out.String(), all.String())
	}
	if !rec.find(events.PlayoutStarted, "") {
		t.Errorf("the agent never spoke into the placed call: %v", rec.kinds())
	}
	if srv.Calls() != 0 {
		t.Errorf("%d calls up after the hang-up", srv.Calls())
	}
}

// authUAC: the INVITE is challenged (401), sipp answers the challenge with
// its -au/-ap credentials, the call is answered and hung up.
const authUAC = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="holdline auth uac">
  <send retrans="500">
    <![CDATA[
      INVITE sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=z9hG4bK-first-[pid]-[call_number]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 1 INVITE
      Contact: sip:caller@[local_ip]:[local_port]
      Max-Forwards: 70
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 0
      a=rtpmap:0 PCMU/8000
    ]]>
  </send>
  <recv response="100" optional="true"/>
  <recv response="401" auth="true"/>
  <send>
    <![CDATA[
      ACK sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=z9hG4bK-first-[pid]-[call_number]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 1 ACK
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <send retrans="500">
    <![CDATA[
      INVITE sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>
      Call-ID: [call_id]
      CSeq: 2 INVITE
      Contact: sip:caller@[local_ip]:[local_port]
      [authentication username=trunk password=s3cret]
      Max-Forwards: 70
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=user1 53655765 2353687637 IN IP[local_ip_type] [local_ip]
      s=-
      c=IN IP[media_ip_type] [media_ip]
      t=0 0
      m=audio [media_port] RTP/AVP 0
      a=rtpmap:0 PCMU/8000
    ]]>
  </send>
  <recv response="100" optional="true"/>
  <recv response="200" rtd="true"/>
  <send>
    <![CDATA[
      ACK sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 2 ACK
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <pause milliseconds="1000"/>
  <send retrans="500">
    <![CDATA[
      BYE sip:agent@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: caller <sip:caller@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: agent <sip:agent@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 3 BYE
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <recv response="200" crlf="true"/>
</scenario>
`

// A trunk that must authenticate: sipp answers the digest challenge and
// its call is taken; an INVITE with a wrong password gets 403, and one
// from outside the allowlist 403 too.
func TestDigestAuthAndAllowlist(t *testing.T) {
	_, addr, _ := startServer(t, sip.WithDigestAuth("holdline", "trunk", "s3cret"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runSipp(t, ctx, authUAC, addr, "-m", "1")

	// Wrong password: a digest computed with another one.
	u := dialRaw(t, addr)
	u.send(invite(u.local(), "no-auth", "application/sdp", fmt.Sprintf(pcmuOffer, 40000)))
	res := u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 401 ") {
		t.Fatalf("INVITE without credentials answered %q; want 401", res)
	}
	chal := header(res, "WWW-Authenticate")
	nonce := between(chal, `nonce="`, `"`)
	forged := fmt.Sprintf(`Digest username="trunk", realm="holdline", nonce="%s", uri="sip:agent@127.0.0.1", response="00000000000000000000000000000000", algorithm=MD5, qop=auth, nc=00000001, cnonce="abc"`, nonce)
	msg := strings.Replace(invite(u.local(), "bad-auth", "application/sdp", fmt.Sprintf(pcmuOffer, 40000)), "Max-Forwards: 70", "Authorization: "+forged+"\nMax-Forwards: 70", 1)
	u.send(msg)
	if res := u.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 403 ") {
		t.Fatalf("INVITE with a wrong response answered %q; want 403", res)
	}

	_, addr2, _ := startServer(t, sip.WithAllow(netip.MustParsePrefix("192.0.2.0/24")))
	u2 := dialRaw(t, addr2)
	u2.send(invite(u2.local(), "not-allowed", "application/sdp", fmt.Sprintf(pcmuOffer, 40000)))
	if res := u2.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 403 ") || !strings.Contains(res, "not allowed") {
		t.Fatalf("INVITE from outside the allowlist answered %q; want 403", res)
	}
}

func between(s, from, to string) string {
	_, after, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, to)
	return v
}

// sippMediaPort is a base for sipp's -mp: sipp binds audio RTP there and
// video RTP two ports up, so the whole run must be free.
func sippMediaPort(t *testing.T) int {
	t.Helper()
	port, err := freeport.UDPRun(4)
	if err != nil {
		t.Fatal(err)
	}
	return port
}
