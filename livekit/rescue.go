package livekit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	lkproto "github.com/livekit/protocol/livekit"
	lksdk "github.com/livekit/server-sdk-go/v2"

	"github.com/holdline/holdline/store"
)

// Defaults of a Rescue.
const (
	// DefaultRescueInterval is how often a Rescue looks for rooms whose
	// worker died.
	DefaultRescueInterval = 2 * time.Second
	// rescueMarkTTL is how long a room rescued stays marked so: the time
	// its new job has to pick the conversation up before the room may be
	// rescued again.
	rescueMarkTTL = 30 * time.Second
	// rescueCallTimeout bounds each request of a pass.
	rescueCallTimeout = 5 * time.Second
)

// Rescue finds the rooms whose worker died and has LiveKit dispatch them
// again. LiveKit's server gives a job to a worker once: when the worker
// dies, its rooms keep their callers but have no agent, and nothing
// dispatches them again. Every Holdline worker sharing the store can run
// a Rescue: a room qualifies when its conversation's checkpoint is in the
// store (the call did not end), nobody holds its lease (the worker that
// held it stopped renewing it, or released it when it went away), and a
// caller is still in the room. One worker dispatches it (the lease,
// taken for the check, serialises them; a mark in the store keeps the
// others off while the new job starts), and the worker LiveKit gives the
// job to picks the conversation up (Transport.Serve).
type Rescue struct {
	rooms    *lksdk.RoomServiceClient
	dispatch *lksdk.AgentDispatchClient
	st       store.Store
	owner    string
	cfg      rescueConfig
}

type rescueConfig struct {
	agentName string
	interval  time.Duration
	log       *slog.Logger
}

// RescueOption configures a Rescue.
type RescueOption func(*rescueConfig)

// WithRescueAgentName dispatches rescued rooms to the workers registered
// under name (the workers' WithAgentName); "" is automatic dispatch's
// workers.
func WithRescueAgentName(name string) RescueOption {
	return func(c *rescueConfig) { c.agentName = name }
}

// WithRescueInterval sets how often Run looks (default
// DefaultRescueInterval).
func WithRescueInterval(d time.Duration) RescueOption {
	return func(c *rescueConfig) {
		if d > 0 {
			c.interval = d
		}
	}
}

// WithRescueLogger sets the logger (default slog.Default()).
func WithRescueLogger(l *slog.Logger) RescueOption {
	return func(c *rescueConfig) {
		if l != nil {
			c.log = l
		}
	}
}

// NewRescue returns a Rescue for the LiveKit server at url (ws:// or
// http://), with the store the workers share; owner names this worker in
// the store's leases.
func NewRescue(url, apiKey, apiSecret string, st store.Store, owner string, opts ...RescueOption) (*Rescue, error) {
	if st == nil {
		return nil, errors.New("livekit: a rescue needs the store the workers share")
	}
	cfg := rescueConfig{interval: DefaultRescueInterval, log: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	return &Rescue{
		rooms:    lksdk.NewRoomServiceClient(url, apiKey, apiSecret),
		dispatch: lksdk.NewAgentDispatchServiceClient(url, apiKey, apiSecret),
		st:       st, owner: "rescue:" + owner, cfg: cfg,
	}, nil
}

// Run looks for rooms to rescue every interval until ctx ends.
func (r *Rescue) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		_, err := r.Pass(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			r.cfg.log.Warn("looking for rooms whose worker died failed", "err", err)
			failing = true
		case err == nil && failing:
			r.cfg.log.Info("looking for rooms whose worker died works again")
			failing = false
		}
	}
}

// Pass looks once and returns the rooms it dispatched again.
func (r *Rescue) Pass(ctx context.Context) ([]string, error) {
	lctx, cancel := context.WithTimeout(ctx, rescueCallTimeout)
	res, err := r.rooms.ListRooms(lctx, &lkproto.ListRoomsRequest{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("livekit: listing rooms: %w", err)
	}
	var rescued []string
	for _, room := range res.Rooms {
		ok, err := r.rescue(ctx, room)
		if err != nil {
			r.cfg.log.Warn("a room whose worker died was not dispatched again", "room", room.Name, "err", err)
			continue
		}
		if ok {
			rescued = append(rescued, room.Name)
		}
	}
	return rescued, nil
}

// rescue dispatches room again if its worker died; it reports whether it
// did.
func (r *Rescue) rescue(ctx context.Context, room *lkproto.Room) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, rescueCallTimeout)
	defer cancel()
	session, err := r.st.GetAlias(ctx, aliasOf(room.Sid))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil // no conversation here, or it ended long ago
		}
		return false, err
	}
	// The lease free means its worker stopped renewing it (a live call's
	// is held, and costs this look no more). Held for the check, it keeps
	// the other workers' rescues out until the mark is down.
	lease, err := r.st.Acquire(ctx, session, r.owner, rescueCallTimeout)
	if err != nil {
		if errors.Is(err, store.ErrLeaseHeld) {
			return false, nil // a live worker holds it
		}
		return false, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rescueCallTimeout)
		_ = r.st.Release(rctx, lease)
		cancel()
	}()
	if _, err := r.st.Load(ctx, session); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil // the call ended
		}
		return false, err
	}
	mark := "livekit-rescued:" + room.Sid
	if _, err := r.st.GetAlias(ctx, mark); err == nil {
		return false, nil // dispatched again lately; its job is starting
	}
	callers, err := r.callersIn(ctx, room.Name)
	if err != nil {
		return false, err
	}
	if callers == 0 {
		return false, nil // nobody to talk to
	}
	if _, err := r.dispatch.CreateDispatch(ctx, &lkproto.CreateAgentDispatchRequest{
		AgentName: r.cfg.agentName, Room: room.Name, Metadata: "holdline: rescued",
	}); err != nil {
		return false, fmt.Errorf("dispatching again: %w", err)
	}
	if err := r.st.PutAlias(ctx, mark, session, rescueMarkTTL); err != nil {
		r.cfg.log.Warn("a rescued room could not be marked so", "room", room.Name, "err", err)
	}
	r.cfg.log.Info("a room whose worker died was dispatched again", "room", room.Name, "session", session)
	return true, nil
}

// callersIn counts the participants in room who are not agents.
func (r *Rescue) callersIn(ctx context.Context, room string) (int, error) {
	res, err := r.rooms.ListParticipants(ctx, &lkproto.ListParticipantsRequest{Room: room})
	if err != nil {
		return 0, fmt.Errorf("listing the participants: %w", err)
	}
	n := 0
	for _, p := range res.Participants {
		if p.Kind != lkproto.ParticipantInfo_AGENT {
			n++
		}
	}
	return n, nil
}
