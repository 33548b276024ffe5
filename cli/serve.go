package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/holdline/holdline/calls"
	"github.com/holdline/holdline/carrier"
	"github.com/holdline/holdline/server"
	hsip "github.com/holdline/holdline/sip"
	"github.com/holdline/holdline/store"
	"github.com/holdline/holdline/tracing"
	"github.com/holdline/holdline/webrtc"
)

// shutdownGrace bounds how long serve waits for requests in flight when it
// stops.
const shutdownGrace = 5 * time.Second

func (c *cli) serveCmd(ctx context.Context, args []string) error {
	stdout, stderr := c.stdout, c.stderr
	fs := c.flagSet("serve")
	addr := fs.String("http", "127.0.0.1:8080", "listen `ADDR` for the web client, the session API and /metrics")
	metricsAddr := fs.String("metrics", "", "serve /metrics on its own listener at `ADDR`, without the token, for a Prometheus scraper on a private address (it then leaves --http)")
	name := c.agentFlag(fs)
	ttl := fs.Duration("resume-ttl", server.DefaultResumeTTL, "how long a session whose connection dropped waits to be resumed")
	maxSessions := fs.Int("max-sessions", 0, "concurrent sessions; more get 503 with Retry-After (default: as many as the engines in use can serve on this machine's cores without dropping callers' words: 28 per core on the local recogniser and voice, else 200)")
	echo := fs.Bool("echo-cancel", false, "run Holdline's echo canceller on browser audio too (browsers cancel echo themselves)")
	publicIP := fs.String("public-ip", "", "announce this `IP` as the media address (a server behind 1:1 NAT)")
	ports := fs.String("udp-ports", "", "media UDP port range `MIN-MAX` (default: any)")
	iceServers := fs.String("ice-servers", "", "STUN and TURN servers for the server's side of WebRTC calls, as the W3C RTCIceServer `JSON` "+
		`[{"urls":["turn:host:3478"],"username":"u","credential":"p"}] (default: $HOLDLINE_ICE_SERVERS; none)`)
	iceInterfaces := fs.String("ice-interfaces", "", "carry media only on these network `INTERFACES` (comma-separated, e.g. eth0): no candidates on the others (default: all)")
	turnSecret := fs.String("turn-secret", "", "a `SECRET` shared with a TURN server (coturn's static-auth-secret with use-auth-secret): every call, "+
		"the server's side and the client's, gets credentials of its own that expire (default: $HOLDLINE_TURN_SECRET; prefer it: a flag shows in ps)")
	turnURLs := fs.String("turn-urls", "", "the TURN server(s) --turn-secret is for, comma-separated `URLs` (turn:host:3478,turns:host:5349)")
	turnTTL := fs.Duration("turn-ttl", webrtc.DefaultTURNCredentialTTL, "how long minted TURN credentials last: longer than a call and its resume window")
	sipAddr := fs.String("sip", "", "also answer phone calls on these `LISTENERS`, comma-separated: udp:ADDR, tcp:ADDR, tls:ADDR (e.g. udp:0.0.0.0:5060,tls:0.0.0.0:5061)")
	sipCert := fs.String("sip-cert", "", "the TLS certificate `FILE` (PEM, with its chain) of a tls: listener")
	sipKey := fs.String("sip-key", "", "the private key `FILE` (PEM) of --sip-cert")
	sipPublic := fs.String("sip-public-addr", "", "advertise `HOST[:PORT]` in Contact, Via and the SDP instead of the listeners' addresses, and send RTP where the caller's comes from (a server behind NAT; HOST an IP address)")
	rtpPorts := fs.String("rtp-ports", "", "bind calls' RTP in the port range `LOW-HIGH` (one port a call; when all are in use, INVITEs get 503) (default: any)")
	sipSRTP := fs.String("srtp", "optional", "encrypt phone calls' media with SRTP (SDES keys, best over tls: listeners): `off`, optional (answer SRTP when offered) or required (488 to a plain offer)")
	sipAllow := fs.String("sip-allow", "", "accept INVITEs only from these `CIDRs` (comma-separated: a trunk's addresses)")
	rtpTimeout := fs.Duration("rtp-timeout", hsip.DefaultRTPTimeout, "hang up a call whose caller sent no RTP for this long")
	rtpRealtime := fs.Bool("rtp-realtime", false, "send RTP from a real-time priority thread (needs root or CAP_SYS_NICE): on time however busy the machine")
	redial := fs.Duration("sip-redial-window", hsip.DefaultRedialWindow, "with a store: a caller who dials again within this long after their worker died picks the call up where it was (0: never)")
	holdAudio := fs.String("hold-audio", hsip.HoldTone, "what a caller hears on hold while a tool's sip.WarmTransfer briefs a person: a WAV `FILE` (played in a loop), or tone for a generated comfort tone")
	sipUser := fs.String("sip-user", "", "make callers authenticate (digest) as `NAME`, with the password in HOLDLINE_SIP_PASSWORD")
	var sipRegister stringList
	fs.Var(&sipRegister, "sip-register", "register at a registrar (a PBX, a SIP provider) as `AOR` (sip:USER@REGISTRAR[:PORT][;transport=udp|tcp|tls], sips: for TLS) and answer the calls it sends; the password in HOLDLINE_SIP_PASSWORD (repeatable)")
	sipRegExpires := fs.Duration("sip-register-expires", hsip.DefaultRegisterExpires, "the registration lifetime to ask for (the registrar may grant less: it is refreshed before what was granted runs out)")
	sipCA := fs.String("sip-ca", "", "the roots (PEM `FILE`) that verify a TLS registrar's certificate (--sip-register over TLS); default: the system's")
	publicURL := fs.String("public-url", "", "the `URL` carriers reach this server at (https://HOST), for Twilio's and Plivo's webhook signatures and the stream URL the answers name (default: X-Forwarded-Proto/Host, else the request's own)")
	storeSpec := fs.String("store", "", "where sessions are checkpointed to outlive this worker: `file:PATH`, redis://HOST:PORT (workers sharing it take over each other's sessions), or none (default: a file under the user's cache, one per HTTP port)")
	worker := fs.String("worker", workerName(), "this worker's `NAME` in the store's leases and in the metrics (holdline_worker_sessions, holdline_drain_state)")
	drainTimeout := fs.Duration("drain-timeout", calls.DefaultDrainTimeout, "on SIGTERM (or POST /v1/admin/drain), take no new calls and wait this long for those in progress to move or end; the rest are then checkpointed and released for other workers")
	moveCalls := fs.Bool("move-calls", true, "with a Redis store: when draining, move calls to other workers at their next clean point (WebRTC clients re-offer through the front door; phone calls are REFERred to --sip-front-door) rather than waiting for them to end")
	sipFrontDoor := fs.String("sip-front-door", "", "the SIP proxy in front of the workers (`URI`, e.g. sip:holdline@10.0.0.1:5060): a draining worker REFERs its phone calls there, with a handoff token, to move them to another worker")
	verbose := fs.Bool("v", false, "log debug detail")
	traceContent := fs.Bool("trace-content", false, "with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT), put what was said in the spans: tool arguments, the caller's transcripts, the agent's words")
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
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	token := os.Getenv("HOLDLINE_TOKEN")
	listenAddr, err := serveAddress(*addr, token != "")
	if err != nil {
		return err
	}
	if *maxSessions < 0 {
		return fmt.Errorf("--max-sessions %d: want a positive count", *maxSessions)
	}
	var pu *url.URL
	if *publicURL != "" {
		if pu, err = url.Parse(*publicURL); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
			return fmt.Errorf("--public-url %q: want https://HOST (the URL carriers reach this server at)", *publicURL)
		}
	}
	var telnyxKey ed25519.PublicKey
	if k := os.Getenv("TELNYX_PUBLIC_KEY"); k != "" {
		if telnyxKey, err = carrier.ParseTelnyxPublicKey(k); err != nil {
			return fmt.Errorf("TELNYX_PUBLIC_KEY: %w (give the public key as Telnyx's portal shows it)", err)
		}
	}
	srtpMode, err := hsip.ParseSRTPMode(*sipSRTP)
	if err != nil {
		return fmt.Errorf("--srtp %q: want off, optional or required", *sipSRTP)
	}
	var sipSpecs []sipListen // where SIP listens, if anywhere
	var allow []netip.Prefix
	var sipOpts []hsip.Option
	var sipTLS *tls.Config
	if *sipAddr != "" {
		if sipSpecs, err = parseSIPListeners(*sipAddr); err != nil {
			return err
		}
		if sipTLS, err = sipTLSConfig(sipSpecs, *sipCert, *sipKey); err != nil {
			return err
		}
		if *sipPublic != "" {
			// Behind NAT, the caller's SDP may name an address the NAT
			// rewrote nothing of: answer to where its RTP comes from.
			sipOpts = append(sipOpts, hsip.WithPublicAddr(*sipPublic), hsip.WithSymmetricRTP())
		}
		if *rtpPorts != "" {
			lo, hi, err := portRange("--rtp-ports", *rtpPorts)
			if err != nil {
				return err
			}
			sipOpts = append(sipOpts, hsip.WithRTPPorts(lo, hi))
		}
		if allow, err = parseAllow(*sipAllow); err != nil {
			return err
		}
		sipOpts = append(sipOpts, hsip.WithSRTP(srtpMode))
		if *sipFrontDoor != "" {
			sipOpts = append(sipOpts, hsip.WithFrontDoor(*sipFrontDoor))
		}
		if *sipUser != "" && os.Getenv("HOLDLINE_SIP_PASSWORD") == "" {
			return fmt.Errorf("--sip-user %s: set HOLDLINE_SIP_PASSWORD to its password", *sipUser)
		}
	}
	regs, err := sipRegistrations(sipRegister, *sipAddr != "", *sipRegExpires, os.Getenv("HOLDLINE_SIP_PASSWORD"))
	if err != nil {
		return err
	}
	if *sipCA != "" {
		roots, err := sipRoots(*sipCA)
		if err != nil {
			return err
		}
		sipOpts = append(sipOpts, hsip.WithTLSClientConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))
	}
	var topts []webrtc.Option
	if *iceServers == "" {
		*iceServers = os.Getenv("HOLDLINE_ICE_SERVERS")
	}
	if *iceServers != "" {
		servers, err := webrtc.ParseICEServers([]byte(*iceServers))
		if err != nil {
			return fmt.Errorf("--ice-servers: %w", err)
		}
		topts = append(topts, webrtc.WithICEServer(servers...))
	}
	if *iceInterfaces != "" {
		topts = append(topts, webrtc.WithInterfaces(strings.Split(*iceInterfaces, ",")...))
	}
	if *turnSecret == "" {
		*turnSecret = os.Getenv("HOLDLINE_TURN_SECRET")
	}
	switch {
	case *turnSecret != "" && *turnURLs == "":
		return errors.New("--turn-secret: name the TURN server it is for with --turn-urls turn:HOST:3478")
	case *turnSecret == "" && *turnURLs != "":
		return errors.New("--turn-urls: give the secret shared with the TURN server in HOLDLINE_TURN_SECRET (or --turn-secret); for a TURN server with a fixed username and password, use --ice-servers")
	case *turnSecret != "":
		if *turnTTL < *ttl {
			return fmt.Errorf("--turn-ttl %v is shorter than --resume-ttl %v: a resumed call could not use its relay", *turnTTL, *ttl)
		}
		opt := webrtc.WithTURNSecret(*turnSecret, *turnTTL, strings.Split(*turnURLs, ",")...)
		if _, err := webrtc.NewTransport(opt); err != nil {
			return fmt.Errorf("--turn-urls: %w", err)
		}
		topts = append(topts, opt)
	}
	if *ports != "" {
		lo, hi, err := portRange("--udp-ports", *ports)
		if err != nil {
			return err
		}
		topts = append(topts, webrtc.WithUDPPortRange(lo, hi))
	}

	// The ports before anything else, the store above all: a second serve
	// on a port in use must say so, not wait for the first one's lock on
	// the store file and then blame the store.
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return addrInUse("--http", listenAddr, err)
	}
	defer ln.Close() // closed already once served; this is for the early returns
	for i := range sipSpecs {
		if err := sipSpecs[i].listen(); err != nil {
			return err
		}
		defer sipSpecs[i].close() // likewise
	}

	// Fail now, not at the first call, when a provider cannot be built.
	probe, err := pf.probe(ctx, fn, true)
	if err != nil {
		return err
	}
	logger.Info("engines", "agent", *name, "engines", probe.roles.String())

	if listenAddr != *addr {
		logger.Warn("HOLDLINE_TOKEN is not set: serving on 127.0.0.1 only; set it to accept sessions from other machines", "asked", *addr, "listening", listenAddr)
	}
	topts = append(topts, webrtc.WithLogger(logger))
	if *publicIP != "" {
		topts = append(topts, webrtc.WithPublicIPs(*publicIP))
	}
	transport, err := webrtc.NewTransport(topts...)
	if err != nil {
		return err
	}
	newAgent := pf.agentFunc(fn, true)
	// One host for the browser's calls and the phone's: one registry, one
	// cap on the engines, one set of metrics, one HTTP API.
	hopts := []calls.Option{calls.WithLogger(logger), calls.WithSessionOptions(tf.options()...)}
	switch {
	case *maxSessions > 0:
		hopts = append(hopts, calls.WithMaxCalls(*maxSessions))
	default:
		hopts = append(hopts, calls.WithCallCost(probe.callCost()))
	}
	opts := []server.Option{
		server.WithAgentName(*name),
		server.WithTransport(transport),
		server.WithLogger(logger),
		server.WithResumeTTL(*ttl),
		server.WithEchoCancellation(*echo),
	}
	if token != "" {
		opts = append(opts, server.WithToken(token))
	}
	if admin := os.Getenv("HOLDLINE_ADMIN_TOKEN"); admin != "" {
		opts = append(opts, server.WithAdminToken(admin))
	}
	if *metricsAddr != "" {
		opts = append(opts, server.WithSeparateMetrics())
	}
	if *storeSpec == "" {
		*storeSpec = defaultStore(listenAddr)
	}
	st, key, err := openStore(ctx, *storeSpec)
	if err != nil {
		return err
	}
	if st != nil {
		defer st.Close()
		hopts = append(hopts, calls.WithStore(st, *worker, key))
	}
	// Tracing only when the OTEL_* variables ask for it: otherwise no
	// exporter and no provider exist at all.
	exporter, err := tracing.FromEnv(ctx)
	if err != nil {
		return err
	}
	if exporter != nil {
		// Deferred before the host's Close, so run after it: the calls'
		// last spans are ended by then, and flushed here.
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), tracing.ShutdownTimeout)
			defer cancel()
			if err := exporter.Shutdown(sctx); err != nil {
				logger.Warn("tracing: spans not all sent at shutdown", "err", err)
			}
		}()
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { logger.Warn("tracing", "err", err) }))
		tr := tracing.New(exporter.TracerProvider(), tracing.WithContent(*traceContent), tracing.WithLogger(logger))
		hopts = append(hopts, calls.WithObserver(tr.Observer))
	} else if *traceContent {
		logger.Warn("--trace-content: tracing is off (set OTEL_EXPORTER_OTLP_ENDPOINT to turn it on)")
	}
	host, err := calls.New(newAgent, hopts...)
	if err != nil {
		return err
	}
	// Deferred first, run last: the calls are released (their checkpoints
	// stay for another worker) once nothing brings new ones.
	defer host.Close()
	srv, err := server.New(newAgent, append(opts, server.WithHost(host))...)
	if err != nil {
		return err
	}
	defer srv.Close()
	if *maxSessions > 0 {
		logger.Info("admission", "max_sessions", srv.MaxSessions(), "set_by", "--max-sessions")
	} else {
		logger.Info("admission", "max_sessions", srv.MaxSessions(), "cores", goruntime.GOMAXPROCS(0),
			"call_cost", fmt.Sprintf("%.0f%% of a core", 100*probe.callCost()), "set_by", "the engines in use (--max-sessions to change)")
	}

	if len(sipSpecs) > 0 {
		sopts := append([]hsip.Option{hsip.WithHost(host), hsip.WithRedialWindow(*redial), hsip.WithHoldAudio(*holdAudio)}, sipOpts...)
		if *rtpRealtime {
			sopts = append(sopts, hsip.WithRealtimePacing())
		}
		if *sipUser != "" {
			sopts = append(sopts, hsip.WithDigestAuth("holdline", *sipUser, os.Getenv("HOLDLINE_SIP_PASSWORD")))
		}
		// SIP serves on through a drain (a moving call's REFER, the
		// 503s to the proxy's probes); stopSIP ends it.
		stopSIP, err := serveSIP(context.WithoutCancel(ctx), sipSpecs, sipTLS, allow, *rtpTimeout, *name, newAgent, logger, stdout, regs, sopts...)
		if err != nil {
			return err
		}
		defer stopSIP()
	}
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(*metricsAddr, srv, logger)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopMetrics()
	}
	// Carriers' webhooks and media streams: authenticated by the
	// carrier's signature and a one-time stream token, not the API token.
	topt := []carrier.TwilioOption{carrier.WithTwilioLogger(logger),
		carrier.WithTwilioAccount(os.Getenv("TWILIO_ACCOUNT_SID"), os.Getenv("TWILIO_AUTH_TOKEN"))}
	if pu != nil {
		topt = append(topt, carrier.WithPublicURL(pu))
	}
	// One transport for every carrier's streams.
	ctr := carrier.NewTransport(host, carrier.WithLogger(logger))
	twilio := carrier.NewTwilio(ctr, topt...)
	if !twilio.Verifies() {
		logger.Warn("TWILIO_AUTH_TOKEN is not set: Twilio webhooks are not verified (anyone who can reach " + carrier.TwilioVoicePath + " can start a call)")
	}
	telnyxOpts := []carrier.TelnyxOption{carrier.WithTelnyxLogger(logger), carrier.WithTelnyxPublicURL(pu)}
	if telnyxKey != nil {
		telnyxOpts = append(telnyxOpts, carrier.WithTelnyxPublicKey(telnyxKey))
	}
	telnyx := carrier.NewTelnyx(ctr, telnyxOpts...)
	if !telnyx.Verifies() {
		logger.Warn("TELNYX_PUBLIC_KEY is not set: Telnyx webhooks are not verified (anyone who can reach " + carrier.TelnyxVoicePath + " can start a call)")
	}
	plivo := carrier.NewPlivo(ctr, carrier.WithPlivoLogger(logger), carrier.WithPlivoPublicURL(pu),
		carrier.WithPlivoAuthToken(os.Getenv("PLIVO_AUTH_TOKEN")))
	if !plivo.Verifies() {
		logger.Warn("PLIVO_AUTH_TOKEN is not set: Plivo webhooks are not verified (anyone who can reach " + carrier.PlivoVoicePath + " can start a call)")
	}
	root := http.NewServeMux()
	root.Handle(carrier.TwilioVoicePath, twilio)
	root.Handle(carrier.TwilioStreamPath, twilio)
	root.Handle(carrier.TelnyxVoicePath, telnyx)
	root.Handle(carrier.TelnyxStreamPath, telnyx)
	root.Handle(carrier.PlivoVoicePath, plivo)
	root.Handle(carrier.PlivoStreamPath, plivo)
	root.Handle("/", srv)
	hs := &http.Server{Handler: root, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "Holdline is serving the %s agent at %s\n", *name, browseURL(ln.Addr()))
	pf.printEngines(stdout, probe.roles)
	printTracing(stdout, exporter, *traceContent)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	_, shared := st.(*store.Redis)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	case <-c.drain.take():
		drainServe(ctx, host, logger, *drainTimeout, *moveCalls && shared)
	case <-host.DrainRequested():
		drainServe(ctx, host, logger, *drainTimeout, *moveCalls && shared)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Event streams never finish on their own: ending the calls ends them.
	host.Close()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// drainServe drains the host: no new calls; with moves, calls move to
