package sip_test

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/store"
)

// drainPair is two workers sharing a store, the first moving its calls
// to the second (its front door) when it drains.
type drainPair struct {
	a, b         *sip.Server
	addrA, addrB string
	models       [2]*scripted.LLM
	recs         [2]*recorder
}

func newDrainPair(t *testing.T) *drainPair {
	t.Helper()
	st, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key := handoff.Key{ID: "k", Secret: []byte("a snapshot key for the sip tests")}
	p := &drainPair{}
	agent := func(i int) sip.AgentFunc {
		p.models[i] = scripted.NewLLMFunc(func(llm.Request) scripted.Response {
			return scripted.Response{Text: "Hello, this is the restaurant."}
		})
		p.recs[i] = &recorder{}
		return func(context.Context) (*runtime.Agent, func(), error) {
			voice, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithWordsPerSecond(20))
			if err != nil {
				return nil, nil, err
			}
			return &runtime.Agent{Name: "desk", Model: p.models[i], TTS: voice, STT: scripted.NewSTT(),
				OnEnter: func(ctx context.Context, s *runtime.Session) error {
					p.recs[i].attach(s)
					if s.Restored() {
						return nil
					}
					return s.GenerateReply(ctx, "Greet the caller.")
				}}, nil, nil
		}
	}
	var b, a *sip.Server
	b, addrB := serveAgent(t, agent(1), sip.WithStore(st, "worker-b", key))
	a, addrA := serveAgent(t, agent(0), sip.WithStore(st, "worker-a", key), sip.WithFrontDoor("sip:agent@"+addrB.String()))
	p.a, p.b, p.addrA, p.addrB = a, b, addrA.String(), addrB.String()
	return p
}

// call is a raw phone's call to A, answered and ACKed; refer says
// whether its INVITE lists REFER in Allow.
func (p *drainPair) call(t *testing.T, u *rawUA, id string, refer bool) (toTag string) {
	t.Helper()
	inv := invite(u.local(), id, "application/sdp", fmt.Sprintf(pcmuOffer, 40012))
	if refer {
		inv = strings.Replace(inv, "Max-Forwards: 70\n", "Max-Forwards: 70\nAllow: INVITE, ACK, BYE, CANCEL, OPTIONS, NOTIFY, REFER\n", 1)
	}
	u.send(inv)
	res := u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("A answered %q", res)
	}
	to := header(res, "To")
	u.send(fmt.Sprintf("ACK sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-ack-%[2]s\nFrom: <sip:caller@%[1]s>;tag=%[2]s\nTo: %[3]s\nCall-ID: %[2]s\nCSeq: 1 ACK\nMax-Forwards: 70\nContent-Length: 0\n\n", u.local(), id, to))
	deadline := time.Now().Add(10 * time.Second)
	for !p.recs[0].find(events.Idle, "") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !p.recs[0].find(events.Idle, "") {
		t.Fatal("A's call never became idle after the greeting")
	}
	return to
}

func drainA(p *drainPair, timeout time.Duration) <-chan calls.DrainReport {
	out := make(chan calls.DrainReport, 1)
	go func() {
		rep, _ := p.a.Host().Drain(context.Background(), calls.WithMoves(true), calls.WithDrainTimeout(timeout))
		out <- rep
	}()
	return out
}

// nextRequest returns the next request of method the raw UA receives.
func nextRequest(u *rawUA, method string, within time.Duration) string {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		if m := u.next(500 * time.Millisecond); strings.HasPrefix(m, method+" ") {
			return m
		}
	}
	return ""
}

