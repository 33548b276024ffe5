package sip_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	"github.com/holdline/holdline/sip"
)

// referUAS answers Holdline's call, accepts its REFER (checking the
// Refer-To and the handoff token), reports the target's 200 in a NOTIFY,
// and takes Holdline's BYE.
const referUAS = `<?xml version="1.0" encoding="ISO-8859-1" ?>
<scenario name="refer uas">
  <recv request="INVITE" crlf="true"/>
  <send>
    <![CDATA[
      SIP/2.0 200 OK
      [last_Via:]
      [last_From:]
      [last_To:];tag=[pid]SIPpTag01[call_number]
      [last_Call-ID:]
      [last_CSeq:]
      Contact: <sip:callee@[local_ip]:[local_port];transport=[transport]>
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
  <recv request="ACK" crlf="true"/>
  <recv request="REFER">
    <action>
      <ereg regexp="tok-123" search_in="hdr" header="X-Holdline-Handoff:" check_it="true" assign_to="tok"/>
      <ereg regexp="sip:billing@127.0.0.1:5999" search_in="hdr" header="Refer-To:" check_it="true" assign_to="rt"/>
    </action>
  </recv>
  <send>
    <![CDATA[
      SIP/2.0 202 Accepted
      [last_Via:]
      [last_From:]
      [last_To:]
      [last_Call-ID:]
      [last_CSeq:]
      Content-Length: 0
    ]]>
  </send>
  <send>
    <![CDATA[
      NOTIFY sip:holdline@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
      From: <sip:callee@[local_ip]:[local_port]>;tag=[pid]SIPpTag01[call_number]
      To: <sip:holdline@[remote_ip]:[remote_port]>
      [last_Call-ID:]
      CSeq: 1 NOTIFY
      Contact: <sip:callee@[local_ip]:[local_port]>
      Event: refer
      Subscription-State: terminated;reason=noresource
      Max-Forwards: 70
      Content-Type: message/sipfrag
      Content-Length: [len]

      SIP/2.0 200 OK
    ]]>
  </send>
  <recv response="200"/>
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
  <Reference variables="tok,rt"/>
</scenario>
`

// Holdline places a call and its agent hands the call over (a tool would
// do this) to another number: a REFER carrying the Refer-To and the
// handoff token, accepted; the NOTIFY with the target's 200 ends
// Holdline's part with a BYE, and the call is over on both sides.
func TestBlindTransferWithHandoffToken(t *testing.T) {
	sippPath := needSipp(t)
	transferred := make(chan error, 1)
	newAgent := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000))
		if err != nil {
			return nil, nil, err
		}
		return &runtime.Agent{
			Name: "front", Model: scripted.NewLLMFunc(func(llm.Request) scripted.Response { return scripted.Response{Text: "One moment."} }),
			TTS: voice, STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				transferred <- sip.Transfer(ctx, "sip:billing@127.0.0.1:5999", sip.WithHandoffToken("tok-123"), sip.WithTransferTimeout(10*time.Second))
				return nil
			},
		}, nil, nil
	}
	srv, _ := serveAgent(t, newAgent)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dir := t.TempDir()
	sf := filepath.Join(dir, "refer.xml")
	if err := os.WriteFile(sf, []byte(referUAS), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := exec.CommandContext(ctx, sippPath, "-sf", sf, "-i", "127.0.0.1", "-p", fmt.Sprint(port),
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

	if err := srv.Call(ctx, fmt.Sprintf("sip:callee@127.0.0.1:%d", port)); err != nil {
		t.Fatalf("Call: %v", err)
	}
	select {
	case err := <-transferred:
		if err != nil {
			t.Fatalf("Transfer: %v", err)
		}
	default:
		t.Fatal("the call ended but Transfer had not returned")
	}
	if err := <-sippDone; err != nil {
		logs, _ := filepath.Glob(filepath.Join(dir, "*errors.log"))
		var all []byte
		for _, f := range logs {
			b, _ := os.ReadFile(f)
			all = append(all, b...)
		}
		t.Fatalf("sipp: %v\n%s\n%s", err, out.String(), all)
	}
}

// Outside a phone call there is nothing to transfer.
func TestTransferOutsideACallIsAnError(t *testing.T) {
	if err := sip.Transfer(context.Background(), "sip:billing@127.0.0.1"); !errors.Is(err, sip.ErrNotACall) {
		t.Fatalf("Transfer outside a call: %v; want ErrNotACall", err)
	}
}
