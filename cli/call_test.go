package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/testcert"

	"github.com/holdline/holdline/llm"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/scripted"
	hsip "github.com/holdline/holdline/sip"
)

// testCert is a certificate for a callee on 127.0.0.1, and the file of
// the root that verifies it.
func testCert(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	c, err := testcert.New("callee")
	if err != nil {
		t.Fatal(err)
	}
	file, _, err := c.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c.TLS, file
}

// calleeOverTLS answers SIP over TLS only, with an agent that greets and
// hangs up, until the test ends.
func calleeOverTLS(t *testing.T, cert tls.Certificate) (*hsip.Server, string) {
	t.Helper()
	greetAndGo := func(context.Context) (*runtime.Agent, func(), error) {
		voice, err := scripted.NewTTS(scripted.WithTTSRate(8000))
		if err != nil {
			return nil, nil, err
		}
		model := scripted.NewLLMFunc(func(llm.Request) scripted.Response { return scripted.Response{Text: "This is the desk, goodbye."} })
		return &runtime.Agent{Name: "desk", Model: model, TTS: voice, STT: scripted.NewSTT(),
			OnEnter: func(ctx context.Context, s *runtime.Session) error {
				if err := s.GenerateReply(ctx, ""); err != nil {
					return err
				}
				return s.End(ctx, "done")
			}}, nil, nil
	}
	srv, err := hsip.New(greetAndGo)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ctx, ln, &tls.Config{Certificates: []tls.Certificate{cert}}) }()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	return srv, ln.Addr().String()
}

// `holdline call sips:...` calls a server that takes SIP over TLS only,
// trusting its certificate by --sip-ca, with no TLS listener of its own.
func TestCallOverTLSTriedAsAUserWould(t *testing.T) {
	cert, ca := testCert(t)
	_, addr := calleeOverTLS(t, cert)
	for _, target := range []string{"sips:desk@" + addr, "sip:desk@" + addr + ";transport=tls"} {
		t.Run(target, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errs bytes.Buffer
			err := run(ctx, []string{"call", target, "--sip-ca", ca, "--tts", "demo", "--stt", "demo", "--max-duration", "20s"}, nil, &out, &errs)
			if err != nil {
				t.Fatalf("call: %v\n%s%s", err, out.String(), errs.String())
			}
			if !strings.Contains(out.String(), "call ended") {
				t.Errorf("the call's output lacks its end:\n%s", out.String())
			}
			if ctx.Err() != nil {
				t.Error("the call ran to the test's deadline: the callee's BYE never came back over the connection")
			}
		})
	}
}

func TestCallRefusesWhatItCannotUse(t *testing.T) {
	cert, _ := testCert(t)
	_, addr := calleeOverTLS(t, cert)
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tel:+15550100"}, "want a SIP URI"},
		{[]string{"sips:desk@" + addr, "--sip-ca", junk}, "--sip-ca"},
		{[]string{"sips:desk@" + addr, "--sip-ca", junk + ".none"}, "--sip-ca"},
		{[]string{"sips:desk@" + addr, "--sip", "tls:127.0.0.1:0"}, "--sip-cert"},
		// The system's roots do not trust the test's certificate.
		{[]string{"sips:desk@" + addr}, "certificate"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out, errs bytes.Buffer
		err := run(ctx, append([]string{"call", "--tts", "demo", "--stt", "demo"}, tc.args...), nil, &out, &errs)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("call %s: err %v, want one with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
