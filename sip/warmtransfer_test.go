package sip_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sipgo "github.com/emiago/sipgo/sip"
	"github.com/pion/rtp"
	"github.com/zaf/g711"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/media/dtmf"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/tools"
)

// What a phone in these tests hears, told apart by pitch (zero crossings
// in a 20 ms PCMA packet): the agent's voice is the scripted TTS's 220 Hz
// tone, the hold audio the 425 Hz comfort tone, and the caller and the
// person say tones of their own.
type sound string

const (
	quiet      sound = "quiet"
	agentVoice sound = "agent"  // ~9 crossings
	holdMusic  sound = "hold"   // ~17
	callerTone sound = "caller" // 1000 Hz, ~40
	personTone sound = "person" // 1500 Hz, ~60
)

const (
	callerHz = 1000
	personHz = 1500
)

func classify(pcm []int16) sound {
	var sum float64
	zc := 0
	for i, s := range pcm {
		v := float64(s) / 32768
		sum += v * v
		if i > 0 && (pcm[i-1] < 0) != (s < 0) {
			zc++
		}
	}
	if math.Sqrt(sum/float64(max(len(pcm), 1))) < 0.01 {
		return quiet
	}
	switch {
	case zc < 13:
		return agentVoice
	case zc < 26:
		return holdMusic
	case zc < 50:
		return callerTone
	}
	return personTone
}

type phonePacket struct {
	at    time.Time
	sound sound
}

// phone is one end's RTP, in PCMA: it records what it hears, and once it
// has heard from Holdline (symmetric RTP: it answers where Holdline's
// packets come from) sends a packet every 20 ms, a tone while talking.
type phone struct {
	t    *testing.T
	conn *net.UDPConn
	hz   int

	mu      sync.Mutex
	heard   []phonePacket
	remote  netip.AddrPort
	talking bool
	utter   int // packets of tone still to say
	keys    []rune
	started chan struct{}
	once    sync.Once
}

func newPhone(t *testing.T, hz int) *phone {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := &phone{t: t, conn: conn, hz: hz, started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(p.read)
	wg.Go(func() { p.send(ctx) })
	t.Cleanup(func() {
		cancel()
		conn.Close()
		wg.Wait()
	})
	return p
}

func (p *phone) port() int { return p.conn.LocalAddr().(*net.UDPAddr).Port }

func (p *phone) read() {
	buf := make([]byte, 1500)
	for {
		n, from, err := p.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		at := time.Now()
		var pkt rtp.Packet
		if pkt.Unmarshal(buf[:n]) != nil || pkt.PayloadType != 8 {
			continue
		}
		pcm := make([]int16, len(pkt.Payload))
		for i, b := range pkt.Payload {
			pcm[i] = g711.DecodeAlawFrame(b)
		}
		p.mu.Lock()
		p.heard = append(p.heard, phonePacket{at, classify(pcm)})
		p.remote = from
		p.mu.Unlock()
		p.once.Do(func() { close(p.started) })
	}
}

func (p *phone) send(ctx context.Context) {
	select {
	case <-p.started:
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var seq uint16
	var ts uint32
	var n int
	pcm := make([]int16, 160)
	buf := make([]byte, 0, 200)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		to, talking, keys := p.remote, p.talking || p.utter > 0, p.keys
		p.keys = nil
		p.utter = max(p.utter-1, 0)
		p.mu.Unlock()
		for _, k := range keys {
			evs, err := dtmf.Packets(k, 100*time.Millisecond, 8000)
			if err != nil {
				p.t.Error(err)
				return
			}
			for i, ev := range evs {
				pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 101, SequenceNumber: seq, Timestamp: ts, SSRC: 7, Marker: i == 0}, Payload: ev.AppendTo(nil)}
				b, _ := pkt.Marshal()
				_, _ = p.conn.WriteToUDPAddrPort(b, to)
				seq++
			}
			ts += 800
		}
		for i := range pcm {
			pcm[i] = 0
			if talking {
				pcm[i] = int16(0.3 * 32767 * math.Sin(2*math.Pi*float64(p.hz)*float64(n+i)/8000))
			}
		}
		n += len(pcm)
		payload := buf[:0]
		for _, s := range pcm {
			payload = append(payload, g711.EncodeAlawFrame(s))
		}
		pkt := rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 8, SequenceNumber: seq, Timestamp: ts, SSRC: 7}, Payload: payload}
		b, _ := pkt.Marshal()
		_, _ = p.conn.WriteToUDPAddrPort(b, to)
		seq++
		ts += 160
	}
}

func (p *phone) talk(on bool) {
	p.mu.Lock()
	p.talking = on
	p.mu.Unlock()
}

// say talks for n packets (20 ms each), then is quiet.
func (p *phone) say(n int) {
	p.mu.Lock()
	p.utter = n
	p.mu.Unlock()
}

// press sends key as RFC 4733 events.
func (p *phone) press(key rune) {
	p.mu.Lock()
	p.keys = append(p.keys, key)
	p.mu.Unlock()
}

