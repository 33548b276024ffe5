// Package redistest runs a real redis-server for tests: on a free port of
// 127.0.0.1, without persistence, stopped by its PID.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/internal/need"
	"github.com/redis/go-redis/v9"
)

// Absent is what a test says when redis-server is not installed.
const Absent = "redis-server is not on PATH: apt-get install redis-server (make test installs it)"

// Path returns redis-server's path. Without it the test is skipped, or
// fails under HOLDLINE_REQUIRE_MODELS=1 (as under "make test", which
// installs it).
func Path(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		need.Missing(tb, Absent)
	}
	return path
}

// Start runs a server for tb and stops it when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := StartAt(Path(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// Server is a running redis-server.
type Server struct {
	Addr   string // host:port
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	dir    string
}

// URL is the server's address as a store URL.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// StartAt runs the redis-server at path on a free port and waits until it
// answers PING. A port taken between choosing and binding it makes it try
// another.
func StartAt(path string) (*Server, error) {
	dir, err := os.MkdirTemp("", "holdline-redis-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	for attempt := 0; ; attempt++ {
		err := s.startOnce(path)
		if err == nil {
			return s, nil
		}
		if attempt == 2 {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
	}
}

func (s *Server) startOnce(path string) error {
	port, err := freeport.TCP()
	if err != nil {
		return err
	}
	logfile := filepath.Join(s.dir, "redis.log")
	cmd := exec.Command(path, "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", logfile)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait() // its status tells nothing a stopped server does not
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	s.Addr = fmt.Sprintf("127.0.0.1:%d", port)

	client := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, MaxRetries: -1})
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
			s.cmd = nil
			return fmt.Errorf("redis-server exited before answering: %s", strings.TrimSpace(string(log)))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("redis-server on port %d did not answer PING within 10s: %w", port, err), s.stopProcess())
		}
	}
}

// Stop ends the server, by its PID, and removes its directory.
func (s *Server) Stop() error {
	err := s.stopProcess()
	if s.dir != "" {
		err = errors.Join(err, os.RemoveAll(s.dir))
	}
	return err
}

func (s *Server) stopProcess() error {
	var err error
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill()
			select {
			case <-s.exited:
			case <-time.After(5 * time.Second):
				err = fmt.Errorf("redis-server (pid %d) did not exit", s.cmd.Process.Pid)
			}
		}
		s.cmd = nil
	}
	return err
}
