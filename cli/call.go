package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/holdline/holdline/runtime"
	hsip "github.com/holdline/holdline/sip"
)

// callCmd places a phone call and runs an agent on it:
//
//	holdline call sip:USER@HOST[:PORT] --agent NAME [--sip udp:ADDR] [--max-duration D] [provider flags]
func (c *cli) callCmd(ctx context.Context, args []string) error {
	stdout, stderr := c.stdout, c.stderr
	fs := c.flagSet("call")
	name := c.agentFlag(fs)
	sipAddr := fs.String("sip", "udp:127.0.0.1:0", "where to take the callee's answers and BYE: `udp:ADDR`")
	maxDur := fs.Duration("max-duration", 10*time.Minute, "hang up after this long")
	rtpTimeout := fs.Duration("rtp-timeout", hsip.DefaultRTPTimeout, "hang up when the callee sends no RTP for this long")
	rtpRealtime := fs.Bool("rtp-realtime", false, "send RTP from a real-time priority thread (needs root or CAP_SYS_NICE)")
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
		target = fs.Arg(0)
	}
	if !strings.HasPrefix(target, "sip:") {
		return fmt.Errorf("call: want a SIP URI to call, like sip:alice@192.0.2.10:5060 (got %q)", target)
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
	network, addr, ok := strings.Cut(*sipAddr, ":")
	if !ok || network != "udp" {
		return fmt.Errorf("--sip %q: want udp:HOST:PORT", *sipAddr)
	}
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
	opts := []hsip.Option{hsip.WithLogger(logger), hsip.WithRTPTimeout(*rtpTimeout)}
	if *rtpRealtime {
		opts = append(opts, hsip.WithRealtimePacing())
	}
	srv, err := hsip.New(newAgent, opts...)
	if err != nil {
		return err
	}
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("--sip %q: %w", *sipAddr, err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.ServeUDP(sctx, conn) }()
	defer func() {
		srv.Close()
		stop()
		<-served
	}()
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