// A draining worker answers a proxy's OPTIONS keepalive and new INVITEs
// with 503 and Retry-After, and moves its call by REFER to the front door
// with a handoff token; the worker the phone reaches takes the
// conversation over without greeting again.
func TestDrainMovesAPhoneCallByREFERToTheFrontDoor(t *testing.T) {
	p := newDrainPair(t)
	u := dialRaw(t, netipAddrPort(t, p.addrA))
	const id = "drain-a"
	to := p.call(t, u, id, true)
	done := drainA(p, time.Minute)

	refer := nextRequest(u, "REFER", 10*time.Second)
	if refer == "" {
		t.Fatal("the draining worker never sent a REFER")
	}
	if rt := header(refer, "Refer-To"); !strings.Contains(rt, p.addrB) {
		t.Errorf("Refer-To %q; want the front door %s", rt, p.addrB)
	}
	u.respond(refer, "202 Accepted")
	m := referToken.FindStringSubmatch(header(refer, "Refer-To"))
	if m == nil {
		t.Fatalf("Refer-To %q carries no handoff token", header(refer, "Refer-To"))
	}
	tok, _ := url.QueryUnescape(m[1])

	// While draining, A refuses what a proxy would send it.
	probe := dialRaw(t, netipAddrPort(t, p.addrA))
	probe.send(fmt.Sprintf("OPTIONS sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-opt\nFrom: <sip:proxy@%[1]s>;tag=opt\nTo: <sip:agent@127.0.0.1>\nCall-ID: opt-1\nCSeq: 1 OPTIONS\nMax-Forwards: 70\nContent-Length: 0\n\n", probe.local()))
	if res := probe.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 503 ") || header(res, "Retry-After") == "" {
		t.Errorf("OPTIONS to a draining worker: %q; want 503 with Retry-After", res)
	}
	probe.send(invite(probe.local(), "drain-new", "application/sdp", fmt.Sprintf(pcmuOffer, 40014)))
	if res := probe.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 503 ") || header(res, "Retry-After") == "" {
		t.Errorf("a new INVITE to a draining worker: %q; want 503 with Retry-After", res)
	}

	// The phone calls the Refer-To target with the token.
	v := dialRaw(t, netipAddrPort(t, p.addrB))
	inv := invite(v.local(), "drain-b", "application/sdp", fmt.Sprintf(pcmuOffer, 40016))
	inv = strings.Replace(inv, "Max-Forwards: 70\n", "Max-Forwards: 70\n"+sip.HandoffHeader+": "+tok+"\n", 1)
	v.send(inv)
	res := v.final(5 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("B answered %q", res)
	}
	v.send(fmt.Sprintf("ACK sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-ackb\nFrom: <sip:caller@%[1]s>;tag=drain-b\nTo: %[2]s\nCall-ID: drain-b\nCSeq: 1 ACK\nMax-Forwards: 70\nContent-Length: 0\n\n", v.local(), header(res, "To")))
	u.send(fmt.Sprintf("NOTIFY sip:holdline@%[4]s SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-notify\nFrom: <sip:caller@%[1]s>;tag=%[2]s\nTo: %[3]s\nCall-ID: %[2]s\nCSeq: 2 NOTIFY\nContact: <sip:caller@%[1]s>\nEvent: refer\nSubscription-State: terminated;reason=noresource\nMax-Forwards: 70\nContent-Type: message/sipfrag\nContent-Length: 16\n\nSIP/2.0 200 OK\n",
		u.local(), id, to, p.addrA))
	if bye := nextRequest(u, "BYE", 5*time.Second); bye != "" {
		u.respond(bye, "200 OK")
	} else {
		t.Error("A never hung up its leg of the moved call")
	}
	select {
	case rep := <-done:
		if rep.Moved != 1 {
			t.Errorf("drain report %+v; want the call moved", rep)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's drain did not end")
	}
	infos := p.b.Host().List()
	if len(infos) != 1 || infos[0].Origin != "moved" {
		t.Fatalf("B's calls %+v; want the moved one", infos)
	}
	movedIn := func() bool {
		c := p.b.Host().Lookup(infos[0].ID)
		if c == nil {
			return false
		}
		evs, _, _ := c.Events(0)
		for _, e := range evs {
			if e.Kind == events.SessionMoved && e.Text == "from worker-a to worker-b" {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(5 * time.Second)
	for !movedIn() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !movedIn() {
		t.Error("B's events have no session_moved from worker-a to worker-b")
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(p.models[1].Requests()); n != 0 {
		t.Errorf("B's agent spoke %d times after the move; want silence", n)
	}
	v.send(fmt.Sprintf("BYE sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-byeb\nFrom: <sip:caller@%[1]s>;tag=drain-b\nTo: %[2]s\nCall-ID: drain-b\nCSeq: 2 BYE\nMax-Forwards: 70\nContent-Length: 0\n\n", v.local(), header(res, "To")))
	v.final(2 * time.Second)
}

// A phone that refuses the REFER keeps its call on the draining worker,
// which does not ask again; at the drain's deadline the call is released
// for another worker to pick up on redial.
func TestDrainKeepsAPhoneCallThatRefusesTheREFER(t *testing.T) {
	p := newDrainPair(t)
	u := dialRaw(t, netipAddrPort(t, p.addrA))
	p.call(t, u, "drain-refuse", true)
	done := drainA(p, 3*time.Second)
	refer := nextRequest(u, "REFER", 10*time.Second)
	if refer == "" {
		t.Fatal("the draining worker never sent a REFER")
	}
	u.respond(refer, "405 Method Not Allowed")
	if again := nextRequest(u, "REFER", 2*time.Second); again != "" {
		t.Error("the draining worker asked again after the REFER was refused")
	}
	if p.a.Host().Len() != 1 {
		t.Fatal("the call left A although the phone refused to move")
	}
	select {
	case rep := <-done:
		if rep.Moved != 0 || rep.Released != 1 {
			t.Errorf("drain report %+v; want the call released at the deadline", rep)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("A's drain did not end at its deadline")
	}
}

func netipAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// A phone whose INVITE does not list REFER in Allow (sipp's, many trunks')
// is never sent one: its call runs to its end on the draining worker.
func TestDrainDoesNotREFERAPhoneThatDidNotOfferIt(t *testing.T) {
	p := newDrainPair(t)
	u := dialRaw(t, netipAddrPort(t, p.addrA))
	p.call(t, u, "drain-norefer", false)
	done := drainA(p, 2*time.Second)
	if refer := nextRequest(u, "REFER", 1500*time.Millisecond); refer != "" {
		t.Fatal("the draining worker REFERred a phone that did not list REFER in Allow")
	}
	select {
	case rep := <-done:
		if rep.Moved != 0 || rep.Released != 1 {
			t.Errorf("drain report %+v; want the call kept, then released at the deadline", rep)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("A's drain did not end at its deadline")
	}
}