// other workers at clean points; the rest end, or are released at the
// timeout. ctx ending (a second signal) cuts it short.
func drainServe(ctx context.Context, host *calls.Host, logger *slog.Logger, timeout time.Duration, moves bool) {
	host.BeginDrain()
	logger.Info("draining: no new calls; a second SIGTERM or Ctrl-C stops at once", "calls", host.Len(), "timeout", timeout, "moving_calls", moves)
	rep, err := host.Drain(ctx, calls.WithDrainTimeout(timeout), calls.WithMoves(moves))
	if err != nil {
		logger.Warn("drain cut short: releasing the calls left", "calls", host.Len(), "err", err)
		return
	}
	logger.Info("drained: exiting", "calls", rep.Calls, "moved", rep.Moved, "released", rep.Released, "took", rep.Took.Round(time.Millisecond))
}

// printTracing says whether spans are exported, and where: the endpoint
// without its credentials; the headers (which hold them) never.
func printTracing(w io.Writer, x *tracing.Exporter, content bool) {
	if x == nil {
		fmt.Fprintln(w, "Tracing is off (set OTEL_EXPORTER_OTLP_ENDPOINT to export OpenTelemetry traces)")
		return
	}
	what := "without what was said"
	if content {
		what = "with what was said (--trace-content)"
	}
	fmt.Fprintf(w, "Tracing is on: spans %s go to %s (OTLP/HTTP)\n", what, x.Endpoint())
}

