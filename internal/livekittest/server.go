// Package livekittest runs a real livekit-server on 127.0.0.1 for tests
// and the bench, and joins its rooms as a caller.
//
// Nothing it starts sends a packet off the machine: the server listens on
// 127.0.0.1 only, offers loopback candidates only, and hands its clients
// a STUN server that is a silent loopback socket (without one it would
// hand them public STUN servers).
package livekittest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/livekit/protocol/auth"
	lkproto "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"
)

const (
	// Version is the livekit-server built: later versions replace pion
	// with forks the module proxy does not serve (docs: DESIGN §9).
	Version = "v1.8.4"
	// APIKey and APISecret are the key pair a server has unless WithKey
	// says otherwise (livekit-server wants a secret of 32 characters or
	// more).
	APIKey    = "holdlinetest"
	APISecret = "holdline-test-secret-0123456789abcdef"
	// StartTimeout bounds the wait for a started server to answer.
	StartTimeout = 60 * time.Second
	// StopGrace is how long a process group has to exit on SIGTERM before
	// it is killed: livekit-server (and rtc-node) take several seconds.
	StopGrace = 5 * time.Second
)

// BinaryPath is where Binary keeps livekit-server: the user's cache
// directory, holdline/livekit-server-<Version>/livekit-server. The
// Makefile builds the same path.
func BinaryPath() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("livekittest: where to keep livekit-server: %w", err)
	}
	return filepath.Join(cache, "holdline", "livekit-server-"+Version, "livekit-server"), nil
}

// binaryMu keeps the builds of one process to one at a time; builds in
// different processes each write a file of their own and rename it.
var binaryMu sync.Mutex