// first is when the first packet of sound s arrived at or after from
// (zero: none yet).
func (p *phone) first(s sound, from time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.heard {
		if h.sound == s && !h.at.Before(from) {
			return h.at
		}
	}
	return time.Time{}
}

// count is how many packets of sound s arrived from from to to.
func (p *phone) count(s sound, from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range p.heard {
		if h.sound == s && !h.at.Before(from) && h.at.Before(to) {
			n++
		}
	}
	return n
}

// wait polls, every 5 ms up to timeout, for the first packet of s at or
// after from.
func (p *phone) wait(s sound, from time.Time, timeout time.Duration) time.Time {
	p.t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if at := p.first(s, from); !at.IsZero() {
			return at
		}
	}
	p.t.Fatalf("no %s heard within %v", s, timeout)
	return time.Time{}
}

// waitQuiet polls for n quiet packets in a row after from: the end of what
// was playing.
func (p *phone) waitQuiet(from time.Time, n int, timeout time.Duration) time.Time {
	p.t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		run := 0
		for _, h := range p.heard {
			if h.at.Before(from) {
				continue
			}
			if h.sound != quiet {
				run = 0
				continue
			}
			if run++; run == n {
				at := h.at
				p.mu.Unlock()
				return at
			}
		}
		p.mu.Unlock()
	}
	p.t.Fatalf("no %d quiet packets in a row within %v", n, timeout)
	return time.Time{}
}

// caller is a phone calling Holdline by hand-made SIP: it answers
// Holdline's in-dialog requests (BYE 200; REFER as onRefer says).
type caller struct {
	u     *rawUA
	id    string
	toTag string // To of the 200, with Holdline's tag
	ph    *phone
	// onRefer answers a REFER; nil: 403.
	onRefer func(c *caller, req string)
	byed    chan struct{}
	once    sync.Once
	cseq    atomic.Int64
}

// pcmaOffer offers PCMA and telephone-event at port; extra is more
// headers.
const pcmaOffer = `v=0
o=- 1 1 IN IP4 127.0.0.1
s=-
c=IN IP4 127.0.0.1
t=0 0
m=audio %d RTP/AVP 8 101
a=rtpmap:8 PCMA/8000
a=rtpmap:101 telephone-event/8000
a=fmtp:101 0-15
`

func callHoldline(t *testing.T, addr netip.AddrPort, id, extraHeaders string, onRefer func(*caller, string)) *caller {
	t.Helper()
	ph := newPhone(t, callerHz)
	u := dialRaw(t, addr)
	inv := invite(u.local(), id, "application/sdp", fmt.Sprintf(pcmaOffer, ph.port()))
	if extraHeaders != "" {
		inv = strings.Replace(inv, "Max-Forwards: 70\n", "Max-Forwards: 70\n"+extraHeaders, 1)
	}
	u.send(inv)
	res := u.final(5 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("INVITE answered %q", res)
	}
	c := &caller{u: u, id: id, toTag: header(res, "To"), ph: ph, onRefer: onRefer, byed: make(chan struct{})}
	c.cseq.Store(1)
	c.request("ACK", "", "", 1)
	// Holdline sends first (silence, then the agent): the phone latches
	// on and answers.
	done := make(chan struct{})
	go c.serve(done)
	t.Cleanup(func() { u.conn.Close(); <-done })
	return c
}

// request sends an in-dialog request.
func (c *caller) request(method, extra, body string, seq int64) {
	ct := ""
	if body != "" {
		ct = "Content-Type: message/sipfrag\n"
	}
	c.u.send(fmt.Sprintf("%[1]s sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[2]s;branch=z9hG4bK-%[3]s-%[4]d-%[1]s\nFrom: <sip:caller@%[2]s>;tag=%[3]s\nTo: %[5]s\nCall-ID: %[3]s\nCSeq: %[4]d %[1]s\nContact: <sip:caller@%[2]s>\nMax-Forwards: 70\n%[6]s%[7]sContent-Length: %[8]d\n\n%[9]s",
		method, c.u.local(), c.id, seq, c.toTag, extra, ct, len(body), body))
}

// hangUp sends BYE.
func (c *caller) hangUp() { c.request("BYE", "", "", c.cseq.Add(1)) }

func (c *caller) serve(done chan struct{}) {
	defer close(done)
	buf := make([]byte, 65535)
	for {
		_ = c.u.conn.SetReadDeadline(time.Time{})
		n, err := c.u.conn.Read(buf)
		if err != nil {
			return
		}
		msg := string(buf[:n])
		switch {
		case strings.HasPrefix(msg, "BYE "):
			c.u.respond(msg, "200 OK")
			c.once.Do(func() { close(c.byed) })
		case strings.HasPrefix(msg, "REFER "):
			if c.onRefer == nil {
				c.u.respond(msg, "403 Forbidden")
				continue
			}
			c.onRefer(c, msg)
		}
	}
}

// hungUpOn waits for Holdline's BYE.
func (c *caller) hungUpOn(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.byed:
	case <-time.After(timeout):
		t.Fatalf("Holdline did not hang up within %v", timeout)
	}
}

