package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
)

// settleTimeout bounds how long the scripted console waits for the agent to
// finish answering one line.
const settleTimeout = 60 * time.Second

func (c *cli) consoleCmd(ctx context.Context, args []string) error {
	stdin, stdout, stderr := c.stdin, c.stdout, c.stderr
	fs := c.flagSet("console")
	name := c.agentFlag(fs)
	eventsPath := fs.String("events", "", "also write every event as JSON lines to `FILE`")
	verbose := fs.Bool("v", false, "log debug detail to standard error")
	var audioIn []string
	fs.Func("audio-in", "speak as the caller from a WAV `FILE` (after the greeting) instead of typing: heard through the recogniser; repeat for more turns, each after the agent has answered the last", func(s string) error {
		audioIn = append(audioIn, s)
		return nil
	})
	audioOut := fs.String("audio-out", "", "record what the agent said to a WAV `FILE` (16 kHz)")
	var pf providerFlags
	pf.register(fs)
	var tf turnFlags
	tf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The engines every session shares go with the command.
	defer pf.closeShared()
	fn, err := c.agent(*name)
	if err != nil {
		return err
	}
	var caller [][]int16
	for _, path := range audioIn {
		samples, err := loadCaller(path)
		if err != nil {
			return err
		}
		caller = append(caller, samples)
	}
	agent, prov, release, err := pf.newAgent(ctx, fn, caller != nil)
	if err != nil {
		return err
	}
	defer release()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	logger.Info("console", "agent", *name, "engines", prov.roles.String())
	// Standard error: standard output is the conversation, which scripts read.
	pf.printEngines(stderr, prov.roles)
	opts := append([]runtime.Option{runtime.WithLogger(logger)}, tf.options()...)
	if *audioOut != "" {
		f, err := os.Create(*audioOut)
		if err != nil {
			return fmt.Errorf("agent audio: %w", err)
		}
		defer f.Close()
		rec, err := media.NewWAVWriter(f, lineRate)
		if err != nil {
			return fmt.Errorf("agent audio: %w", err)
		}
		defer rec.Close()
		opts = append(opts, runtime.WithOutput(rec, lineRate))
	}
	if caller != nil {
		opts = append(opts, engine.WithInput(engine.InputConfig{Rate: lineRate}))
	}
	sess, err := runtime.New(agent, opts...)
	if err != nil {
		return err
	}
	var sink *events.JSONL
	if *eventsPath != "" {
		f, err := os.Create(*eventsPath)
		if err != nil {
			return fmt.Errorf("events file: %w", err)
		}
		defer f.Close()
		sink = events.NewJSONL(f)
		defer sink.Flush()
	}
	sub := sess.Subscribe(0)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- sess.Run(ctx) }()

	con := &console{sess: sess, sub: sub, out: stdout, sink: sink, engines: prov.roles.String()}
	var lineErr chan error
	if caller != nil {
		con.line = &line{sess: sess}
		lineErr = make(chan error, 1)
		go func() { lineErr <- con.line.run(ctx) }()
	}
	switch f, ok := stdin.(*os.File); {
	case caller != nil:
		err = con.spoken(ctx, caller, agent.OnEnter != nil)
	case ok && term.IsTerminal(int(f.Fd())):
		err = con.interactive(ctx, stdin, agent.OnEnter != nil)
	default:
		err = con.scripted(ctx, stdin, agent.OnEnter != nil)
	}
	cancel()
	if lineErr != nil {
		if lerr := <-lineErr; err == nil {
			err = lerr
		}
	}
	if rerr := <-runErr; err == nil {
		err = rerr
	}
	// Print whatever the session said while it wound down.
	for e := range sub.C() {
		con.show(e, false)
	}
	return err
}

type console struct {
	sess *runtime.Session
	line *line // the caller's audio line, with --audio-in
	sub  *events.Subscription
	sink *events.JSONL
	// engines says which engine each role uses, for the interactive
	// console's first line.
	engines string

	mu  sync.Mutex // guards out
	out io.Writer
}

// show prints the line e makes in the transcript (see transcriptLine); the
// interactive console leaves out the user's and agent's words, which the
// terminal echo and the captions show.
func (c *console) show(e events.Event, interactive bool) {
	if c.sink != nil {
		_ = c.sink.Write(e)
	}
	switch e.Kind {
	case events.UserTurn, events.PlayoutDone, events.PlayoutTruncate:
		if interactive {
			return
		}
	}
	line, ok := transcriptLine(e)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintln(c.out, line)
}

// transcriptLine is the line a script reads for e, if e makes one: what
// the user said, what the agent played, each tool's terminal state,
// handoffs, keys pressed, and providers that failed or handed over to
// their backup. Every line comes from the session's one event stream, so
// lines are in the order the session decided what they say.
func transcriptLine(e events.Event) (string, bool) {
	switch e.Kind {
	case events.UserTurn:
		return "user: " + e.Text, true
	case events.PlayoutDone:
		return "agent: " + e.Text, e.Text != ""
	case events.PlayoutTruncate:
		return "agent: " + e.Text + " [interrupted]", e.Text != ""
	case events.ToolTerminal:
		return fmt.Sprintf("tool: %s -> %s", e.Tool, e.State), true
	case events.Handoff:
		return fmt.Sprintf("handoff: %s (%s)", e.Text, e.Reason), true
	case events.DTMF:
		return "dtmf: " + e.Text, true
	case events.ProviderError:
		return fmt.Sprintf("error: %s: %s", e.Provider, e.Error), true
	case events.ProviderFailover:
		return fmt.Sprintf("failover: %s: %s", e.Provider, e.Error), true
	case events.SessionEnded:
		// The agent hung up (end_call, Session.End): say why.
		if e.Reason != "" {
			return "ended: " + e.Reason, true
		}
	}
	return "", false
}

