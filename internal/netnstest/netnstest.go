package netnstest

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/need"
)

// Net is a bridge and the namespaces attached to it.
type Net struct {
	tb     testing.TB
	id     string // unique to this run: in every name
	hub    string // the namespace holding the bridge
	prefix netip.Prefix

	mu    sync.Mutex
	nodes []*Node
	procs []*Proc
	owned bool // New made the namespaces: teardown deletes them
}

// Node is a namespace on the bridge with its own address.
type Node struct {
	Name  string     // the namespace's name (ip netns)
	Addr  netip.Addr // its address on the bridge
	net   *Net
	short string // the name Add was given
}

// New makes the bridge's namespace, torn down with everything on it when
// tb ends.
func New(tb testing.TB) *Net {
	tb.Helper()
	if os.Geteuid() != 0 {
		// Not a broken install: make test runs as any user, and only root
		// can make namespaces. Where root cannot, that is a failure there.
		tb.Skip("network namespaces need root (run as root: sudo make test-cluster)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		need.Missing(tb, "ip (iproute2) is missing")
	}
	// The bridge is private to this run; the /24 differs per run anyway, so
	// that two runs' addresses never look alike in logs or captures.
	pid := os.Getpid()
	prefix := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, byte(pid % 250), 0}), 24)
	n := &Net{tb: tb, id: fmt.Sprintf("hl%d", pid%100000), prefix: prefix, owned: true}
	n.hub = n.id + "-hub"
	if err := n.ip("netns", "add", n.hub); err != nil {
		need.Missingf(tb, "cannot make a network namespace: %v", err)
	}
	tb.Cleanup(n.teardown)
	for _, args := range [][]string{
		{"-n", n.hub, "link", "set", "lo", "up"},
		{"-n", n.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", n.hub, "link", "set", "br0", "up"},
	} {
		if err := n.ip(args...); err != nil {
			tb.Fatal(err)
		}
	}
	return n
}

// Add makes a namespace on the bridge, with the next address.
func (n *Net) Add(name string) *Node {
	n.tb.Helper()
	n.mu.Lock()
	i := len(n.nodes) + 1
	n.mu.Unlock()
	a := n.prefix.Addr().As4()
	a[3] = byte(i)
	nd := &Node{Name: n.id + "-" + name, Addr: netip.AddrFrom4(a), net: n, short: name}
	hubEnd := fmt.Sprintf("v%s%d", n.id, i)
	if len(hubEnd) > 15 {
		hubEnd = hubEnd[len(hubEnd)-15:]
	}
	if err := n.ip("netns", "add", nd.Name); err != nil {
		n.tb.Fatal(err)
	}
	n.mu.Lock()
	n.nodes = append(n.nodes, nd)
	n.mu.Unlock()
	for _, args := range [][]string{
		{"-n", nd.Name, "link", "set", "lo", "up"},
		{"-n", nd.Name, "link", "add", "eth0", "type", "veth", "peer", "name", hubEnd, "netns", n.hub},
		{"-n", nd.Name, "addr", "add", fmt.Sprintf("%s/%d", nd.Addr, n.prefix.Bits()), "dev", "eth0"},
		{"-n", nd.Name, "link", "set", "eth0", "up"},
		{"-n", n.hub, "link", "set", hubEnd, "master", "br0"},
		{"-n", n.hub, "link", "set", hubEnd, "up"},
	} {
		if err := n.ip(args...); err != nil {
			n.tb.Fatal(err)
		}
	}
	return nd
}

// Command returns cmd to run in the node's namespace, in a process group
// of its own (so that Kill ends what it starts too).
func (nd *Node) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", nd.Name, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// Proc is a process started in a namespace.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts cmd (made by Command) and kills its process group when the
// test ends, if it has not ended by then. The Proc waits for it.
func (nd *Node) Start(cmd *exec.Cmd) (*Proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	nd.net.mu.Lock()
	nd.net.procs = append(nd.net.procs, p)
	nd.net.mu.Unlock()
	return p, nil
}

// Done is closed once the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process ended (cmd.Wait's error), once Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// ExitCode is the process's exit status once it has ended (-1 if it was
// killed by a signal).
func (p *Proc) ExitCode() int {
	<-p.done
	return p.Cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process's group: ip netns exec and what it ran.
func (p *Proc) Signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return syscall.Kill(-p.Cmd.Process.Pid, sig)
}

// EnvVar carries a Net's namespaces to a child process (Env, FromEnv).
const EnvVar = "HOLDLINE_NETNS"

// Env is the EnvVar=... entry that gives a process started in one of the
// namespaces (a test binary run again there) the others: FromEnv.
func (n *Net) Env() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	parts := make([]string, 0, len(n.nodes))
	for _, nd := range n.nodes {
		parts = append(parts, strings.TrimPrefix(nd.Name, n.id+"-")+"="+nd.Name+"="+nd.Addr.String())
	}
	return EnvVar + "=" + strings.Join(parts, ",")
}

// FromEnv returns the Net a parent passed with Env, for a test running in
// one of its namespaces, or nil when there is none. Processes it starts
// are killed when tb ends; the namespaces are the parent's to delete.
func FromEnv(tb testing.TB) *Net {
	v := os.Getenv(EnvVar)
	if v == "" {
		return nil
	}
	n := &Net{tb: tb}
	for _, part := range strings.Split(v, ",") {
		f := strings.Split(part, "=")
		if len(f) != 3 {
			tb.Fatalf("%s: bad entry %q", EnvVar, part)
		}
		addr, err := netip.ParseAddr(f[2])
		if err != nil {
			tb.Fatalf("%s: %v", EnvVar, err)
		}
		n.nodes = append(n.nodes, &Node{Name: f[1], Addr: addr, net: n, short: f[0]})
	}
	tb.Cleanup(n.teardown)
	return n
}

// Node returns the node Add named name.
func (n *Net) Node(name string) *Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, nd := range n.nodes {
		if nd.short == name {
			return nd
		}
	}
	n.tb.Fatalf("no namespace %q", name)
	return nil
}

func (n *Net) ip(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// teardown kills what was started, then deletes the namespaces (their
// veths go with them).
func (n *Net) teardown() {
	n.mu.Lock()
	procs, nodes := n.procs, n.nodes
	n.mu.Unlock()
	for _, p := range procs {
		_ = p.Signal(syscall.SIGCONT) // a stopped process takes SIGKILL, but its group's others may need waking
		_ = p.Signal(syscall.SIGKILL)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			n.tb.Logf("%s did not end after SIGKILL", p.Cmd.Path)
		}
	}
	if !n.owned {
		return
	}
	// Whatever a child started in the namespaces goes too.
	for _, nd := range nodes {
		out, _ := exec.Command("ip", "netns", "pids", nd.Name).Output()
		for _, f := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for _, nd := range nodes {
		_ = n.ip("netns", "del", nd.Name)
	}
	_ = n.ip("netns", "del", n.hub)
}
