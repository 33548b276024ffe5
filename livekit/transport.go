package livekit

import (
	"context"

	"errors"
	"github.com/go-logr/logr"
	lklogger "github.com/livekit/protocol/logger"
	"log/slog"
	"time"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/media"
	"github.com/holdline/holdline/media/rtpjitter"
)

// Defaults of a Transport.
const (
	// DefaultResumeTTL is how long a room's call waits for its caller (or
	// the agent's own connection) to come back.
	DefaultResumeTTL = 30 * time.Second
	// DefaultCallerTimeout is how long a job waits for a caller to join
	// the room and publish a microphone.
	DefaultCallerTimeout = time.Minute
	// joinTimeout bounds one attempt to join a room.
	joinTimeout = 15 * time.Second
	// leaseTTL is how long a worker's hold on a room's session lasts
	// unrenewed: a job re-dispatched after its worker died waits at most
	// this long for the dead worker's hold to lapse.
	leaseTTL = 5 * time.Second
)

// ErrNoCaller: nobody joined the room to talk to within the caller
// timeout.
var ErrNoCaller = errors.New("livekit: no caller joined the room")

type config struct {
	log            *slog.Logger
	resumeTTL      time.Duration
	callerTimeout  time.Duration
	echoCancelAll  bool
	jitter         []rtpjitter.Option
	opusComplexity int
	opusBitrate    int
}

// Option configures a Transport.
type Option func(*config)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// WithResumeTTL sets how long a call waits for its caller's participant,
// or the agent's own connection to the server, to come back before it
// ends (default DefaultResumeTTL).
func WithResumeTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.resumeTTL = d
		}
	}
}

// WithCallerTimeout sets how long a job waits for a caller to join and
// publish a microphone (default DefaultCallerTimeout).
func WithCallerTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.callerTimeout = d
		}
	}
}

// WithEchoCancellation runs Holdline's echo canceller on every caller,
// browsers and apps included (they cancel their own echo; SIP
// participants get it either way).
func WithEchoCancellation(on bool) Option {
	return func(c *config) { c.echoCancelAll = on }
}

// WithJitterBuffer sets the caller audio's jitter buffer (see
// rtpjitter.WithDelay).
func WithJitterBuffer(opts ...rtpjitter.Option) Option {
	return func(c *config) { c.jitter = append(c.jitter, opts...) }
}

// Transport serves calls in LiveKit rooms for a host: each Serve is one
// room's call.
type Transport struct {
	host *calls.Host
	cfg  config
}

// NewTransport returns a transport whose calls the host runs.
func NewTransport(host *calls.Host, opts ...Option) *Transport {
	cfg := config{
		log:            slog.Default(),
		resumeTTL:      DefaultResumeTTL,
		callerTimeout:  DefaultCallerTimeout,
		opusComplexity: 5,
		opusBitrate:    32000,
	}
	for _, o := range opts {
		o(&cfg)
	}
	host.AddTransport(Kind)
	return &Transport{host: host, cfg: cfg}
}

// Kind is the transport's name in the metrics and checkpoints.
const Kind = "livekit"

// inputRate is the rate the caller's audio is decoded at for the session.
const inputRate = media.Rate16k

// sdkLogger is the LiveKit SDK's logger for a room: its records in the
// transport's log, its chatter (every track and state change) at debug.
func (t *Transport) sdkLogger(log *slog.Logger) lklogger.Logger {
	return lklogger.LogRLogger(logr.FromSlogHandler(demoted{log.Handler()}))
}

// demoted is a slog.Handler that logs below warnings at debug.
type demoted struct{ slog.Handler }

func (d demoted) Enabled(ctx context.Context, l slog.Level) bool {
	if l < slog.LevelWarn {
		l = slog.LevelDebug
	}
	return d.Handler.Enabled(ctx, l)
}

func (d demoted) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		r.Level = slog.LevelDebug
	}
	return d.Handler.Handle(ctx, r)
}

func (d demoted) WithAttrs(as []slog.Attr) slog.Handler { return demoted{d.Handler.WithAttrs(as)} }
func (d demoted) WithGroup(n string) slog.Handler       { return demoted{d.Handler.WithGroup(n)} }
