package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const redisAbsent = "redis-server is not on PATH: apt-get install redis-server (make test installs it)"

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testRedis.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "store: stopping redis-server:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// testRedis is the redis-server this test binary starts for its tests,
// on first use, and stops in TestMain.
var testRedis redisServer

type redisServer struct {
	once   sync.Once
	url    string
	err    error
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	dir    string
}

// redisURL returns the URL of the test redis-server, starting it if need
// be. Without redis-server the test is skipped, or fails under
// HOLDLINE_REQUIRE_MODELS=1 (as under "make test", which installs it).
func redisURL(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("HOLDLINE_REQUIRE_MODELS") == "1" {
			tb.Fatal(redisAbsent)
		}
		tb.Skip(redisAbsent)
	}
	testRedis.once.Do(func() { testRedis.err = testRedis.start(path) })
	if testRedis.err != nil {
		tb.Fatal(testRedis.err)
	}
	return testRedis.url
}

var prefixes atomic.Int64

// openTestRedis opens a Redis store on the test server under a prefix of
// its own, so that tests do not see each other's keys.
func openTestRedis(tb testing.TB) *Redis {
	tb.Helper()
	url := redisURL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := OpenRedis(ctx, url, WithPrefix(fmt.Sprintf("test%d:", prefixes.Add(1))))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// start runs redis-server on a free port, without persistence, and waits
// until it answers PING. A port taken between choosing and binding it
// makes it try another.
func (r *redisServer) start(path string) error {
	dir, err := os.MkdirTemp("", "holdline-redis-")
	if err != nil {
		return err
	}
	r.dir = dir
	for attempt := 0; ; attempt++ {
		err := r.startOnce(path)
		if err == nil || attempt == 2 {
			return err
		}
	}
}

func (r *redisServer) startOnce(path string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	logfile := filepath.Join(r.dir, "redis.log")
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--logfile", logfile)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait() // its status tells nothing a stopped server does not
		close(exited)
	}()
	r.cmd, r.exited = cmd, exited
	r.url = fmt.Sprintf("redis://127.0.0.1:%d/0", port)

	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port),
		DialTimeout: time.Second, MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logfile)
			r.cmd = nil
			return fmt.Errorf("redis-server exited before answering: %s", strings.TrimSpace(string(log)))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("redis-server on port %d did not answer PING within 10s: %w", port, err), r.stopProcess())
		}
	}
}

// stop ends the server started and removes its directory.
func (r *redisServer) stop() error {
	err := r.stopProcess()
	if r.dir != "" {
		err = errors.Join(err, os.RemoveAll(r.dir))
	}
	return err
}

// stopProcess ends the server started, by its PID, and waits for it.
func (r *redisServer) stopProcess() error {
	var err error
	if r.cmd != nil {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			r.cmd.Process.Kill()
			select {
			case <-r.exited:
			case <-time.After(5 * time.Second):
				err = fmt.Errorf("redis-server (pid %d) did not exit", r.cmd.Process.Pid)
			}
		}
		r.cmd = nil
	}
	return err
}

// freePort returns a TCP port nothing listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func TestOpenRedisNamesUnansweringAddress(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	_, err = OpenRedis(ctx, "redis://"+addr)
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("OpenRedis of a closed port: error %v, want one naming %s", err, addr)
	}
}

func TestOpenRedisErrorHidesPassword(t *testing.T) {
	for _, url := range []string{
		"redis://user:hunter2@127.0.0.1:bad/0",
		"redis://user:hunter2@127.0.0.1:6379/notadb",
		"redis://user:hunter2@127.0.0.1:1/0", // nothing listens on port 1
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := OpenRedis(ctx, url)
		cancel()
		if err == nil {
			t.Fatalf("OpenRedis(%s) succeeded", url)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenRedis error shows the password: %v", err)
		}
	}
}

func TestRedisPrefixesSeparateStores(t *testing.T) {
	ctx := context.Background()
	a, b := openTestRedis(t), openTestRedis(t)
	l := acquire(t, a, "s1", "a", longTTL)
	if err := a.Save(ctx, l, []byte("a's")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(ctx, "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load under another prefix = %v, want ErrNotFound", err)
	}
	acquire(t, b, "s1", "b", longTTL) // the lease is a's under a's prefix only
}

func TestRedisStoresKeysUnderPrefix(t *testing.T) {
	ctx := context.Background()
	url := redisURL(t)
	s, err := OpenRedis(ctx, url, WithPrefix("custom-prefix:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := acquire(t, s, "s1", "a", longTTL)
	if err := s.Save(ctx, l, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAlias(ctx, "resume-1", "s1", longTTL); err != nil {
		t.Fatal(err)
	}
	keys, err := s.client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var mine int
	for _, k := range keys {
		if strings.HasPrefix(k, "custom-prefix:") {
			mine++
		}
	}
	// The lease, the token counter, the checkpoint and the alias.
	if mine != 4 {
		t.Fatalf("%d keys under the prefix among %q, want 4", mine, keys)
	}
	if err := s.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeAlias(ctx, "resume-1"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.client.Exists(ctx, s.key("s1", "lease"), s.key("s1", "checkpoint")).Result(); err != nil || n != 0 {
		t.Fatalf("%d of lease and checkpoint left after Release and Delete (%v), want 0", n, err)
	}
}
