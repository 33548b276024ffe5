package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/livekit"
)

// livekitCmd runs the agent as a LiveKit agent worker: LiveKit's server
// dispatches rooms to it, and each room is one call.
func (c *cli) livekitCmd(ctx context.Context, args []string) error {
	stdout, stderr := c.stdout, c.stderr
	fs := c.flagSet("livekit")
	serverURL := fs.String("url", os.Getenv("LIVEKIT_URL"), "the LiveKit server's `URL` (ws://HOST:7880, wss://...) (default: $LIVEKIT_URL); the key and secret come from LIVEKIT_API_KEY and LIVEKIT_API_SECRET")
	name := c.agentFlag(fs)
	agentName := fs.String("agent-name", "", "register under this `NAME`: LiveKit then gives this worker only the rooms an explicit dispatch names it for; empty takes rooms by automatic dispatch")
	maxSessions := fs.Int("max-sessions", 0, "rooms at once (default: as many as the engines in use can serve on this machine's cores)")
	ttl := fs.Duration("resume-ttl", livekit.DefaultResumeTTL, "how long a room's call waits for its caller's participant (or this worker's connection to the server) to come back")
	callerTimeout := fs.Duration("caller-timeout", livekit.DefaultCallerTimeout, "how long a dispatched job waits for a caller to join the room")
	echo := fs.Bool("echo-cancel", false, "run Holdline's echo canceller on browser and app participants too (they cancel echo themselves; SIP participants always get it)")
	storeSpec := fs.String("store", "none", "where rooms' sessions are checkpointed: redis://HOST:PORT shared by the workers, so that a room whose worker died resumes on the worker LiveKit gives it to next (file:PATH for one worker), or none")
	worker := fs.String("worker", workerName(), "this worker's `NAME` in the store's leases and the metrics")
	drainTimeout := fs.Duration("drain-timeout", calls.DefaultDrainTimeout, "on SIGTERM, take no new rooms and wait this long for the rooms in progress to end; the rest are then checkpointed and released")
	metricsAddr := fs.String("metrics", "", "serve Prometheus /metrics and /healthz at `ADDR` (e.g. 127.0.0.1:9090)")
	verbose := fs.Bool("v", false, "log debug detail")
	var pf providerFlags
	pf.register(fs)
	var tf turnFlags
	tf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	defer pf.closeShared()
	fn, err := c.agent(*name)
	if err != nil {
		return err
	}
	if *serverURL == "" {
		return errors.New("livekit: name the LiveKit server with --url ws://HOST:7880 (or LIVEKIT_URL)")
	}
	if !strings.HasPrefix(*serverURL, "ws://") && !strings.HasPrefix(*serverURL, "wss://") &&
		!strings.HasPrefix(*serverURL, "http://") && !strings.HasPrefix(*serverURL, "https://") {
		return fmt.Errorf("livekit: --url %q: want ws://HOST:PORT or wss://HOST", *serverURL)
	}
	key, secret := os.Getenv("LIVEKIT_API_KEY"), os.Getenv("LIVEKIT_API_SECRET")
	if key == "" || secret == "" {
		return errors.New("livekit: set LIVEKIT_API_KEY and LIVEKIT_API_SECRET to the server's key and secret")
	}
	if *maxSessions < 0 {
		return fmt.Errorf("--max-sessions %d: want a positive count", *maxSessions)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	probe, err := pf.probe(ctx, fn, true)
	if err != nil {
		return err
	}
	logger.Info("engines", "agent", *name, "engines", probe.roles.String())
	newAgent := pf.agentFunc(fn, true)
	hopts := []calls.Option{calls.WithLogger(logger), calls.WithSessionOptions(tf.options()...)}
	if *maxSessions > 0 {
		hopts = append(hopts, calls.WithMaxCalls(*maxSessions))
	} else {
		hopts = append(hopts, calls.WithCallCost(probe.callCost()))
	}
	st, skey, err := openStore(ctx, *storeSpec)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
		hopts = append(hopts, calls.WithStore(st, *worker, skey))
	} else {
		logger.Info("no store: a room's call does not outlive this worker (--store redis://HOST:PORT to resume rooms on another worker)")
	}
	host, err := calls.New(newAgent, hopts...)
	if err != nil {
		return err
	}
	defer host.Close()
	logger.Info("admission", "max_rooms", host.MaxCalls(), "cores", goruntime.GOMAXPROCS(0))
	topts := []livekit.Option{livekit.WithLogger(logger), livekit.WithResumeTTL(*ttl),
		livekit.WithCallerTimeout(*callerTimeout), livekit.WithEchoCancellation(*echo)}
	tr := livekit.NewTransport(host, topts...)
	w, err := livekit.NewWorker(*serverURL, key, secret, tr.Serve,
		livekit.WithAgentName(*agentName), livekit.WithMaxJobs(host.MaxCalls()), livekit.WithWorkerLogger(logger))
	if err != nil {
		return err
	}
	if *metricsAddr != "" {
		stop, err := serveHostMetrics(*metricsAddr, host, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	dispatch := "automatic dispatch"
	if *agentName != "" {
		dispatch = "explicit dispatch as " + *agentName
	}
	fmt.Fprintf(stdout, "Holdline is a LiveKit agent worker for the %s agent at %s (%s)\n", *name, *serverURL, dispatch)
	pf.printEngines(stdout, probe.roles)

	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorker()
	if st != nil {
		// LiveKit gives a room's job to a worker once: the rooms of a
		// worker that died are dispatched again by the workers left.
		rescue, err := livekit.NewRescue(*serverURL, key, secret, st, *worker,
			livekit.WithRescueAgentName(*agentName), livekit.WithRescueLogger(logger))
		if err != nil {
			return err
		}
		rescued := make(chan struct{})
		go func() {
			defer close(rescued)
			_ = rescue.Run(wctx)
		}()
		defer func() { stopWorker(); <-rescued }()
	}
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	select {
	case err := <-ran:
		return err
	case <-ctx.Done():
	case <-c.drain.take():
		host.BeginDrain()
		logger.Info("draining: no new rooms; a second SIGTERM or Ctrl-C stops at once", "rooms", w.Jobs(), "timeout", *drainTimeout)
		dctx, cancel := context.WithTimeout(ctx, *drainTimeout)
		err := w.Drain(dctx)
		cancel()
		if err != nil {
			logger.Warn("drain cut short: releasing the rooms left", "rooms", w.Jobs(), "err", err)
		} else {
			logger.Info("drained: exiting")
		}
	}
	stopWorker()
	select {
	case err := <-ran:
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	case <-time.After(shutdownGrace):
		logger.Warn("the worker did not stop in time")
	}
	return nil
}

// serveHostMetrics serves the host's Prometheus metrics and a liveness
// probe at addr.
func serveHostMetrics(addr string, host *calls.Host, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, addrInUse("--metrics", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", host.MetricsHandler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("metrics listener stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}
