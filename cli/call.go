package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/holdline/holdline/runtime"
	hsip "github.com/holdline/holdline/sip"
)

// callCmd places a phone call and runs an agent on it:
//
//	holdline call sip:USER@HOST[:PORT][;transport=tcp|tls] --agent NAME [--sip udp:ADDR,...] [--srtp MODE] [--max-duration D] [provider flags]
//	holdline call sips:USER@HOST[:PORT] --agent NAME [--sip-ca FILE] ...
func (c *cli) callCmd(ctx context.Context, args []string) error {
	stdout, stderr := c.stdout, c.stderr
	fs := c.flagSet("call")
	name := c.agentFlag(fs)
	sipAddr := fs.String("sip", "udp:127.0.0.1:0", "where to take the callee's requests: `udp:ADDR`, tcp:ADDR or tls:ADDR, comma-separated; a call over TCP or TLS needs no listener of its own, its requests come back over its connection")
	sipCert := fs.String("sip-cert", "", "the TLS certificate `FILE` (PEM) of a tls: listener in --sip")
	sipKey := fs.String("sip-key", "", "the private key `FILE` (PEM) of --sip-cert")
	sipCA := fs.String("sip-ca", "", "the roots (PEM `FILE`) that verify a TLS callee's certificate; default: the system's")
	maxDur := fs.Duration("max-duration", 10*time.Minute, "hang up after this long")
	rtpTimeout := fs.Duration("rtp-timeout", hsip.DefaultRTPTimeout, "hang up when the callee sends no RTP for this long")
	rtpRealtime := fs.Bool("rtp-realtime", false, "send RTP from a real-time priority thread (needs root or CAP_SYS_NICE)")
	srtpMode := fs.String("srtp", "optional", "offer SRTP (RTP/SAVP with SDES keys): `off`, optional (call again in the clear if refused) or required")
	verbose := fs.Bool("v", false, "log debug detail")
	var pf providerFlags
	pf.register(fs)
	// The target may come before or after the flags.
	var target string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		target, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if target == "" && fs.NArg() > 0 {
		// Flags may follow the target too.
		target = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("call: one SIP URI to call, then flags (got %q after it)", fs.Args())
	}
	if !strings.HasPrefix(target, "sip:") && !strings.HasPrefix(target, "sips:") {
		return fmt.Errorf("call: want a SIP URI to call, like sip:alice@192.0.2.10:5060, sip:alice@pbx.example;transport=tls or sips:alice@pbx.example (got %q)", target)
	}
	listeners, err := parseSIPListeners(*sipAddr)
	if err != nil {
		return err
	}
	tlsCfg, err := sipTLSConfig(listeners, *sipCert, *sipKey)
	if err != nil {
		return err
	}
	roots, err := sipRoots(*sipCA)
	if err != nil {
		return err
	}
	srtp, err := hsip.ParseSRTPMode(*srtpMode)
	if err != nil {
		return fmt.Errorf("--srtp %q: want off, optional or required", *srtpMode)
	}
	// The engines every session shares go with the command.
	defer pf.closeShared()
	fn, err := c.agent(*name)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	probe, err := pf.probe(ctx, fn, true)
	if err != nil {
		return err
	}
	withProviders := pf.agentFunc(fn, true)
	newAgent := func(ctx context.Context) (*runtime.Agent, func(), error) {
		agent, release, err := withProviders(ctx)
		if err != nil {
			return nil, nil, err
		}
		enter := agent.OnEnter
		agent.OnEnter = func(ctx context.Context, s *runtime.Session) error {
			go printConversation(ctx, s, stdout)
			if enter != nil {
				return enter(ctx, s)
			}
			return nil
		}
		return agent, release, nil
	}
	opts := []hsip.Option{hsip.WithLogger(logger), hsip.WithRTPTimeout(*rtpTimeout), hsip.WithSRTP(srtp)}
	if *rtpRealtime {
		opts = append(opts, hsip.WithRealtimePacing())
	}
	if roots != nil {
		opts = append(opts, hsip.WithTLSClientConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))
	}
	srv, err := hsip.New(newAgent, opts...)
	if err != nil {
		return err
	}
	for i := range listeners {
		if err := listeners[i].listen(); err != nil {
			for _, l := range listeners[:i] {
				l.close()
			}
			srv.Close()
			return err
		}
	}
	defer serveSIPListeners(ctx, srv, listeners, tlsCfg, logger)()
	cctx, cancel := context.WithTimeout(ctx, *maxDur)
	defer cancel()
	fmt.Fprintf(stdout, "calling %s with the %s agent (%s)\n", target, *name, probe.roles)
	pf.printEngines(stdout, probe.roles)
	if err := srv.Call(cctx, target); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "call ended")
	return nil
}

// printConversation prints a call's transcript as console does (user:,
// agent:, tool:, dtmf: ...) until the session ends.
func printConversation(ctx context.Context, s *runtime.Session, out io.Writer) {
	sub := s.Subscribe(1024)
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sub.C():
			if !ok {
				return
			}
			if line, ok := transcriptLine(e); ok {
				fmt.Fprintln(out, line)
			}
		}
	}
}

// sipRoots loads --sip-ca: nil (the system's roots) when it is not given.
func sipRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--sip-ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--sip-ca %s: no PEM certificate in it", file)
	}
	return roots, nil
}