// serveAddress is where serve listens: addr, or its port on 127.0.0.1 when
// no token guards session creation.
func serveAddress(addr string, haveToken bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--http %q: %w", addr, err)
	}
	if haveToken {
		return addr, nil
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return addr, nil
	}
	return net.JoinHostPort("127.0.0.1", port), nil
}

func browseURL(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return "http://" + a.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// serveMetrics serves srv's metrics at addr, unauthenticated, until the
// returned stop is called.
func serveMetrics(addr string, srv *server.Server, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", srv.MetricsHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("metrics served without a token on their own listener", "url", "http://"+ln.Addr().String()+"/metrics")
	if host, _, _ := net.SplitHostPort(addr); !isPrivateHost(host) {
		logger.Warn("--metrics listens on a public or unspecified address: anyone who reaches it reads the metrics", "addr", addr)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	return func() {
		hs.Close()
		<-done
	}, nil
}

// isPrivateHost says whether host is a loopback or private address (or
// localhost): where an unauthenticated listener is meant to be.
func isPrivateHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && (ip.IsLoopback() || ip.IsPrivate())
}

func portRange(flag, s string) (uint16, uint16, error) {
	lo, hi, ok := strings.Cut(s, "-")
	a, err1 := strconv.ParseUint(lo, 10, 16)
	b, err2 := strconv.ParseUint(hi, 10, 16)
	if !ok || err1 != nil || err2 != nil || a == 0 || b < a {
		return 0, 0, fmt.Errorf("%s %q: want MIN-MAX, e.g. 50000-50100", flag, s)
	}
	return uint16(a), uint16(b), nil
}

// sipListen is one of --sip's listeners: its transport ("udp", "tcp",
// "tls") and address, and once listening its socket.
type sipListen struct {
	network, addr string
	pc            net.PacketConn // udp
	ln            net.Listener   // tcp, tls
}

// parseSIPListeners reads --sip: "udp:ADDR,tcp:ADDR,tls:ADDR", each
// transport at most once.
func parseSIPListeners(spec string) ([]sipListen, error) {
	var out []sipListen
	seen := map[string]bool{}
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		network, addr, ok := strings.Cut(f, ":")
		switch {
		case !ok || (network != "udp" && network != "tcp" && network != "tls"):
			return nil, fmt.Errorf("--sip %q: want udp:HOST:PORT, tcp:HOST:PORT or tls:HOST:PORT, comma-separated", f)
		case seen[network]:
			return nil, fmt.Errorf("--sip %q: one %s listener at most", spec, network)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--sip %q: %w", f, err)
		}
		seen[network] = true
		out = append(out, sipListen{network: network, addr: addr})
	}
	return out, nil
}