// errSessionEnded is until's error when the session ends first: the agent
// hung up (end_call), which ends a scripted console without an error.
var errSessionEnded = errors.New("session ended")

// until prints events until one satisfies done, within settleTimeout.
func (c *console) until(ctx context.Context, what string, done func(events.Event) bool) error {
	timer := time.NewTimer(settleTimeout)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-c.sub.C():
			if !ok {
				return errSessionEnded
			}
			c.show(e, false)
			if done(e) {
				return nil
			}
		case <-timer.C:
			return fmt.Errorf("agent did not settle within %v waiting for %s", settleTimeout, what)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// greeting waits for the agent's greeting to settle.
func (c *console) greeting(ctx context.Context) error {
	started := false
	return c.until(ctx, "the greeting", func(e events.Event) bool {
		started = started || e.Kind == events.TurnStarted
		return started && e.Kind == events.Idle
	})
}

// spoken plays the caller's recorded speech down the line after the
// greeting and waits for the agent to answer every turn it heard.
func (c *console) spoken(ctx context.Context, caller [][]int16, greets bool) error {
	if greets {
		if err := c.greeting(ctx); err != nil {
			return err
		}
	}
	for _, speech := range caller {
		sent := c.line.say(speech)
		select {
		case <-sent:
		case <-ctx.Done():
			return ctx.Err()
		}
		// The caller has finished; the agent answers what it heard,
		// tool calls and follow-ups included, until nothing is left
		// to do.
		heard := false
		if err := c.until(ctx, "the answer to the caller's speech", func(e events.Event) bool {
			heard = heard || e.Kind == events.UserTurn
			// Words not taken as a turn (a backchannel) leave the
			// agent idle: there is no answer to wait for.
			ignored := e.Kind == events.TranscriptIgnored && e.Final
			return heard && e.Kind == events.Idle || !heard && ignored
		}); err != nil {
			return err
		}
	}
	return nil
}

// scripted reads one line per turn and waits for the agent to settle after
// each, so the output is a faithful transcript of the conversation.
func (c *console) scripted(ctx context.Context, stdin io.Reader, greets bool) error {
	if greets {
		if err := c.greeting(ctx); err != nil {
			return err
		}
	}
	lines := bufio.NewScanner(stdin)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if line == "" {
			continue
		}
		if err := c.sess.Inject(ctx, line); err != nil {
			return err
		}
		heard := false
		err := c.until(ctx, "the answer to "+fmt.Sprintf("%q", line), func(e events.Event) bool {
			heard = heard || (e.Kind == events.UserTurn && e.Text == line)
			return heard && e.Kind == events.Idle
		})
		if errors.Is(err, errSessionEnded) {
			return nil // the agent hung up
		}
		if err != nil {
			return err
		}
	}
	return lines.Err()
}

// interactive lets the user type at any time: a line entered while the
// agent speaks barges in. The agent's words appear as they are played.
func (c *console) interactive(ctx context.Context, stdin io.Reader, _ bool) error {
	fmt.Fprintf(c.out, "Talking to the agent (%s). Type and press Enter; typing while it speaks interrupts it. Ctrl-D ends.\n", c.engines)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	captions := time.NewTicker(100 * time.Millisecond)
	defer captions.Stop()
	cl := &captionLine{out: c.out}
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			// The terminal echoed the line and its newline already.
			c.mu.Lock()
			cl.open = false
			c.mu.Unlock()
			if err := c.sess.Inject(ctx, line); err != nil {
				return err
			}
		case e, ok := <-c.sub.C():
			if !ok {
				return nil
			}
			c.mu.Lock()
			switch e.Kind {
			case events.PlayoutDone, events.PlayoutTruncate:
				cl.finish(e)
			case events.ToolTerminal, events.ProviderError:
				cl.close()
			}
			c.mu.Unlock()
			c.show(e, true)
		case <-captions.C:
			cp, err := c.sess.NowPlaying(ctx)
			if err != nil || cp.Text == "" {
				continue
			}
			c.mu.Lock()
			cl.show(cp.Epoch, cp.Text)
			c.mu.Unlock()
		}
	}
}

// captionLine prints an agent turn's words as they are played, one line per
// turn, reopened with "…" when something else had to be printed meanwhile.
type captionLine struct {
	out     io.Writer
	epoch   uint64
	printed string
	open    bool
}

func (l *captionLine) show(epoch uint64, text string) {
	if epoch != l.epoch {
		l.close()
		l.epoch, l.printed = epoch, ""
	}
	if !strings.HasPrefix(text, l.printed) || text == l.printed {
		return
	}
	more := text[len(l.printed):]
	if !l.open {
		fmt.Fprint(l.out, "agent: ")
		if l.printed != "" {
			fmt.Fprint(l.out, "… ")
		}
		more = strings.TrimLeft(more, " ")
		l.open = true
	}
	fmt.Fprint(l.out, more)
	l.printed = text
}

func (l *captionLine) close() {
	if l.open {
		fmt.Fprintln(l.out)
		l.open = false
	}
}

// finish prints the rest of the turn when its playout ends.
func (l *captionLine) finish(e events.Event) {
	if e.Epoch == l.epoch || l.epoch == 0 {
		l.show(e.Epoch, e.Text)
		if e.Kind == events.PlayoutTruncate && l.open {
			fmt.Fprint(l.out, " [interrupted]")
		}
		l.close()
	}
}