// deskAgent is an agent whose model, asked to reply, says one sentence
// and calls transfer_to_desk, whose body is transfer; told how the tool
// went, it says so (its words then are the agent coming back). Its
// recogniser is ears; the tool's outcome goes to outcome.
type deskAgent struct {
	ears    *scripted.STT
	voice   *scripted.TTS
	rec     *recorder
	outcome chan error
	called  chan time.Time // when the tool's body began
	told    chan told      // what the model was told of the tool, and when
}

// told is a tool result as the model read it.
type told struct {
	output string
	at     time.Time
}

func newDeskAgent(t *testing.T, transfer func(ctx context.Context) error) (*deskAgent, sip.AgentFunc) {
	d := &deskAgent{ears: scripted.NewSTT(), rec: &recorder{}, outcome: make(chan error, 1), called: make(chan time.Time, 1), told: make(chan told, 8)}
	var err error
	d.voice, err = scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithWordsPerSecond(8))
	if err != nil {
		t.Fatal(err)
	}
	tool := tools.MustNew("transfer_to_desk", "Put the caller through to the front desk.", func(ctx context.Context, _ struct{}) (string, error) {
		d.called <- time.Now()
		err := transfer(ctx)
		d.outcome <- err
		if err != nil {
			return "", err
		}
		return "connected", nil
	}, tools.WithTimeout(2*time.Minute))
	model := scripted.NewLLMFunc(func(req llm.Request) scripted.Response {
		if req.Reason == llm.ReasonSummary {
			return scripted.Response{Text: "Ann wants to move her Friday booking to Saturday."}
		}
		for _, it := range req.Context.Items {
			if it.Kind == llm.KindToolResult {
				select {
				case d.told <- told{it.Output, time.Now()}:
				default: // a test reads only the first
				}
				if it.IsError {
					return scripted.Response{Text: "Sorry, nobody at the desk could take your call, so I am back with you. What else can I do for you today?"}
				}
				return scripted.Response{}
			}
		}
		return scripted.Response{Text: "One moment please.", ToolCalls: []scripted.Call{{ID: "t1", Name: "transfer_to_desk"}}}
	})
	return d, func(context.Context) (*runtime.Agent, func(), error) {
		return &runtime.Agent{Name: "front", Model: model, TTS: d.voice, STT: d.ears, Tools: []*tools.Tool{tool},
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				d.rec.attach(s)
				return s.GenerateReply(ctx, "")
			}}, nil, nil
	}
}

// sippPerson runs a sipp UAS as the person, whose media is ph: it
// answers (or not) as scenario says. It returns the URI to call and a
// channel with sipp's end.
func sippPerson(t *testing.T, ctx context.Context, scenario string, ph *phone, extra ...string) (string, <-chan error) {
	t.Helper()
	path := needSipp(t)
	dir := t.TempDir()
	sf := filepath.Join(dir, "person.xml")
	if err := os.WriteFile(sf, []byte(strings.ReplaceAll(scenario, "PHONE_PORT", strconv.Itoa(ph.port()))), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.CommandContext(ctx, path, "-sf", sf, "-i", "127.0.0.1", "-p", strconv.Itoa(port), "-mi", "127.0.0.1",
		"-mp", strconv.Itoa(sippMediaPort(t)), "-nostdin", "-trace_err", "-timeout", "60s", "-timeout_error")
	if len(extra) == 0 {
		extra = []string{"-m", "1"}
	}
	cmd.Args = append(cmd.Args, extra...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		if err != nil {
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			var all strings.Builder
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				fmt.Fprintf(&all, "--- %s\n%s\n", filepath.Base(f), b)
			}
			err = fmt.Errorf("%w\n%s\n%s", err, out.String(), all.String())
		}
		done <- err
	}()
	waitSippBound(t, port)
	return fmt.Sprintf("sip:desk@127.0.0.1:%d", port), done
}

// waitSippBound waits until sipp has bound its UDP port.
func waitSippBound(t *testing.T, port int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			return // taken: sipp has it
		}
		c.Close()
	}
	t.Fatalf("sipp did not bind port %d", port)
}

// personAnswers is the head of the person's scenarios: the INVITE, 180,
// then (unless answerLater) 200 with SDP naming the test's phone, and the
// ACK. Holdline's From is kept for the requests the person sends.
const personHead = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="person">
  <recv request="INVITE" crlf="true">
    <action>
      <ereg regexp=".*" search_in="hdr" header="From:" check_it="true" assign_to="hfrom"/>
      <ereg regexp="([0-9]+) INVITE" search_in="hdr" header="CSeq:" check_it="true" assign_to="cs,csn"/>
    </action>
  </recv>
  <send>
    <![CDATA[
      SIP/2.0 180 Ringing
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:desk@[local_ip]:[local_port];transport=[transport]>
      Content-Length: 0
    ]]>
  </send>
`

const personAnswer = `
  <send>
    <![CDATA[
      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:desk@[local_ip]:[local_port];transport=[transport]>
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=desk 1 1 IN IP4 127.0.0.1
      s=-
      c=IN IP4 127.0.0.1
      t=0 0
      m=audio PHONE_PORT RTP/AVP 8 101
      a=rtpmap:8 PCMA/8000
      a=rtpmap:101 telephone-event/8000
      a=fmtp:101 0-15
    ]]>
  </send>
  <recv request="ACK" crlf="true"/>