// sipTLSConfig loads --sip-cert and --sip-key for a tls: listener: both
// are needed with one, and neither makes sense without.
func sipTLSConfig(specs []sipListen, cert, key string) (*tls.Config, error) {
	wantTLS := slices.ContainsFunc(specs, func(l sipListen) bool { return l.network == "tls" })
	switch {
	case !wantTLS && (cert != "" || key != ""):
		return nil, errors.New("--sip-cert/--sip-key: no tls: listener in --sip to use them")
	case !wantTLS:
		return nil, nil
	case cert == "":
		return nil, errors.New("--sip tls:...: give its certificate with --sip-cert FILE (PEM)")
	case key == "":
		return nil, errors.New("--sip tls:...: give the certificate's private key with --sip-key FILE (PEM)")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("--sip-cert %s / --sip-key %s: %w", cert, key, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// listen opens l's socket.
func (l *sipListen) listen() error {
	var err error
	if l.network == "udp" {
		l.pc, err = net.ListenPacket("udp", l.addr)
	} else {
		l.ln, err = net.Listen("tcp", l.addr)
	}
	if err != nil {
		return addrInUse("--sip", l.network+":"+l.addr, err)
	}
	return nil
}

func (l *sipListen) close() {
	if l.pc != nil {
		l.pc.Close()
	}
	if l.ln != nil {
		l.ln.Close()
	}
}

func (l *sipListen) localAddr() net.Addr {
	if l.pc != nil {
		return l.pc.LocalAddr()
	}
	return l.ln.Addr()
}

func parseAllow(allow string) ([]netip.Prefix, error) {
	if allow == "" {
		return nil, nil
	}
	var out []netip.Prefix
	for _, f := range strings.Split(allow, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--sip-allow: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// addrInUse is the error for a listen on addr, given with flag, that
// failed: when the address is taken it says so, and that it may be another
// holdline.
func addrInUse(flag, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s: the address is in use: another holdline serve may be running there (or another program); stop it or give %s another port: %w", flag, addr, flag, err)
	}
	return fmt.Errorf("%s %s: %w", flag, addr, err)
}

// serveSIP answers phone calls on listeners with the agent, until ctx
// ends or the returned stop is called.
func serveSIP(ctx context.Context, listeners []sipListen, tlsCfg *tls.Config, allow []netip.Prefix, rtpTimeout time.Duration, name string, newAgent hsip.AgentFunc, logger *slog.Logger, stdout io.Writer, regs sipRegs, extra ...hsip.Option) (stop func(), err error) {
	opts := append([]hsip.Option{hsip.WithLogger(logger), hsip.WithRTPTimeout(rtpTimeout)}, extra...)
	for _, p := range allow {
		opts = append(opts, hsip.WithAllow(p))
	}
	srv, err := hsip.New(newAgent, opts...)
	if err != nil {
		return nil, err
	}
	for _, l := range listeners {
		uri := "sip:agent@" + l.localAddr().String()
		switch l.network {
		case "tcp":
			uri += ";transport=tcp"
		case "tls":
			uri = "sips:agent@" + l.localAddr().String()
		}
		fmt.Fprintf(stdout, "Holdline is answering phone calls for the %s agent at %s (%s)\n", name, uri, strings.ToUpper(l.network))
	}
	stop = serveSIPListeners(ctx, srv, listeners, tlsCfg, logger)
	// The registrations end with srv's Close (or ctx), un-REGISTERing
	// before the listeners close.
	for _, aor := range regs.aors {
		if _, err := srv.Register(ctx, aor, regs.opts...); err != nil {
			stop()
			return nil, fmt.Errorf("--sip-register %s: %w", aor, err)
		}
		fmt.Fprintf(stdout, "Holdline is registering as %s, to answer the calls its registrar sends\n", aor)
	}
	return stop, nil
}

// serveSIPListeners serves SIP with srv on listeners until ctx ends or
// the returned stop is called, which closes srv.
func serveSIPListeners(ctx context.Context, srv *hsip.Server, listeners []sipListen, tlsCfg *tls.Config, logger *slog.Logger) (stop func()) {
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() {
			switch l.network {
			case "udp":
				done <- srv.ServeUDP(sctx, l.pc)
			case "tcp":
				done <- srv.ServeTCP(sctx, l.ln)
			case "tls":
				done <- srv.ServeTLS(sctx, l.ln, tlsCfg)
			}
		}()
	}
	return func() {
		srv.Close()
		cancel()
		for range listeners {
			if err := <-done; err != nil {
				logger.Error("SIP server", "err", err)
			}
		}
	}
}

// stringList collects a repeated flag's values.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// sipRegs are --sip-register's AORs and the options they register with.
type sipRegs struct {
	aors []string
	opts []hsip.RegisterOption
}

// sipRegistrations checks --sip-register and --sip-register-expires: a
// registration needs --sip (calls over UDP come to its listener) and the
// password; the AOR itself is checked when it starts.
func sipRegistrations(aors []string, serving bool, expires time.Duration, password string) (sipRegs, error) {
	if len(aors) == 0 {
		return sipRegs{}, nil
	}
	switch {
	case !serving:
		return sipRegs{}, fmt.Errorf("--sip-register %s: needs --sip (e.g. --sip udp:0.0.0.0:5060): the calls come to its listeners or over the registration's connection", aors[0])
	case password == "":
		return sipRegs{}, fmt.Errorf("--sip-register %s: set HOLDLINE_SIP_PASSWORD to its password", aors[0])
	case expires < time.Second:
		return sipRegs{}, fmt.Errorf("--sip-register-expires %v: want a second or more", expires)
	}
	for _, a := range aors {
		if !strings.HasPrefix(a, "sip:") && !strings.HasPrefix(a, "sips:") || !strings.Contains(a, "@") {
			return sipRegs{}, fmt.Errorf("--sip-register %q: want sip:USER@REGISTRAR[:PORT][;transport=udp|tcp|tls] or sips:USER@REGISTRAR", a)
		}
	}
	return sipRegs{aors: aors, opts: []hsip.RegisterOption{hsip.WithRegisterPassword(password), hsip.WithRegisterExpires(expires)}}, nil
}
