package sip_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/events"
)

// rawCall is a call set up by hand: INVITE, 200, ACK.
type rawCall struct {
	u      *rawUA
	id     string
	toTag  string // the To header of the 200, with Holdline's tag
	answer string
	cseq   int
}

func setUpRawCall(t *testing.T, addr netip.AddrPort, id string, rtpPort int) *rawCall {
	t.Helper()
	return setUpRawCallWithin(t, addr, id, rtpPort, 3*time.Second)
}

// setUpRawCallWithin is setUpRawCall for an answer that may take up to
// timeout.
func setUpRawCallWithin(t *testing.T, addr netip.AddrPort, id string, rtpPort int, timeout time.Duration) *rawCall {
	t.Helper()
	u := dialRaw(t, addr)
	u.send(invite(u.local(), id, "application/sdp", fmt.Sprintf(pcmuOffer, rtpPort)))
	res := u.final(timeout)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("INVITE answered %q", res)
	}
	c := &rawCall{u: u, id: id, toTag: header(res, "To"), answer: res, cseq: 1}
	c.request("ACK", "", "")
	return c
}

// request sends an in-dialog request; ACK reuses the INVITE's CSeq.
func (c *rawCall) request(method, contentType, body string) {
	if method != "ACK" {
		c.cseq++
	}
	seq := c.cseq
	body = strings.ReplaceAll(body, "\n", "\r\n")
	ct := ""
	if contentType != "" {
		ct = "Content-Type: " + contentType + "\n"
	}
	c.u.send(fmt.Sprintf("%[1]s sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[2]s;branch=z9hG4bK-%[3]s-%[4]d-%[1]s\nFrom: <sip:caller@%[2]s>;tag=%[3]s\nTo: %[5]s\nCall-ID: %[3]s\nCSeq: %[4]d %[1]s\nContact: <sip:caller@%[2]s>\nMax-Forwards: 70\n%[6]sContent-Length: %[7]d\n\n",
		method, c.u.local(), c.id, seq, c.toTag, ct, len(body)) + strings.ReplaceAll(body, "\r\n", "\n"))
}

// A key pressed as SIP INFO (application/dtmf-relay) is a dtmf event, like
// an RFC 4733 one.
func TestDTMFBySIPInfo(t *testing.T) {
	_, addr, rec := startServer(t)
	l := listen(t)
	c := setUpRawCall(t, addr, "info-dtmf", l.port())
	// The recorder subscribes when the agent starts: wait for that.
	for deadline := time.Now().Add(3 * time.Second); !rec.find(events.PlayoutStarted, ""); {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never started: %v", rec.kinds())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.request("INFO", "application/dtmf-relay", "Signal=5\nDuration=160\n")
	if res := c.u.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 200 ") {
		t.Fatalf("INFO answered %q", res)
	}
	c.request("INFO", "application/json", `{"digit": 5}`)
	if res := c.u.final(3 * time.Second); !strings.HasPrefix(res, "SIP/2.0 415 ") {
		t.Fatalf("INFO with a body that is not DTMF answered %q; want 415", res)
	}
	deadline := time.Now().Add(3 * time.Second)
	for !rec.find(events.DTMF, "5") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !rec.find(events.DTMF, "5") {
		t.Fatalf("no dtmf event for the INFO's 5: %v", rec.kinds())
	}
	c.request("BYE", "", "")
}

// A re-INVITE that puts the call on hold (a=sendonly) is answered
// a=recvonly and Holdline's RTP stops; the one that takes it off hold is
// answered a=sendrecv and the RTP flows again.
func TestHoldAndUnholdByReinvite(t *testing.T) {
	_, addr, _ := startServer(t)
	l := listen(t)
	c := setUpRawCall(t, addr, "hold", l.port())
	flowing := func() int {
		before := len(l.heard())
		time.Sleep(300 * time.Millisecond)
		return len(l.heard()) - before
	}
	if n := flowing(); n < 10 {
		t.Fatalf("%d packets in 300 ms before the hold; want about 15", n)
	}
	hold := fmt.Sprintf(pcmuOffer, l.port()) + "a=sendonly\n"
	c.request("INVITE", "application/sdp", strings.Replace(hold, "o=- 1 1", "o=- 1 2", 1))
	res := c.u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") || !strings.Contains(res, "a=recvonly") {
		t.Fatalf("hold re-INVITE answered:\n%s", res)
	}
	c.request("ACK", "", "")
	time.Sleep(100 * time.Millisecond) // packets already on their way
	if n := flowing(); n != 0 {
		t.Errorf("%d packets in 300 ms on hold; want none", n)
	}
	unhold := strings.Replace(fmt.Sprintf(pcmuOffer, l.port())+"a=sendrecv\n", "o=- 1 1", "o=- 1 3", 1)
	c.request("INVITE", "application/sdp", unhold)
	res = c.u.final(3 * time.Second)
	if !strings.HasPrefix(res, "SIP/2.0 200 ") || !strings.Contains(res, "a=sendrecv") {
		t.Fatalf("unhold re-INVITE answered:\n%s", res)
	}
	c.request("ACK", "", "")
	if n := flowing(); n < 10 {
		t.Errorf("%d packets in 300 ms after the hold; want about 15", n)
	}
	c.request("BYE", "", "")
}