`

// personRequest is a request in the person's dialog with Holdline.
func personRequest(method, extra, body string) string {
	return `
  <send>
    <![CDATA[
      ` + method + ` sip:holdline@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: <sip:desk@[local_ip]:[local_port]>;tag=[pid]SIPpTag01[call_number]
      To: [$hfrom]
      [last_Call-ID:]
      CSeq: [cseq] ` + method + `
      Contact: <sip:desk@[local_ip]:[local_port]>
      Max-Forwards: 70
      ` + extra + `Content-Length: [len]

      ` + body + `
    ]]>
  </send>
`
}

const byeFromHoldline = `
  <recv request="BYE"/>
  <send>
    <![CDATA[
      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:]
      [last_Call-ID:]
      [last_CSeq:]
      Content-Length: 0
    ]]>
  </send>
`

const scenarioEnd = `
  <Reference variables="hfrom,cs,csn"/>
</scenario>
`

// personAcceptsByKey answers and waits for Holdline's BYE: the test's
// phone presses 1 (RFC 4733).
const personAcceptsByKey = personHead + personAnswer + byeFromHoldline + scenarioEnd

// personDeclinesByInfo answers, lets a second of the briefing play, and
// presses 2 as SIP INFO.
var personDeclinesByInfo = personHead + personAnswer + `
  <pause milliseconds="1000"/>` + personRequest("INFO", "Content-Type: application/dtmf-relay\n      ", "Signal=2\n      Duration=160") + `
  <recv response="200"/>` + byeFromHoldline + scenarioEnd

// personHangsUp answers and hangs up 500 ms into the briefing.
var personHangsUp = personHead + personAnswer + `
  <pause milliseconds="500"/>` + personRequest("BYE", "", "") + `
  <recv response="200"/>` + scenarioEnd

// personNeverAnswers rings until Holdline CANCELs.
const personNeverAnswers = personHead + `
  <recv request="CANCEL"/>
  <send>
    <![CDATA[
      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Content-Length: 0
    ]]>
  </send>
  <send>
    <![CDATA[
      SIP/2.0 487 Request Terminated
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      CSeq: [$csn] INVITE
      Content-Length: 0
    ]]>
  </send>
  <recv request="ACK"/>
