package webrtc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/pion/interceptor"
	pion "github.com/pion/webrtc/v4"

	"github.com/holdline/holdline/media/rtpjitter"
)

// Opus is the only codec offered or accepted: every browser has it.
var opusCodec = pion.RTPCodecCapability{
	MimeType:    pion.MimeTypeOpus,
	ClockRate:   48000,
	Channels:    2,
	SDPFmtpLine: "minptime=10;useinbandfec=1",
}

const opusPayloadType = 111

// Defaults for a Transport.
const (
	// DefaultGatherTimeout bounds how long an answer waits for its ICE
	// candidates.
	DefaultGatherTimeout = 5 * time.Second
	// DefaultDisconnectedTimeout is how long without ICE traffic before a
	// peer counts as disconnected (the session stops speaking into it).
	DefaultDisconnectedTimeout = 2 * time.Second
	// DefaultFailedTimeout is how long a disconnected peer may recover
	// before it is failed and closed.
	DefaultFailedTimeout = 10 * time.Second
	// DefaultSTUNTimeout bounds the wait for a STUN server's answer while
	// gathering. A STUN server answers within a round trip or not at all,
	// and every call's answer waits for it.
	DefaultSTUNTimeout = time.Second
)

type transportConfig struct {
	servers                     []ICEServer // STUN and TURN servers with fixed credentials
	turn                        *turnSecret // a TURN server whose credentials are minted per peer
	stunTimeout                 time.Duration
	portMin, portMax            uint16
	nat1To1                     []string
	loopback                    bool
	interfaces                  []string
	gatherTimeout               time.Duration
	disconnected, failed        time.Duration
	log                         *slog.Logger
	inputRate                   int
	opusComplexity, opusBitrate int
	jitter                      []rtpjitter.Option
}

// Option configures a Transport.
type Option func(*transportConfig) error

// WithICEServers sets STUN servers the peer gathers candidates with, as
// "stun:host:port" URLs. A TURN server needs credentials: WithICEServer.
func WithICEServers(urls ...string) Option {
	return func(c *transportConfig) error {
		if err := (ICEServer{URLs: urls}).check(); err != nil {
			return fmt.Errorf("webrtc: %w (WithICEServer takes them)", err)
		}
		c.servers = append(c.servers, ICEServer{URLs: slices.Clone(urls)})
		return nil
	}
}

// WithUDPPortRange limits the UDP ports peers listen on (a firewall's
// opening).
func WithUDPPortRange(min, max uint16) Option {
	return func(c *transportConfig) error {
		if min == 0 || max < min {
			return fmt.Errorf("webrtc: UDP port range %d-%d", min, max)
		}
		c.portMin, c.portMax = min, max
		return nil
	}
}

// WithPublicIPs announces these addresses as host candidates, for a server
// behind a 1:1 NAT (a cloud VM's public address).
func WithPublicIPs(ips ...string) Option {
	return func(c *transportConfig) error { c.nat1To1 = ips; return nil }
}

// WithLoopback includes (or leaves out) loopback candidates. They are
// included by default, so a browser on the same machine can connect.
func WithLoopback(on bool) Option {
	return func(c *transportConfig) error { c.loopback = on; return nil }
}

// WithInterfaces limits the network interfaces peers use, for their
// candidates and for resolving a browser's mDNS (.local) candidates, to
// those named. WithInterfaces("lo") keeps a test's or an example's calls
// on this machine: nothing is sent on any other interface, not even the
// multicast group joins of mDNS. By default every interface is used.
func WithInterfaces(names ...string) Option {
	return func(c *transportConfig) error {
		if len(names) == 0 {
			return fmt.Errorf("webrtc: WithInterfaces names no interface")
		}
		c.interfaces = slices.Clone(names)
		return nil
	}
}

// WithGatherTimeout bounds how long an answer waits for its candidates: at
// the deadline it goes with those gathered so far.
func WithGatherTimeout(d time.Duration) Option {
	return func(c *transportConfig) error {
		if d <= 0 {
			return fmt.Errorf("webrtc: gather timeout %v", d)
		}
		c.gatherTimeout = d
		return nil
	}
}

// WithSTUNTimeout bounds how long gathering waits for a STUN server's
// answer (default DefaultSTUNTimeout): past it, the answer goes without
// that server's candidate.
func WithSTUNTimeout(d time.Duration) Option {
	return func(c *transportConfig) error {
		if d <= 0 {
			return fmt.Errorf("webrtc: STUN timeout %v", d)
		}
		c.stunTimeout = d
		return nil
	}
}

