package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/holdline/holdline/runtime"
)

// Main runs the command named by os.Args for agents, each under its name,
// and exits: 0 when the command succeeds, 2 when it fails (having said
// why on standard error). SIGINT and SIGTERM end the command as Ctrl-C
// does, but for serve, which drains on the first (no new calls; those it
// has move to other workers or run to their end) and stops at once,
// releasing its calls, on the second.
func Main(agents map[string]runtime.AgentFunc, opts ...Option) {
	ctx, cancel := context.WithCancel(context.Background())
	drain := &drainSignal{c: make(chan struct{})}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		if drain.begin() {
			select {
			case <-sigs:
			case <-ctx.Done():
			}
		}
		cancel()
	}()
	err := Run(ctx, os.Args[1:], agents, append(opts, func(c *cli) { c.drain = drain })...)
	signal.Stop(sigs)
	cancel()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, programName()+":", err)
		}
		os.Exit(2)
	}
}

// drainSignal is the first SIGINT or SIGTERM, for a command that drains
// on it rather than stopping.
type drainSignal struct {
	mu    sync.Mutex
	taken bool
	c     chan struct{}
}

// take says the command drains on the signal, and returns the channel
// the signal closes; nil on a nil drainSignal (Run without Main).
func (d *drainSignal) take() <-chan struct{} {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.taken = true
	return d.c
}

// begin closes the channel, and reports whether a command takes it.
func (d *drainSignal) begin() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.c)
	return d.taken
}

// Run runs one command (args without the program's name, as in
// []string{"console", "--agent", "pizza"}) until it ends or ctx does. It
// is Main for tests and for programs that do more than the command line.
func Run(ctx context.Context, args []string, agents map[string]runtime.AgentFunc, opts ...Option) error {
	c := &cli{name: programName(), agents: agents, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	for _, o := range opts {
		o(c)
	}
	if len(agents) == 0 {
		return errors.New("cli: no agents to run")
	}
	return c.run(ctx, args)
}

// An Option changes how Main and Run work.
type Option func(*cli)

// WithIO replaces standard input, output and error: the conversation goes
// to stdout, logs and start-up lines to stderr.
func WithIO(stdin io.Reader, stdout, stderr io.Writer) Option {
	return func(c *cli) { c.stdin, c.stdout, c.stderr = stdin, stdout, stderr }
}

// WithDefaultAgent names the agent commands run without --agent. By
// default it is the only agent, or, with several, the first by name.
func WithDefaultAgent(name string) Option {
	return func(c *cli) { c.defaultAgent = name }
}

// WithFlags registers flags of the program's own on every command's flag
// set, before it is parsed: settings its agents read when they are made.
func WithFlags(register func(fs *flag.FlagSet)) Option {
	return func(c *cli) { c.flags = append(c.flags, register) }
}

// WithName is the program's name in its usage and in the commands it
// prints (a scenario's replay line); by default the name it was run as.
func WithName(name string) Option {
	return func(c *cli) { c.name = name }
}

// cli is one run of the command line.
type cli struct {
	name         string
	agents       map[string]runtime.AgentFunc
	defaultAgent string
	flags        []func(*flag.FlagSet)
	stdin        io.Reader
	stdout       io.Writer
	stderr       io.Writer
	// drain is the first signal, under Main.
	drain *drainSignal
}

// programName is the name the program was run as, for messages.
func programName() string {
	if len(os.Args) == 0 {
		return "holdline"
	}
	name := os.Args[0]
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	return name
}

const usage = `usage: %[1]s <command> [flags]

commands:
  console   talk to an agent in the terminal (%[1]s console --agent %[2]s)
  serve     serve an agent to browsers over WebRTC, with the web client (%[1]s serve --agent %[2]s)
  call      place a phone call and run an agent on it (%[1]s call sip:alice@192.0.2.10 --agent %[2]s)
  livekit   run an agent as a LiveKit agent worker: the server dispatches rooms to it
            (LIVEKIT_API_KEY=... LIVEKIT_API_SECRET=... %[1]s livekit --url ws://HOST:7880 --agent %[2]s)
  talk      talk to an agent with this computer's microphone and speaker (%[1]s talk --agent %[2]s)
  simulate  run scenario files in virtual time (%[1]s simulate scenarios/ --sweep 200)
  inspect   draw a call's timeline as one self-contained HTML page, from an events file or a live
            session (%[1]s inspect events.jsonl; %[1]s inspect http://HOST/v1/sessions/ID)
  bargein-eval
            measure barge-in decisions, every mode side by side, on a generated echo corpus
            or on your own recordings (--corpus DIR; --export DIR writes the generated one)
  fake-openai
            serve an OpenAI-compatible API answered by an agent's own model, to try the OpenAI providers offline
  bench latency
            measure voice-to-voice latency: a WebRTC caller speaks turns to the agent, served on this
            machine against a fake OpenAI-compatible server with the latencies you set (%[1]s bench latency --turns 30)

agents: %[3]s
`

func (c *cli) usage() string {
	return fmt.Sprintf(usage, c.name, c.agentDefault(), c.agentNames())
}

func (c *cli) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, c.usage())
		return flag.ErrHelp
	}
	switch args[0] {
	case "console":
		return c.consoleCmd(ctx, args[1:])
	case "serve":
		return c.serveCmd(ctx, args[1:])
	case "call":
		return c.callCmd(ctx, args[1:])
	case "livekit":
		return c.livekitCmd(ctx, args[1:])
	case "talk":
		return c.talkCmd(ctx, args[1:])
	case "simulate":
		return c.simulateCmd(ctx, args[1:])
	case "inspect":
		return c.inspectCmd(ctx, args[1:])
	case "bargein-eval":
		return bargeinEvalCmd(ctx, args[1:], c.stdout, c.stderr)
	case "fake-openai":
		return c.fakeOpenAICmd(ctx, args[1:])
	case "bench":
		return c.benchCmd(ctx, args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(c.stdout, c.usage())
		return nil
	}
	fmt.Fprint(c.stderr, c.usage())
	return fmt.Errorf("unknown command %q", args[0])
}

// flagSet is a command's flag set, with the program's own flags on it.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	for _, register := range c.flags {
		register(fs)
	}
	return fs
}

// agentFlag registers --agent on fs.
func (c *cli) agentFlag(fs *flag.FlagSet) *string {
	return fs.String("agent", c.agentDefault(), "agent to run ("+c.agentNames()+")")
}

// agent is the agent named name.
func (c *cli) agent(name string) (runtime.AgentFunc, error) {
	fn, ok := c.agents[name]
	if !ok || fn == nil {
		return nil, fmt.Errorf("no agent named %q (have: %s)", name, c.agentNames())
	}
	return fn, nil
}

func (c *cli) agentDefault() string {
	if c.defaultAgent != "" {
		return c.defaultAgent
	}
	names := c.sortedNames()
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func (c *cli) sortedNames() []string {
	names := make([]string, 0, len(c.agents))
	for n := range c.agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (c *cli) agentNames() string { return strings.Join(c.sortedNames(), ", ") }
