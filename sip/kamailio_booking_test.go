package sip_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/baresiptest"
	"github.com/holdline/holdline/internal/kamailiotest"
	"github.com/holdline/holdline/sip"
)

// The deployment the issue asks for, with real peers end to end: Kamailio
// is the registrar and proxy; Holdline, listening on nothing but UDP,
// registers the booking agent there over TLS; baresip registers too,
// over TLS with SRTP mandatory, and calls the agent's user through
// Kamailio. The call reaches Holdline over its registration's own TLS
// connection, is answered with RTP/SAVP and a key, and the booking
// completes once.
func TestBaresipBooksThroughKamailioOverTLSWithSRTP(t *testing.T) {
	bin := baresiptest.Need(t)
	k := kamailiotest.Start(t, map[string]string{"holdline": "agent-secret", "caller": "caller-secret"})
	rec := &recorder{}
	srv, _, logs := serveAgentOn(t, bookingAgent(rec), "udp", nil, sip.WithTLSClientConfig(k.ClientTLS()))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	reg, err := srv.Register(ctx, "sips:holdline@"+k.TLS, sip.WithRegisterPassword("agent-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.WaitRegistered(ctx); err != nil {
		t.Fatalf("registering over TLS: %v\nkamailio:\n%s", err, k.Log())
	}

	// The greeting takes about 7 s: the caller speaks after it, then
	// listens to the booking.
	home, _ := baresiptest.HomeAs(t, "caller", "Book a table for two at seven.", 8, 25)
	overTLSWithSRTP(t, home, k)
	phone, err := baresiptest.Start(ctx, bin, home, "-e", "/dial sip:holdline@"+k.TLS+";transport=tls", "-t", "90")
	if err != nil {
		t.Fatal(err)
	}
	defer phone.HangUp()
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	callerContacts, err := k.WaitContacts(wctx, "caller", func(c []string) bool { return len(c) == 1 })
	wcancel()
	if err != nil {
		t.Fatalf("baresip did not register: %v\n%s", err, phone.Out.String())
	}
	if !strings.Contains(callerContacts[0], "transport=tls") {
		t.Errorf("baresip's binding %q is not over TLS", callerContacts[0])
	}
	m := waitMedia(t, srv, 20*time.Second, "baresip's call through Kamailio:\n"+phone.Out.String(), func(m []sip.CallMedia) bool {
		return len(m) == 1 && m[0].PacketsIn >= 50
	})[0]
	if sdp := string(m.SDP); !m.SRTP || !strings.Contains(sdp, " RTP/SAVP ") || !strings.Contains(sdp, "a=crypto:") {
		t.Errorf("Holdline's answer is not RTP/SAVP with a key:\n%s", sdp)
	}
	for !rec.booked() {
		select {
		case <-phone.Done():
			t.Fatalf("baresip ended (%v) before the booking was spoken: %v\n%s\nholdline:\n%s", phone.Err(), rec.kinds(), phone.Out.String(), logs)
		case <-ctx.Done():
			t.Fatalf("no booking spoken: %v\n%s\nholdline:\n%s", rec.kinds(), phone.Out.String(), logs)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if n := sip.Media(srv); len(n) == 1 && n[0].SRTPFailed != 0 {
		t.Errorf("%d of baresip's packets failed SRTP", n[0].SRTPFailed)
	}
	runs, heard := rec.bookings(t)
	t.Logf("through Kamailio over TLS and SRTP, baresip's caller was heard as %q; book_table ran %d time(s)", heard, runs)
	if runs != 1 {
		t.Errorf("book_table ran %d times; want once", runs)
	}
}

// overTLSWithSRTP makes the baresip of home (baresiptest.HomeAs) register
// at k over TLS, trusting k's certificate, with SRTP mandatory.
func overTLSWithSRTP(t *testing.T, home string, k *kamailiotest.Kamailio) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(home, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(f, "module srtp.so\nsip_cafile %s\n", k.CertFile())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	account := fmt.Sprintf("<sip:caller@%s;transport=tls>;auth_pass=caller-secret;regint=60;answermode=auto;mediaenc=srtp-mand\n", k.TLS)
	if err := os.WriteFile(filepath.Join(home, "accounts"), []byte(account), 0o644); err != nil {
		t.Fatal(err)
	}
}