// WithICETimeouts sets how long without traffic before a peer is
// disconnected, and how much longer before it is failed and closed.
func WithICETimeouts(disconnected, failed time.Duration) Option {
	return func(c *transportConfig) error {
		if disconnected <= 0 || failed <= 0 {
			return fmt.Errorf("webrtc: ICE timeouts %v, %v", disconnected, failed)
		}
		c.disconnected, c.failed = disconnected, failed
		return nil
	}
}

// WithOpus sets the encoder's complexity (0-10, default 5) and bitrate in
// bits per second (default 32000).
func WithOpus(complexity, bitrate int) Option {
	return func(c *transportConfig) error {
		if complexity < 0 || complexity > 10 || bitrate < 6000 || bitrate > 510000 {
			return fmt.Errorf("webrtc: Opus complexity %d, bitrate %d", complexity, bitrate)
		}
		c.opusComplexity, c.opusBitrate = complexity, bitrate
		return nil
	}
}

// WithJitterBuffer sets the caller's jitter buffer: the delay it starts
// at and the range it adapts in (defaults 40 ms, 20 ms and 200 ms; see
// package media/rtpjitter).
func WithJitterBuffer(initial, min, max time.Duration) Option {
	return func(c *transportConfig) error {
		if _, err := rtpjitter.New(rtpjitter.WithDelay(initial, min, max)); err != nil {
			return fmt.Errorf("webrtc: %w", err)
		}
		c.jitter = []rtpjitter.Option{rtpjitter.WithDelay(initial, min, max)}
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *transportConfig) error { c.log = l; return nil }
}

// Transport makes Peers. One Transport serves any number of peers.
type Transport struct {
	cfg transportConfig
	api *pion.API
}

// NewTransport returns a Transport.
func NewTransport(opts ...Option) (*Transport, error) {
	cfg := transportConfig{
		loopback:       true,
		gatherTimeout:  DefaultGatherTimeout,
		stunTimeout:    DefaultSTUNTimeout,
		disconnected:   DefaultDisconnectedTimeout,
		failed:         DefaultFailedTimeout,
		log:            slog.Default(),
		inputRate:      16000,
		opusComplexity: 5,
		opusBitrate:    32000,
	}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	m := &pion.MediaEngine{}
	if err := m.RegisterCodec(pion.RTPCodecParameters{RTPCodecCapability: opusCodec, PayloadType: opusPayloadType}, pion.RTPCodecTypeAudio); err != nil {
		return nil, fmt.Errorf("webrtc: %w", err)
	}
	ir := &interceptor.Registry{}
	// Only RTCP sender and receiver reports: the audio goes at a fixed
	// bitrate, so there is no bandwidth to estimate (transport-cc), browsers
	// do not negotiate retransmission (NACK) for Opus, and nothing reads
	// pion's statistics. The default set costs a copy and a lookup per
	// packet each, and on a server of 100 calls that is a tenth of a core.
	if err := pion.ConfigureRTCPReports(ir); err != nil {
		return nil, fmt.Errorf("webrtc: %w", err)
	}
	var se pion.SettingEngine
	se.SetIncludeLoopbackCandidate(cfg.loopback)
	se.SetICETimeouts(cfg.disconnected, cfg.failed, time.Second)
	se.SetSTUNGatherTimeout(min(cfg.stunTimeout, cfg.gatherTimeout))
	se.SetNetworkTypes([]pion.NetworkType{pion.NetworkTypeUDP4, pion.NetworkTypeUDP6})
	if len(cfg.interfaces) > 0 {
		se.SetInterfaceFilter(func(name string) bool { return slices.Contains(cfg.interfaces, name) })
	}
	if cfg.portMin != 0 {
		if err := se.SetEphemeralUDPPortRange(cfg.portMin, cfg.portMax); err != nil {
			return nil, fmt.Errorf("webrtc: %w", err)
		}
	}
	if len(cfg.nat1To1) > 0 {
		se.SetNAT1To1IPs(cfg.nat1To1, pion.ICECandidateTypeHost)
	}
	api := pion.NewAPI(pion.WithMediaEngine(m), pion.WithInterceptorRegistry(ir), pion.WithSettingEngine(se))
	return &Transport{cfg: cfg, api: api}, nil
}

// Sentinel errors of Answer, for callers that map them to HTTP statuses.
var (
	// ErrBadOffer: the offer is not SDP, or offers nothing we can use.
	ErrBadOffer = errors.New("webrtc: bad offer")
	// ErrClosed: the peer was closed.
	ErrClosed = errors.New("webrtc: peer closed")
)

// gatherCtx bounds candidate gathering by ctx and the configured timeout.
func (t *Transport) gatherCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.cfg.gatherTimeout)
}