// Binary returns livekit-server, built from its Go module into BinaryPath
// the first time (about two minutes with the module cache empty; log
// hears that it is building).
func Binary(ctx context.Context, log io.Writer) (string, error) {
	bin, err := BinaryPath()
	if err != nil {
		return "", err
	}
	binaryMu.Lock()
	defer binaryMu.Unlock()
	if fi, err := os.Stat(bin); err == nil && fi.Mode()&0o111 != 0 {
		return bin, nil
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("livekittest: livekit-server %s is built from its Go module, and there is no go on PATH: %w", Version, err)
	}
	dir := filepath.Dir(bin)
	fmt.Fprintf(log, "building livekit-server %s into %s (once; a few minutes)\n", Version, dir)
	tmp, err := os.MkdirTemp("", "holdline-livekit-server-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	goCmd := func(dir string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		// The module's own go.mod and go.sum, whatever workspace is
		// around.
		cmd.Env = append(os.Environ(), "GOWORK=off")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(errb.Bytes()))
		}
		return out, nil
	}
	out, err := goCmd(tmp, "mod", "download", "-json", "github.com/livekit/livekit-server@"+Version)
	if err != nil {
		return "", fmt.Errorf("livekittest: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("livekittest: go mod download said %q", out)
	}
	// The module cache is read-only, and the build writes go.sum entries.
	src := filepath.Join(tmp, "src")
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		return "", fmt.Errorf("livekittest: copying livekit-server's module: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// A name of this build's own: another process may be building too.
	out1 := filepath.Join(dir, fmt.Sprintf(".livekit-server.%d.tmp", os.Getpid()))
	defer os.Remove(out1)
	if _, err := goCmd(src, "build", "-o", out1, "./cmd/server"); err != nil {
		return "", fmt.Errorf("livekittest: building livekit-server: %w", err)
	}
	if err := os.Rename(out1, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// FreePort is a port on 127.0.0.1 nothing listens on now, for network
// ("tcp" or "udp").
func FreePort(network string) (int, error) {
	if network == "udp" {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer pc.Close()
		return pc.LocalAddr().(*net.UDPAddr).Port, nil
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Process is a child started in a process group of its own, so that what
// it starts in turn (rtc-node's job processes) stops with it.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	done chan struct{} // closed once it has exited
	once sync.Once
}

// StartProcess starts cmd in a new process group; name is for errors.
func StartProcess(name string, cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		_ = cmd.Wait()
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop ends the process group by its id: SIGTERM, then SIGKILL past
// StopGrace. It returns once the leader has exited; later calls do
// nothing.
func (p *Process) Stop() {
	p.once.Do(func() {
		pgid := p.Cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(StopGrace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
		// The group may outlive its leader.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
}

// Kill kills the process group at once and waits for the leader.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Server is livekit-server on 127.0.0.1.
type Server struct {
	URL       string // ws://127.0.0.1:port, for rooms and agent workers
	HTTPURL   string // http://127.0.0.1:port, for the server API
	APIKey    string
	APISecret string

	proc     *Process
	bin      string
	confPath string
	logs     io.Writer
	// stun is the STUN server the server hands its clients: a loopback
	// socket that never answers. Without one it hands them public STUN
	// servers, and pion and libwebrtc would send packets off the machine.
	stun net.PacketConn
	log  *syncBuffer // what it wrote, when StartT started it
}

// Log is what the server has written so far, when StartT started it (""
// otherwise): tests read the server's side of things there (WithLogLevel
// says how much it writes).
func (s *Server) Log() string {
	if s.log == nil {
		return ""
	}
	return s.log.String()
}

// Option configures a Server.
type Option func(*config)

type config struct {
	key, secret string
	extra       map[string]string
	logLevel    string
}

// WithKey gives the server key and secret instead of APIKey and APISecret
// (a secret of 32 characters or more).
func WithKey(key, secret string) Option {
	return func(c *config) { c.key, c.secret = key, secret }
}

// WithExtraKey adds a key pair the server accepts besides its own.
func WithExtraKey(key, secret string) Option {
	return func(c *config) { c.extra[key] = secret }
}

// WithLogLevel sets livekit-server's log level (debug, info, warn, error;
// warn unless said).
func WithLogLevel(level string) Option {
	return func(c *config) { c.logLevel = level }
}

// Start starts bin on free loopback ports with its configuration in
// workDir, its output to logs, and returns once its API answers.
func Start(ctx context.Context, bin, workDir string, logs io.Writer, opts ...Option) (_ *Server, err error) {
	c := config{key: APIKey, secret: APISecret, extra: map[string]string{}, logLevel: "warn"}
	for _, o := range opts {
		o(&c)
	}
	if logs == nil {
		logs = io.Discard
	}
	port, err := FreePort("tcp")
	if err != nil {
		return nil, err
	}
	rtcPort, err := FreePort("udp")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL: fmt.Sprintf("ws://127.0.0.1:%d", port), HTTPURL: fmt.Sprintf("http://127.0.0.1:%d", port),
		APIKey: c.key, APISecret: c.secret,
	}
	s.stun, err = net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	keys := fmt.Sprintf("  %s: %s\n", c.key, c.secret)
	for k, v := range c.extra {
		keys += fmt.Sprintf("  %s: %s\n", k, v)
	}
	// Everything on 127.0.0.1: the API, one UDP port for media, no TCP
	// media port (it would listen on every interface), no external IP
	// discovery, no TURN, loopback candidates only.
	conf := fmt.Sprintf(`port: %d
bind_addresses: ["127.0.0.1"]
rtc:
  udp_port: %d
  tcp_port: 0
  node_ip: 127.0.0.1
  use_external_ip: false
  enable_loopback_candidate: true
  interfaces:
    includes: ["lo"]
  ips:
    includes: ["127.0.0.1/32"]
  stun_servers: ["%s"]
turn:
  enabled: false
keys:
%slogging:
  level: %s
`, port, rtcPort, s.stun.LocalAddr(), keys, c.logLevel)
	confPath := filepath.Join(workDir, "livekit.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	s.bin, s.confPath, s.logs = bin, confPath, logs
	if err := s.launch(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// launch starts the server's process and returns once its API answers.
func (s *Server) launch(ctx context.Context) error {
	cmd := exec.Command(s.bin, "--config", s.confPath)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	proc, err := StartProcess("livekit-server", cmd)
	if err != nil {
		return fmt.Errorf("livekittest: %w", err)
	}
	s.proc = proc
	// Ready when its HTTP port answers.
	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.HTTPURL+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("livekittest: livekit-server exited at start (%v); its log says why", proc.Cmd.ProcessState)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("livekittest: livekit-server did not answer on %s within %v", s.HTTPURL, StartTimeout)
		case <-tick.C:
		}
	}
}

// Kill kills the server's process group at once, as a crash or a lost
// machine would end it: its rooms are gone.
func (s *Server) Kill() {
	if s.proc != nil {
		s.proc.Kill()
	}
}

// Restart starts the server again after Kill or Stop, on the same ports
// with the same keys, with no rooms.
func (s *Server) Restart(ctx context.Context) error {
	if s.proc != nil {
		select {
		case <-s.proc.Done():
		default:
			return errors.New("livekittest: Restart while the server runs")
		}
	}
	return s.launch(ctx)
}

// Stop stops the server's process group (SIGTERM, SIGKILL after
// StopGrace) and closes its STUN socket.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop()
	}
	if s.stun != nil {
		s.stun.Close()
	}
}

// Done is closed once the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.proc.Done() }

// PID is the server process's ID, which is also its process group's (a
// Restart changes it).
func (s *Server) PID() int { return s.proc.Cmd.Process.Pid }

// Token is a join token for identity in room, with the server's key.
func (s *Server) Token(room, identity string) (string, error) {
	at := auth.NewAccessToken(s.APIKey, s.APISecret).SetIdentity(identity).
		SetVideoGrant(&auth.VideoGrant{RoomJoin: true, Room: room}).SetValidFor(time.Hour)
	return at.ToJWT()
}

// Dispatch dispatches the agent registered as agentName to room, with
// metadata for the job. The server creates the room if it does not exist
// (and a room's creation also dispatches the workers registered without a
// name).
func (s *Server) Dispatch(ctx context.Context, room, agentName, metadata string) error {
	d := lksdk.NewAgentDispatchServiceClient(s.HTTPURL, s.APIKey, s.APISecret)
	if _, err := d.CreateDispatch(ctx, &lkproto.CreateAgentDispatchRequest{AgentName: agentName, Room: room, Metadata: metadata}); err != nil {
		return fmt.Errorf("livekittest: dispatching %q to room %s: %w", agentName, room, err)
	}
	return nil
}

// CreateRoom creates room; a room that exists already is no error.
func (s *Server) CreateRoom(ctx context.Context, room string) error {
	rc := lksdk.NewRoomServiceClient(s.HTTPURL, s.APIKey, s.APISecret)
	if _, err := rc.CreateRoom(ctx, &lkproto.CreateRoomRequest{Name: room}); err != nil {
		return fmt.Errorf("livekittest: creating room %s: %w", room, err)
	}
	return nil
}

// DeleteRoom deletes room, which ends its participants' sessions and its
// agents' jobs.
func (s *Server) DeleteRoom(ctx context.Context, room string) error {
	rc := lksdk.NewRoomServiceClient(s.HTTPURL, s.APIKey, s.APISecret)
	if _, err := rc.DeleteRoom(ctx, &lkproto.DeleteRoomRequest{Room: room}); err != nil {
		return fmt.Errorf("livekittest: deleting room %s: %w", room, err)
	}
	return nil
}

// Participants lists the participants in room now.
func (s *Server) Participants(ctx context.Context, room string) ([]*lkproto.ParticipantInfo, error) {
	rc := lksdk.NewRoomServiceClient(s.HTTPURL, s.APIKey, s.APISecret)
	res, err := rc.ListParticipants(ctx, &lkproto.ListParticipantsRequest{Room: room})
	if err != nil {
		return nil, fmt.Errorf("livekittest: listing room %s: %w", room, err)
	}
	return res.Participants, nil
}

// Dispatches lists the agent dispatches of room.
func (s *Server) Dispatches(ctx context.Context, room string) ([]*lkproto.AgentDispatch, error) {
	d := lksdk.NewAgentDispatchServiceClient(s.HTTPURL, s.APIKey, s.APISecret)
	res, err := d.ListDispatch(ctx, &lkproto.ListAgentDispatchRequest{Room: room})
	if err != nil {
		return nil, fmt.Errorf("livekittest: listing the dispatches of room %s: %w", room, err)
	}
	return res.AgentDispatches, nil
}