` + scenarioEnd

const briefing = "Ann Lee wants to move her Friday booking to Saturday evening."

// warmServer serves the desk agent, checkpointing to a store the test can
// read.
func warmServer(t *testing.T, transfer func(ctx context.Context) error, opts ...sip.Option) (*deskAgent, netip.AddrPort, store.Store, handoff.Key) {
	t.Helper()
	st, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key := handoff.Key{ID: "k", Secret: []byte("a snapshot key for the warm transfer tests")}
	d, newAgent := newDeskAgent(t, transfer)
	_, addr := serveAgent(t, newAgent, append([]sip.Option{sip.WithStore(st, "w", key)}, opts...)...)
	return d, addr, st, key
}

// transferState reads the transfer's state from the session's latest
// checkpoint, once one covers e.
func transferState(t *testing.T, d *deskAgent, st store.Store, key handoff.Key, e events.Event) sip.TransferState {
	t.Helper()
	d.rec.checkpointed(t, e)
	snap, err := handoff.Resume(context.Background(), st, e.Session, key)
	if err != nil {
		t.Fatal(err)
	}
	var ts sip.TransferState
	if err := json.Unmarshal(snap.State.UserData[sip.TransferStateKey], &ts); err != nil {
		t.Fatalf("the checkpoint's transfer state: %v (%s)", err, snap.State.UserData[sip.TransferStateKey])
	}
	return ts
}

// toolCalled waits for the model to call the tool, and says when its body
// began.
func (d *deskAgent) toolCalled(t *testing.T) time.Time {
	t.Helper()
	select {
	case at := <-d.called:
		return at
	case <-time.After(10 * time.Second):
		t.Fatalf("the tool was not called: %v", d.rec.kinds())
		return time.Time{}
	}
}

// waitTold waits for the model to be told how the tool went. The model
// reads the result on its own time after the tool returns, so a test
// that reads it at once can be early.
func (d *deskAgent) waitTold(t *testing.T, timeout time.Duration) told {
	t.Helper()
	select {
	case r := <-d.told:
		return r
	case <-time.After(timeout):
		t.Fatalf("the model was not told the tool's result within %v: %v", timeout, d.rec.kinds())
		return told{}
	}
}

// outcome waits for the tool's WarmTransfer to return.
func (d *deskAgent) waitOutcome(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-d.outcome:
		return err
	case <-time.After(timeout):
		t.Fatalf("WarmTransfer did not return within %v: %v", timeout, d.rec.kinds())
		return nil
	}
}

// summary is what the model writes for a briefing not given.
const summary = "Ann wants to move her Friday booking to Saturday."

// warmTrial is one accepted warm transfer, bridged; it returns the time
// from the tool call to the person's first briefing audio, and from the
// person's acceptance (key 1 pressed, or "yes" said and the speech
// ended) to the caller's voice reaching them. Said by voice, the
// briefing is the model's summary.
func warmTrial(t *testing.T, n int, byVoice bool) (toBriefing, toConnected time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	person := newPhone(t, personHz)
	target, sippDone := sippPerson(t, ctx, personAcceptsByKey, person)
	d, addr, st, key := warmServer(t, func(ctx context.Context) error {
		if byVoice {
			return sip.WarmTransfer(ctx, target)
		}
		return sip.WarmTransfer(ctx, target, sip.WithBriefing(briefing))
	})
	said := briefing
	if byVoice {
		said = summary
	}
	c := callHoldline(t, addr, fmt.Sprintf("warm-accept-%d", n), "", nil)
	start := time.Now()

	// The agent says its sentence, then the caller is on hold.
	c.ph.wait(agentVoice, start, 5*time.Second)
	called := d.toolCalled(t)
	held := c.ph.wait(holdMusic, called, 5*time.Second)
	c.ph.talk(true) // the caller talks on hold: the agent must not answer
	c.ph.press('5') // nor take a key
	// The person hears the briefing: the agent's voice, from silence.
	heard := person.wait(agentVoice, called, 10*time.Second)
	if n := person.count(agentVoice, time.Time{}, heard) + person.count(holdMusic, time.Time{}, heard) + person.count(callerTone, time.Time{}, heard); n != 0 {
		t.Errorf("the person heard %d packets of something before the briefing", n)
	}
	ended := person.waitQuiet(heard, 10, 10*time.Second)
	// 8 words a second, 50 packets a second.
	want := len(strings.Fields(said)) * 50 / 8
	if n := person.count(agentVoice, heard, ended); n < want*85/100 || n > want*115/100 {
		t.Errorf("the person heard %d packets of the briefing; want about %d: %s", n, want, person.runs())
	}
	if texts := d.voice.Texts(); !slices.Contains(texts, said) {
		t.Errorf("the voice never spoke the briefing: %q", texts)
	}
	// The caller heard hold all along, never the agent.
	if n := c.ph.count(agentVoice, held.Add(time.Second), ended); n > 3 {
		t.Errorf("the caller heard the agent %d times on hold", n)
	}
	accepted := time.Now()
	if byVoice {
		d.ears.Say("yeah sure, put them through")
		person.say(20)
		accepted = accepted.Add(400 * time.Millisecond) // the end of the words

	} else {
		person.press('1')
	}
	if err := d.waitOutcome(t, 10*time.Second); err != nil {
		t.Fatalf("WarmTransfer: %v", err)
	}
	person.talk(true)
	connected := person.wait(callerTone, accepted, 5*time.Second)
	c.ph.wait(personTone, accepted, 5*time.Second)
	// The caller's words while held reached nobody: no turn of the
	// caller's, and only the tool's result reached the model.
	if d.rec.find(events.UserTurn, "") || d.rec.find(events.DTMF, "") || d.rec.find(events.SpeechStarted, "") {
		t.Errorf("the caller's speech or key on hold reached the agent: %v", d.rec.kinds())
	}
	for _, k := range []string{"transfer_started(" + target + ")", "transfer_briefing(" + said + ")", "transfer_connected(" + target + ")[bridge]"} {
		if !slices.Contains(d.rec.kinds(), k) {
			t.Errorf("no %s: %v", k, d.rec.kinds())
		}
	}
	e := d.rec.waitFor(t, events.TransferConnected, "")
	if ts := transferState(t, d, st, key, e); ts.Step != "connected" || ts.How != "bridge" || ts.Target != target {
		t.Errorf("checkpointed transfer state %+v", ts)
	}
	// Bridged until one hangs up: the caller does, and the person is
	// hung up.
	c.hangUp()
	if err := <-sippDone; err != nil {
		t.Fatalf("sipp person: %v", err)
	}
	return heard.Sub(called), connected.Sub(accepted)
}

// The person answers, hears the briefing (and nothing before it) while
// the caller hears hold music, presses 1, and the two are bridged: each
// hears the other; the caller's speech on hold started no turn; when the
// caller hangs up, the person is hung up.
func TestWarmTransferAcceptedIsBridged(t *testing.T) {
	needSipp(t)
	trials := 2
	if v := os.Getenv("HOLDLINE_WARM_TRIALS"); v != "" {
		var err error
		if trials, err = strconv.Atoi(v); err != nil || trials < 1 {
			t.Fatalf("HOLDLINE_WARM_TRIALS=%q", v)
		}
	}
	var brief, connect []time.Duration
	for i := range trials {
		b, c := warmTrial(t, i, false)
		brief, connect = append(brief, b), append(connect, c)
	}
	slices.Sort(brief)
	slices.Sort(connect)
	t.Logf("warm transfer over %d trials: tool call -> person hears the briefing p50 %v p95 %v; accepted (key 1) -> caller heard by the person p50 %v p95 %v",
		trials, percentile(brief, 0.5), percentile(brief, 0.95), percentile(connect, 0.5), percentile(connect, 0.95))
}

// The person hears the model's summary of the call, says "yeah sure",
// which the agent's recogniser hears, and is put through.
func TestWarmTransferAcceptedByVoiceWithTheModelsSummary(t *testing.T) {
	needSipp(t)
	warmTrial(t, 0, true)
}

// failedTransfer runs a warm transfer to a sipp person playing scenario,
// with opts, and checks what every failure has in common: WarmTransfer's
// error is want, the hold ends and the agent is back with the caller
// (its words about the failure heard, the tool's error seen by the
// model), the person is hung up or never connected, and a
// transfer_failed event with reason is checkpointed.
func failedTransfer(t *testing.T, scenario string, want error, reason string, opts ...sip.WarmTransferOption) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	person := newPhone(t, personHz)
	target, sippDone := sippPerson(t, ctx, scenario, person)
	d, addr, st, key := warmServer(t, func(ctx context.Context) error {
		return sip.WarmTransfer(ctx, target, append([]sip.WarmTransferOption{sip.WithBriefing(briefing + " " + briefing + " " + briefing)}, opts...)...)
	})
	c := callHoldline(t, addr, "warm-"+reason, "", nil)
	called := d.toolCalled(t)
	held := c.ph.wait(holdMusic, called, 5*time.Second)
	err := d.waitOutcome(t, 20*time.Second)
	failed := time.Now()
	if !errors.Is(err, want) || !errors.Is(err, sip.ErrTransferFailed) {
		t.Fatalf("WarmTransfer: %v; want %v", err, want)
	}
	// The agent comes back: its voice after the failure, and no more
	// hold music once it speaks.
	back := c.ph.wait(agentVoice, failed, 5*time.Second)
	if back.Sub(failed) > 3*time.Second {
		t.Errorf("the agent came back %v after the failure", back.Sub(failed))
	}
	quietEnd := c.ph.waitQuiet(back, 10, 10*time.Second)
	if n := c.ph.count(holdMusic, back.Add(100*time.Millisecond), quietEnd); n > 2 {
		t.Errorf("hold music went on after the agent came back: %d packets", n)
	}
	if c.ph.count(holdMusic, held, failed) < 10 {
		t.Errorf("the caller heard little hold music")
	}
	if r := d.waitTold(t, 5*time.Second); !strings.Contains(r.output, strings.TrimPrefix(want.Error(), "sip: ")) {
		t.Errorf("the model was told %q; want the transfer's error", r.output)
	}
	e := d.rec.waitFor(t, events.TransferFailed, target)
	if e.Reason != reason {
		t.Errorf("transfer_failed reason %q, error %q; want %q", e.Reason, e.Error, reason)
	}
	if ts := transferState(t, d, st, key, e); ts.Step != "failed" || ts.Reason != reason {
		t.Errorf("checkpointed transfer state %+v", ts)
	}
	if !slices.Contains(d.rec.kinds(), "transfer_started("+target+")") {
		t.Errorf("no transfer_started: %v", d.rec.kinds())
	}
	if err := <-sippDone; err != nil {
		t.Fatalf("sipp person: %v", err)
	}
	if n := person.count(callerTone, time.Time{}, time.Now()); n != 0 {
		t.Errorf("the person heard the caller (%d packets) though never connected", n)
	}
	c.hangUp()
}

// The person presses 2 (SIP INFO) during the briefing.
func TestWarmTransferDeclined(t *testing.T) {
	needSipp(t)
	failedTransfer(t, personDeclinesByInfo, sip.ErrTransferDeclined, "declined")
}

// The person's phone rings (180) and nobody answers: Holdline CANCELs at
// the answer timeout.
func TestWarmTransferNotAnswered(t *testing.T) {
	needSipp(t)
	failedTransfer(t, personNeverAnswers, sip.ErrTransferNoAnswer, "no_answer", sip.WithAnswerTimeout(1500*time.Millisecond))
}

// The person answers and hangs up during the briefing.
func TestWarmTransferHungUpDuringBriefing(t *testing.T) {
	needSipp(t)
	failedTransfer(t, personHangsUp, sip.ErrTransferHungUp, "hung_up")
}

// The person listens to the briefing and says nothing: Holdline hangs up
// at the decision timeout.
func TestWarmTransferNoDecision(t *testing.T) {
	needSipp(t)
	failedTransfer(t, personAcceptsByKey, sip.ErrTransferNoDecision, "no_decision", sip.WithDecisionTimeout(time.Second))
}

func (p *phone) runs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	var last sound
	n := 0
	for _, h := range p.heard {
		if h.sound != last && n > 0 {
			fmt.Fprintf(&b, "%s×%d ", last, n)
			n = 0
		}
		last = h.sound
		n++
	}
	fmt.Fprintf(&b, "%s×%d", last, n)
	return b.String()
}

// personReplaced is a person whose phone takes Replaces: the first
// INVITE (Holdline's) is answered, and the key 1 comes from the test's
// phone; the second, the caller's INVITE with Replaces naming that
// dialog (its to-tag is the person's tag of the first call), is answered
// and the first dialog hung up (BYE to Holdline), as a phone does when
// one call replaces another; the caller hangs the second up.
var personReplaced = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="person replaced">
  <recv request="INVITE" crlf="true">
    <action>
      <ereg regexp=".*" search_in="hdr" header="From:" check_it="true" assign_to="hfrom"/>
      <ereg regexp="to-tag=[0-9]+SIPpTag011" search_in="hdr" header="Replaces:" assign_to="rep"/>
    </action>
  </recv>
  <nop next="replaced" test="rep"/>
` + personAnswer[strings.Index(personAnswer, "<send>"):] + `
  <pause milliseconds="1500"/>` + personRequest("BYE", "", "") + `
  <recv response="200"/>
  <nop next="end"/>
  <label id="replaced"/>
  <send>
    <![CDATA[
      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag02[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:desk@[local_ip]:[local_port];transport=[transport]>
      Content-Type: application/sdp
      Content-Length: [len]

      v=0
      o=desk 2 1 IN IP4 127.0.0.1
      s=-
      c=IN IP4 127.0.0.1
      t=0 0
      m=audio PHONE_PORT RTP/AVP 8
      a=rtpmap:8 PCMA/8000
    ]]>
  </send>
  <recv request="ACK" crlf="true"/>` + byeFromHoldline + `
  <label id="end"/>
  <Reference variables="hfrom,rep"/>
</scenario>
`

