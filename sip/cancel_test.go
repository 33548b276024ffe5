package sip_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
)

// A caller who hangs up while Holdline is still preparing the call (a
// CANCEL before the answer) gets 200 for the CANCEL and 487 for the
// INVITE; the call is never answered and its agent is released.
func TestCallerCancelsBeforeTheAnswer(t *testing.T) {
	gate := make(chan struct{})
	var made, released atomic.Int32
	var serving atomic.Bool
	newAgent := func(ctx context.Context) (*runtime.Agent, func(), error) {
		if !serving.Load() { // the agent the host makes at New, as a check
			return &runtime.Agent{Name: "slow", Model: scripted.NewLLM()}, nil, nil
		}
		made.Add(1)
		select { // an agent that takes its time to get ready
		case <-gate:
		case <-time.After(10 * time.Second):
		}
		return &runtime.Agent{Name: "slow", Model: scripted.NewLLM()}, func() { released.Add(1) }, nil
	}
	srv, addr := serveAgent(t, newAgent)
	serving.Store(true)
	u := dialRaw(t, addr)
	const id = "cancel-before-answer"
	inv := invite(u.local(), id, "application/sdp", fmt.Sprintf(pcmuOffer, 40000))
	u.send(inv)
	for made.Load() == 0 {
		time.Sleep(5 * time.Millisecond) // the INVITE reached the agent factory
	}
	// A CANCEL matches the INVITE's branch, Call-ID, From, To and CSeq
	// number (RFC 3261 9.1).
	u.send(fmt.Sprintf("CANCEL sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-%[2]s\nFrom: <sip:caller@%[1]s>;tag=%[2]s\nTo: <sip:agent@127.0.0.1>\nCall-ID: %[2]s\nCSeq: 1 CANCEL\nMax-Forwards: 70\nContent-Length: 0\n\n", u.local(), id))
	got := map[string]string{}
	for range 2 {
		res := u.final(3 * time.Second)
		if res == "" {
			t.Fatalf("responses so far %v; want the CANCEL's 200 and the INVITE's 487", got)
		}
		got[strings.Fields(header(res, "CSeq"))[1]] = strings.SplitN(res, "\r\n", 2)[0]
	}
	if !strings.HasPrefix(got["CANCEL"], "SIP/2.0 200") || !strings.HasPrefix(got["INVITE"], "SIP/2.0 487") {
		t.Fatalf("responses %v; want the CANCEL's 200 and the INVITE's 487", got)
	}
	u.send(fmt.Sprintf("ACK sip:agent@127.0.0.1 SIP/2.0\nVia: SIP/2.0/UDP %[1]s;branch=z9hG4bK-%[2]s\nFrom: <sip:caller@%[1]s>;tag=%[2]s\nTo: %[3]s\nCall-ID: %[2]s\nCSeq: 1 ACK\nMax-Forwards: 70\nContent-Length: 0\n\n", u.local(), id, "<sip:agent@127.0.0.1>"))
	close(gate)
	if res := u.final(time.Second); strings.HasPrefix(res, "SIP/2.0 200") && strings.Contains(header(res, "CSeq"), "INVITE") {
		t.Fatalf("the cancelled INVITE was answered: %q", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for (srv.Calls() != 0 || released.Load() != 1) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if srv.Calls() != 0 || released.Load() != 1 {
		t.Fatalf("after the CANCEL: %d calls up, agent released %d times; want 0 and 1", srv.Calls(), released.Load())
	}
}

// uasRingsScenario is a callee that rings and never answers: it expects
// the caller's CANCEL, answers it, ends the INVITE with 487 and takes the
// ACK.
const uasRingsScenario = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="rings until cancelled">
  <recv request="INVITE" />
  <send><![CDATA[
SIP/2.0 180 Ringing
[last_Via:]
[last_From:]
[last_To:];tag=[pid]SIPpTag01[call_number]
[last_Call-ID:]
[last_CSeq:]
Contact: <sip:[local_ip]:[local_port];transport=[transport]>
Content-Length: 0

]]></send>
  <recv request="CANCEL" />
  <send><![CDATA[
SIP/2.0 200 OK
[last_Via:]
[last_From:]
[last_To:];tag=[pid]SIPpTag01[call_number]
[last_Call-ID:]
[last_CSeq:]
Content-Length: 0

]]></send>
  <send><![CDATA[
SIP/2.0 487 Request Terminated
[last_Via:]
[last_From:]
[last_To:];tag=[pid]SIPpTag01[call_number]
[last_Call-ID:]
CSeq: [cseq] INVITE
Content-Length: 0

]]></send>
  <recv request="ACK" />
</scenario>
`

// Holdline gives up on a call nobody answers: when the caller's context
// ends while the callee rings, it sends CANCEL, and the callee (sipp)
// sees the whole exchange through to the ACK of its 487.
func TestUnansweredCallIsCancelled(t *testing.T) {
	sippPath := needSipp(t)
	srv, _, _ := startServer(t)
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	sf := filepath.Join(dir, "rings.xml")
	if err := os.WriteFile(sf, []byte(uasRingsScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, sippPath, "-sf", sf, "-i", "127.0.0.1", "-p", fmt.Sprint(port),
		"-m", "1", "-nostdin", "-trace_err", "-timeout", "20s", "-timeout_error")
	cmd.Dir = dir
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sippDone := make(chan error, 1)
	go func() { sippDone <- cmd.Wait() }()
	time.Sleep(300 * time.Millisecond) // sipp binds its port

	callCtx, giveUp := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer giveUp()
	err := srv.Call(callCtx, fmt.Sprintf("sip:uas@127.0.0.1:%d", port))
	if err == nil {
		t.Fatal("an unanswered call returned no error")
	}
	t.Logf("Call: %v", err)
	if err := <-sippDone; err != nil {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, b)
		}
		t.Fatalf("sipp did not see the call cancelled: %v\n%s", err, out.String())
	}
	if srv.Calls() != 0 {
		t.Fatalf("%d calls up after the cancel", srv.Calls())
	}
}
