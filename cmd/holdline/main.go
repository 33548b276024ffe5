// Command holdline runs Holdline's example agents: booking (a restaurant's
// table bookings) and support (a front desk with a billing desk behind it).
//
//	holdline console --agent booking [--llm agent|openai|realtime] [--model NAME] [--stt ...] [--tts ...] [--events FILE]
//	holdline serve --agent booking [--http ADDR] [--resume-ttl D] [--max-sessions N] [provider flags]
//	holdline serve ... --sip udp:ADDR [--sip-allow CIDRs] [--rtp-timeout D]
//	holdline call sip:USER@HOST[:PORT] --agent booking [--sip udp:ADDR] [--max-duration D] [provider flags]
//	holdline talk --agent booking [provider flags] [-v]
//	holdline simulate FILE|DIR... [--sweep N] [--seed S] [--set PARAM=DURATION] [--json]
//
// It is package cli over the examples: your own main runs your agents
// with every one of these commands by calling cli.Main the same way. See
// the cli package for what each command does.
package main

import (
	"github.com/holdline/holdline/cli"
	"github.com/holdline/holdline/examples"
)

func main() {
	var demo examples.Demo
	cli.Main(demo.Agents(), cli.WithDefaultAgent("booking"), cli.WithFlags(demo.Flags))
}
