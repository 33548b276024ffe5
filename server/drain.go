package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/holdline/holdline/calls"
)

// drainRetryAfter is the Retry-After of a draining server's refusals, in
// seconds: a front door sends the request to another worker at once; a
// client without one tries again after it.
const drainRetryAfter = "2"

// moveGrace is how long a moved call's old connection stays open after
// the move message: long enough for the message to arrive and the client
// to re-offer, short enough that nothing waits on it.
const moveGrace = 3 * time.Second

// WithAdminToken enables the operators' routes (POST /v1/admin/drain),
// which take this bearer token and no other. Without it they answer 404.
func WithAdminToken(token string) Option {
	return func(c *config) error { c.adminToken = token; return nil }
}

// ready answers /readyz: 200 while the server takes new sessions, 503
// once it drains, so that a load balancer's health check stops sending it
// new calls (/healthz stays 200: the process is alive and its calls go
// on).
func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if st := s.host.DrainState(); st != calls.Serving || s.host.Closed() {
		w.Header().Set("Retry-After", drainRetryAfter)
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "draining\n")
		return
	}
	io.WriteString(w, "ready\n")
}

// adminDrain starts the drain an operator asks for: the server stops
// taking sessions at once; the process that runs it (serve) moves or
// waits out its calls and exits.
func (s *Server) adminDrain(w http.ResponseWriter, r *http.Request) {
	if s.cfg.adminToken == "" {
		s.fail(w, http.StatusNotFound, "the admin API is off: set HOLDLINE_ADMIN_TOKEN to use it")
		return
	}
	got, present, _ := bearer(r.Header.Get("Authorization"))
	if !present || !sameToken(got, sha256.Sum256([]byte(s.cfg.adminToken))) {
		s.unauthorized(w, "the admin routes take the admin token (Authorization: Bearer $HOLDLINE_ADMIN_TOKEN)", "invalid_token")
		return
	}
	s.host.BeginDrain()
	s.cfg.log.Info("drain asked for through the admin API", "from", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	io.WriteString(w, "draining\n")
}

// draining refuses a new session on a draining server.
func (s *Server) draining(w http.ResponseWriter) {
	w.Header().Set("Retry-After", drainRetryAfter)
	s.fail(w, http.StatusServiceUnavailable, "this worker is draining: another takes the call")
}

// errNoConnection: a move was asked of a call whose connection is down.
var errNoConnection = errors.New("server: the call has no connection to send the move on")

// Movable reports whether the call can be moved: its data channel
// carries the move message (calls.Mover).
func (c *call) Movable() bool {
	p := c.peer.Load()
	return p != nil && c.channelOpen.Load()
}

// Move tells the client to take the session elsewhere: it re-offers with
// the token through the front door, and another worker takes the session
// over (calls.Mover). The old connection stays up a moment, so that the
// message gets there.
func (c *call) Move(_ context.Context, token string) error {
	p := c.peer.Load()
	if p == nil {
		return errNoConnection
	}
	b, err := json.Marshal(map[string]any{"type": "move", "token": token})
	if err != nil {
		return err
	}
	c.moved.Store(true)
	if err := p.Send(b); err != nil {
		c.moved.Store(false)
		return err
	}
	return nil
}