// replacingCaller answers Holdline's REFER as a phone that takes
// Replaces: 202, then an INVITE to the Refer-To target with its Replaces
// header, and a NOTIFY with the answer; the Refer-To goes to referTo.
func replacingCaller(t *testing.T, referTo chan<- string) func(*caller, string) {
	return func(c *caller, req string) {
		c.u.respond(req, "202 Accepted")
		rt := header(req, "Refer-To")
		referTo <- rt
		go func() {
			target, query, _ := strings.Cut(strings.Trim(rt, "<>"), "?")
			rep, err := url.QueryUnescape(strings.TrimPrefix(query, "Replaces="))
			if err != nil {
				t.Errorf("Refer-To %q: %v", rt, err)
				return
			}
			var uri sipgo.Uri
			if err := sipgo.ParseUri(target, &uri); err != nil {
				t.Errorf("Refer-To %q: %v", rt, err)
				return
			}
			to := netip.AddrPortFrom(netip.MustParseAddr(uri.Host), uint16(uri.Port))
			u := dialRaw(t, to)
			id := c.id + "-replacing"
			inv := invite(u.local(), id, "application/sdp", fmt.Sprintf(pcmaOffer, c.ph.port()))
			inv = strings.Replace(inv, "INVITE sip:agent@127.0.0.1", "INVITE "+target, 1)
			inv = strings.Replace(inv, "Max-Forwards: 70\n", "Max-Forwards: 70\nReplaces: "+rep+"\n", 1)
			u.send(inv)
			res := u.final(5 * time.Second)
			code := strings.Fields(res + " x 0")[1]
			if !strings.HasPrefix(res, "SIP/2.0 200 ") || !strings.Contains(header(res, "To"), "SIPpTag02") {
				t.Errorf("the INVITE with Replaces was answered %q; want 200 from the person's phone, replacing", res)
			} else {
				ack := strings.Replace(strings.Replace(inv, "INVITE "+target, "ACK "+target, 1), "CSeq: 1 INVITE", "CSeq: 1 ACK", 1)
				ack = strings.Replace(ack, "To: <sip:agent@127.0.0.1>", "To: "+header(res, "To"), 1)
				u.send(ack[:strings.Index(ack, "Content-Type")] + "Content-Length: 0\n\n")
			}
			c.request("NOTIFY", "Event: refer\nSubscription-State: terminated;reason=noresource\n", "SIP/2.0 "+code+" OK", c.cseq.Add(1))
			if code != "200" {
				return
			}
			// The caller talks with the person, then hangs up.
			bye := strings.Replace(strings.Replace(inv, "INVITE "+target, "BYE "+target, 1), "CSeq: 1 INVITE", "CSeq: 2 BYE", 1)
			bye = strings.Replace(bye, "To: <sip:agent@127.0.0.1>", "To: "+header(res, "To"), 1)
			u.send(bye[:strings.Index(bye, "Content-Type")] + "Content-Length: 0\n\n")
		}()
	}
}

