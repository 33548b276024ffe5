// Command holdline runs Holdline voice agents.
//
//	holdline console --agent booking [--llm demo|openai|realtime] [--model NAME] [--stt ...] [--tts ...] [--events FILE]
//	holdline serve --agent booking [--http ADDR] [--resume-ttl D] [--max-sessions N] [provider flags]
//	holdline serve ... --sip udp:ADDR [--sip-allow CIDRs] [--rtp-timeout D]
//	holdline call sip:USER@HOST[:PORT] --agent booking [--sip udp:ADDR] [--max-duration D] [provider flags]
//	holdline talk --agent booking [provider flags] [-v]
//	holdline simulate FILE|DIR... [--sweep N] [--seed S] [--set PARAM=DURATION] [--json]
//
// console talks to an agent in the terminal: type as the caller; the agent's
// reply streams at speaking pace, and a line entered while it speaks barges
// in. With standard input not a terminal it reads one line per turn, waits
// for each turn to settle and prints one line per event (user:, agent:,
// tool:, and error: or failover: when a provider fails), so scripts can
// drive it.
//
// serve answers WebRTC offers from browsers (POST /v1/sessions) and serves
// the reference web client at /, events as SSE and Prometheus metrics.
// Without HOLDLINE_TOKEN it listens on 127.0.0.1 only.
//
// talk runs an agent on this computer's microphone and speaker, with echo
// cancellation so that talking over it interrupts it, and prints the
// conversation as console does until Ctrl-C.
//
// simulate runs scenario files against the session core in virtual time and
// exits non-zero when any run breaks an expectation or an invariant.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "holdline:", err)
		}
		os.Exit(2)
	}
}

const usage = `usage: holdline <command> [flags]

commands:
  console   talk to an agent in the terminal (holdline console --agent booking)
  serve     serve an agent to browsers over WebRTC, with the web client (holdline serve --agent booking)
  call      place a phone call and run an agent on it (holdline call sip:alice@192.0.2.10 --agent booking)
  talk      talk to an agent with this computer's microphone and speaker (holdline talk --agent booking)
  simulate  run scenario files in virtual time (holdline simulate examples/scenarios --sweep 200)
  bargein-eval
            measure barge-in decisions, every mode side by side, on a generated echo corpus
            or on your own recordings (--corpus DIR; --export DIR writes the generated one)
  fake-openai
            serve an OpenAI-compatible API answered by the demo model, to try the OpenAI providers offline
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "console":
		return consoleCmd(ctx, args[1:], stdin, stdout, stderr)
	case "serve":
		return serveCmd(ctx, args[1:], stdout, stderr)
	case "call":
		return callCmd(ctx, args[1:], stdout, stderr)
	case "talk":
		return talkCmd(ctx, args[1:], stdout, stderr)
	case "simulate":
		return simulateCmd(ctx, args[1:], stdout, stderr)
	case "bargein-eval":
		return bargeinEvalCmd(ctx, args[1:], stdout, stderr)
	case "fake-openai":
		return fakeOpenAICmd(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
