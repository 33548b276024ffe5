package cli

import (
	"context"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/holdline/holdline/localaudio"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/runtime"
	"github.com/holdline/holdline/runtime/engine"
)

// openTalkDevice opens the microphone and speaker talk uses. Tests replace
// it to run talk on mediadevices' test source and miniaudio's null backend.
var openTalkDevice = func(ctx context.Context, log *slog.Logger) (*localaudio.Device, error) {
	return localaudio.Open(ctx, localaudio.WithLogger(log))
}

// pumpMicrophone feeds the microphone to the session. Tests wrap it to
// choose when the test source's tone, a caller who never pauses, is heard.
var pumpMicrophone = (*localaudio.Device).Pump

// talkCmd runs an agent on this computer's microphone and speaker until ctx
// ends (Ctrl-C), printing the conversation as the console does.
func (c *cli) talkCmd(ctx context.Context, args []string) error {
	stdout, stderr := c.stdout, c.stderr
	fs := c.flagSet("talk")
	name := c.agentFlag(fs)
	verbose := fs.Bool("v", false, "log debug detail to standard error")
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
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// The devices before the providers: without them there is nothing to
	// talk with, and a local recogniser takes a while to load.
	dev, err := openTalkDevice(ctx, logger)
	if err != nil {
		return err
	}
	defer dev.Close()
	agent, prov, release, err := pf.newAgent(ctx, fn, true)
	if err != nil {
		return err
	}
	defer release()
	// Caller audio at 16 kHz keeps the session's echo canceller on (the
	// default): its reference is what the session writes to dev, so the
	// agent hearing itself through the speaker is not a barge-in.
	sess, err := runtime.New(agent, append(tf.options(),
		runtime.WithLogger(logger),
		runtime.WithOutput(dev, dev.Rate()),
		engine.WithInput(engine.InputConfig{Rate: media.Rate16k}),
	)...)
	if err != nil {
		return err
	}
	sub := sess.Subscribe(0)
	pf.printEngines(stderr, prov.roles)
	fmt.Fprintf(stderr, "Talking to the agent: microphone %q, speaker %q, %s. Speak; talking over it interrupts. Ctrl-C ends.\n", dev.Microphone(), dev.Speaker(), prov.roles)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sess.Run(gctx) })
	g.Go(func() error {
		err := pumpMicrophone(dev, gctx, sess.PushAudio)
		if gctx.Err() != nil {
			return nil // Ctrl-C, or the session ended first
		}
		return err
	})
	// The subscription closes when the session ends.
	con := &console{sess: sess, sub: sub, out: stdout}
	for e := range sub.C() {
		con.show(e, false)
	}
	cancel() // the session has ended: stop listening
	err = g.Wait()
	s := dev.Stats()
	logger.Debug("talk: audio", "played", s.Played, "underruns", s.Underruns, "overruns", s.Overruns, "dropped", s.Dropped, "captured", s.Captured, "lost", s.Lost)
	return err
}