// A caller whose phone advertises REFER and Replaces is connected to the
// person by a REFER with Replaces: the Refer-To names the person and
// Holdline's dialog with them (the person's tag as to-tag), the caller's
// phone calls the person replacing it, the person's phone hangs up
// Holdline's dialog, and Holdline hangs up the caller's: no media through
// Holdline any more.
func TestWarmTransferByReferWithReplaces(t *testing.T) {
	needSipp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	person := newPhone(t, personHz)
	target, sippDone := sippPerson(t, ctx, personReplaced, person, "-m", "2")
	d, addr, _, _ := warmServer(t, func(ctx context.Context) error {
		return sip.WarmTransfer(ctx, target, sip.WithBriefing(briefing))
	})
	referTo := make(chan string, 1)
	c := callHoldline(t, addr, "warm-replaces", "Allow: INVITE, ACK, BYE, CANCEL, OPTIONS, REFER, NOTIFY\nSupported: replaces, norefersub\n", replacingCaller(t, referTo))
	called := d.toolCalled(t)
	c.ph.wait(holdMusic, called, 5*time.Second)
	heard := person.wait(agentVoice, called, 10*time.Second)
	accepted := time.Now()
	person.press('1')
	var rt string
	select {
	case rt = <-referTo:
	case <-time.After(5 * time.Second):
		t.Fatalf("no REFER: %v", d.rec.kinds())
	}
	t.Logf("accepted (key 1) -> REFER with Replaces at the caller: %v", time.Since(accepted))
	if !strings.Contains(rt, strings.TrimPrefix(target, "sip:")) || !strings.Contains(rt, "?Replaces=") ||
		!regexp.MustCompile(`to-tag%3D[0-9]+SIPpTag011%3Bfrom-tag%3D`).MatchString(rt) {
		t.Errorf("Refer-To %s: want the person's URI with Replaces naming Holdline's dialog with them", rt)
	}
	if err := d.waitOutcome(t, 10*time.Second); err != nil {
		t.Fatalf("WarmTransfer: %v", err)
	}
	c.hungUpOn(t, 10*time.Second)
	if !slices.Contains(d.rec.kinds(), "transfer_connected("+target+")[refer]") {
		t.Errorf("no transfer_connected by refer: %v", d.rec.kinds())
	}
	if n := c.ph.count(agentVoice, heard.Add(time.Second), accepted); n > 3 {
		t.Errorf("the caller heard the agent %d times on hold", n)
	}
	if err := <-sippDone; err != nil {
		t.Fatalf("sipp person: %v", err)
	}
}

