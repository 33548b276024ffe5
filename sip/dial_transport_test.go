package sip_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/sip"
)

// endsAfterGreeting is the greeter, hanging up once it has greeted.
func endsAfterGreeting(ctx context.Context) (*runtime.Agent, func(), error) {
	a, release, err := greeter(ctx)
	if err != nil {
		return nil, nil, err
	}
	a.OnEnter = func(ctx context.Context, s *runtime.Session) error {
		if err := s.GenerateReply(ctx, ""); err != nil {
			return err
		}
		return s.End(ctx, "greeted")
	}
	return a, release, nil
}

// Holdline places calls over TCP and TLS from a server that listens only
// on UDP, as `holdline call sips:...` does: the INVITE goes over a
// connection of its own, and the requests of the call, whichever side
// hangs up, go over that connection both ways.
func TestCallPlacedOverAConnectionWithoutAListener(t *testing.T) {
	cert, roots := selfSigned(t)
	for _, tc := range []struct {
		network, target string
	}{
		{"tcp", "sip:agent@%s;transport=tcp"},
		{"tls", "sips:agent@%s"},
		{"tls", "sip:agent@%s;transport=tls"},
	} {
		for _, who := range []string{"the callee hangs up", "the caller hangs up"} {
			t.Run(fmt.Sprintf("%s %s, %s", tc.network, tc.target, who), func(t *testing.T) {
				calleeAgent, callerAgent := endsAfterGreeting, sip.AgentFunc(greeter)
				if who == "the caller hangs up" {
					calleeAgent, callerAgent = greeter, endsAfterGreeting
				}
				callee, addr, _ := serveAgentOn(t, calleeAgent, tc.network, &tls.Config{Certificates: []tls.Certificate{cert}})
				caller, _, _ := serveAgentOn(t, callerAgent, "udp", nil, sip.WithTLSClientConfig(&tls.Config{RootCAs: roots}))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := caller.Call(ctx, fmt.Sprintf(tc.target, addr)); err != nil {
					t.Fatalf("Call: %v", err)
				}
				if ctx.Err() != nil {
					t.Fatal("the call ended only at the test's deadline: a BYE was lost")
				}
				waitNoCalls(t, callee)
				waitNoCalls(t, caller)
			})
		}
	}
}

// A call over TLS to a server whose certificate the caller does not
// trust fails with the reason, and the caller's server carries on.
func TestCallOverTLSToAnUntrustedServerSaysWhy(t *testing.T) {
	cert, _ := selfSigned(t)
	_, addr, _ := serveOn(t, "tls", &tls.Config{Certificates: []tls.Certificate{cert}})
	caller, _, _ := serveOn(t, "udp", nil, sip.WithTLSClientConfig(&tls.Config{RootCAs: x509.NewCertPool()}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := caller.Call(ctx, fmt.Sprintf("sips:agent@%s", addr))
	var unknown x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &unknown) && !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Call: %v, want an error about the certificate", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the refused handshake held the call until the deadline")
	}
}
