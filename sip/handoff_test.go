package sip_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/store"
)

// next returns the next SIP message the raw UA receives, or "" after
// timeout.
func (u *rawUA) next(timeout time.Duration) string {
	u.t.Helper()
	buf := make([]byte, 65535)
	_ = u.conn.SetReadDeadline(time.Now().Add(timeout))
	n, err := u.conn.Read(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// respond answers a request the raw UA received with status.
func (u *rawUA) respond(req, status string) {
	u.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "SIP/2.0 %s\n", status)
	for _, h := range []string{"Via", "From", "To", "Call-ID", "CSeq"} {
		fmt.Fprintf(&b, "%s: %s\n", h, header(req, h))
	}
	b.WriteString("Content-Length: 0\n\n")
	u.send(b.String())
}

var referToken = regexp.MustCompile(`X-Holdline-Handoff=([^>;\s]+)`)

// A Holdline worker transfers its call to another Holdline worker sharing
// its store: the REFER's Refer-To carries the handoff token into the
// caller's INVITE to the target, and the target takes the conversation
// over, its agent speaking first with everything said so far.
func TestTransferToAnotherHoldlineWorkerKeepsTheConversation(t *testing.T) {
	st, err := store.OpenFile(filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the servers, which clean up after their calls
	key := handoff.Key{ID: "k", Secret: []byte("a snapshot key for the sip tests")}
	voice := func() *scripted.TTS {
		v, err := scripted.NewTTS(scripted.WithTTSRate(8000), scripted.WithWordsPerSecond(8))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	billingModel := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
		return scripted.Response{Text: "Billing here, I have your details."}
	})
	recB := &recorder{}
	_, addrB := serveAgent(t, func(context.Context) (*runtime.Agent, func(), error) {
		return &runtime.Agent{Name: "billing", Model: billingModel, TTS: voice(), STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error { recB.attach(s); return nil }}, nil, nil
	}, sip.WithStore(st, "worker-b", key))

	transferred := make(chan error, 1)
	_, addrA := serveAgent(t, func(context.Context) (*runtime.Agent, func(), error) {
		model := scripted.NewLLMFunc(func(llm.Request) scripted.Response {
			return scripted.Response{Text: "Front desk, I will put you through to billing."}
		})
		return &runtime.Agent{Name: "front", Model: model, TTS: voice(), STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				sub := s.Subscribe(64)
				defer sub.Close()
				if err := s.GenerateReply(ctx, ""); err != nil {
					return err
				}
				for e := range sub.C() {
					if e.Kind == events.PlayoutDone {
						break
					}
				}
				transferred <- sip.Transfer(ctx, "sip:agent@"+addrB.String(), sip.WithTransferTimeout(10*time.Second))
				return nil
			}}, nil, nil
	}, sip.WithStore(st, "worker-a", key))

	// The caller's phone calls A.
	u := dialRaw(t, addrA)
	const idA = "handoff-a"
	u.send(invite(u.local(), idA, "application/sdp", fmt.Sprintf(pcmuOffer, 40002)))
	res := u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("A answered %q", res)
	}
	toA := header(res, "To")
	u.send(fmt.Sprintf("ACK sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-ack1\nFrom: <sip:caller@%[1]s>;tag=%[2]s\nTo: %[3]s\nCall-ID: %[2]s\nCSeq: 1 ACK\nMax-Forwards: 70\nContent-Length: 0\n\n", u.local(), idA, toA))

	// A sends REFER; the phone accepts it and calls the Refer-To target
	// with the header the URI carries.
	var refer string
	for deadline := time.Now().Add(20 * time.Second); refer == "" && time.Now().Before(deadline); {
		if m := u.next(time.Second); strings.HasPrefix(m, "REFER ") {
			refer = m
		}
	}
	if refer == "" {
		t.Fatal("A never sent a REFER")
	}
	u.respond(refer, "202 Accepted")
	m := referToken.FindStringSubmatch(header(refer, "Refer-To"))
	if m == nil {
		t.Fatalf("Refer-To %q carries no handoff token", header(refer, "Refer-To"))
	}
	tok, _ := url.QueryUnescape(m[1])
	if header(refer, sip.HandoffHeader) != tok {
		t.Errorf("REFER's %s header %q differs from the Refer-To's token %q", sip.HandoffHeader, header(refer, sip.HandoffHeader), tok)
	}

	v := dialRaw(t, addrB)
	const idB = "handoff-b"
	inv := invite(v.local(), idB, "application/sdp", fmt.Sprintf(pcmuOffer, 40004))
	inv = strings.Replace(inv, "Max-Forwards: 70\n", "Max-Forwards: 70\n"+sip.HandoffHeader+": "+tok+"\n", 1)
	v.send(inv)
	res = v.final(5 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("B answered %q", res)
	}
	v.send(fmt.Sprintf("ACK sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-ack2\nFrom: <sip:caller@%[1]s>;tag=%[2]s\nTo: %[3]s\nCall-ID: %[2]s\nCSeq: 1 ACK\nMax-Forwards: 70\nContent-Length: 0\n\n", v.local(), idB, header(res, "To")))

	// The phone tells A the target answered; A hangs up.
	u.send(fmt.Sprintf("NOTIFY sip:holdline@%[4]s SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-notify\nFrom: <sip:caller@%[1]s>;tag=%[2]s\nTo: %[3]s\nCall-ID: %[2]s\nCSeq: 2 NOTIFY\nContact: <sip:caller@%[1]s>\nEvent: refer\nSubscription-State: terminated;reason=noresource\nMax-Forwards: 70\nContent-Type: message/sipfrag\nContent-Length: 16\n\nSIP/2.0 200 OK\n",
		u.local(), idA, toA, addrA))
	select {
	case err := <-transferred:
		if err != nil {
			t.Fatalf("Transfer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's transfer never completed")
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if m := u.next(time.Second); strings.HasPrefix(m, "BYE ") {
			u.respond(m, "200 OK")
			break
		}
	}

	// B took the conversation over and spoke first, knowing what A said.
	deadline := time.Now().Add(10 * time.Second)
	for !recB.find(events.PlayoutDone, "Billing here, I have your details.") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	reqs := billingModel.Requests()
	if len(reqs) == 0 {
		t.Fatal("billing was never asked anything")
	}
	heard := false
	for _, it := range reqs[0].Context.Items {
		heard = heard || strings.Contains(it.Text, "put you through to billing")
	}
	if !heard {
		t.Errorf("billing's first request lacks what the front desk said: %+v", reqs[0].Context.Items)
	}
	v.send(fmt.Sprintf("BYE sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-bye2\nFrom: <sip:caller@%[1]s>;tag=%[2]s\nTo: %[3]s\nCall-ID: %[2]s\nCSeq: 2 BYE\nMax-Forwards: 70\nContent-Length: 0\n\n", v.local(), idB, header(res, "To")))
	v.final(2 * time.Second)
}