// A caller whose phone advertises Replaces but refuses the REFER (503)
// is bridged instead: the person accepted and is waiting.
func TestWarmTransferBridgesWhenTheReferIsRefused(t *testing.T) {
	needSipp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	person := newPhone(t, personHz)
	target, sippDone := sippPerson(t, ctx, personAcceptsByKey, person)
	d, addr, _, _ := warmServer(t, func(ctx context.Context) error {
		return sip.WarmTransfer(ctx, target, sip.WithBriefing(briefing))
	})
	refused := make(chan struct{}, 1)
	c := callHoldline(t, addr, "warm-refused", "Allow: INVITE, ACK, BYE, REFER\nSupported: replaces\n", func(c *caller, req string) {
		// Noted before the answer, which may end the transfer before the
		// test looks.
		refused <- struct{}{}
		c.u.respond(req, "503 Service Unavailable")
	})
	called := d.toolCalled(t)
	person.wait(agentVoice, called, 10*time.Second)
	accepted := time.Now()
	person.press('1')
	if err := d.waitOutcome(t, 10*time.Second); err != nil {
		t.Fatalf("WarmTransfer: %v", err)
	}
	select {
	case <-refused:
	default:
		t.Fatal("no REFER was tried")
	}
	c.ph.talk(true)
	person.talk(true)
	person.wait(callerTone, accepted, 5*time.Second)
	c.ph.wait(personTone, accepted, 5*time.Second)
	if !slices.Contains(d.rec.kinds(), "transfer_connected("+target+")[bridge]") {
		t.Errorf("no transfer_connected by bridge: %v", d.rec.kinds())
	}
	c.hangUp()
	if err := <-sippDone; err != nil {
		t.Fatalf("sipp person: %v", err)
	}
}

// A blind transfer whose REFER the caller's side answers 503 fails with
// that reason, and the call stays with the agent, who says so.
func TestBlindTransferReferRefusedStaysWithTheAgent(t *testing.T) {
	d, addr, _, _ := warmServer(t, func(ctx context.Context) error {
		return sip.Transfer(ctx, "sip:billing@127.0.0.1:5999", sip.WithTransferTimeout(5*time.Second))
	})
	c := callHoldline(t, addr, "blind-503", "", func(c *caller, req string) { c.u.respond(req, "503 Service Unavailable") })
	d.toolCalled(t)
	err := d.waitOutcome(t, 10*time.Second)
	if !errors.Is(err, sip.ErrTransferFailed) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Transfer: %v; want ErrTransferFailed saying 503", err)
	}
	r := d.waitTold(t, 5*time.Second)
	if !strings.Contains(r.output, "503") {
		t.Errorf("the model was told %q; want the 503", r.output)
	}
	// The agent's answer to the failure, not the tail of its "One
	// moment please.", which a refusal this quick can still be playing.
	c.ph.wait(agentVoice, r.at, 5*time.Second)
	select {
	case <-c.byed:
		t.Fatal("Holdline hung up on the caller")
	default:
	}
	c.hangUp()
}

// Outside a phone call there is nobody to put on hold.
func TestWarmTransferOutsideACallIsAnError(t *testing.T) {
	if err := sip.WarmTransfer(context.Background(), "sip:desk@127.0.0.1"); !errors.Is(err, sip.ErrNotACall) {
		t.Fatalf("WarmTransfer outside a call: %v; want ErrNotACall", err)
	}
}
