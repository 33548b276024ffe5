package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/holdline/holdline/events"
	"github.com/holdline/holdline/runtime/engine"
)

// State returns the session's state now, for a checkpoint or a handoff to
// another worker (engine.WithState starts a session from it).
func (s *Session) State(ctx context.Context) (engine.State, error) {
	return onCore(ctx, s, (*engine.Core).State)
}

// CheckpointDone reports how writing the state taken at event seq
// (engine.State.Seq) went: the session emits checkpoint_failed on a failure
// (once, until one succeeds) and checkpoint_saved, whose Count is seq, on
// success. The call goes on either way.
func (s *Session) CheckpointDone(ctx context.Context, seq uint64, err error) error {
	return s.send(ctx, engine.CheckpointDone{Seq: seq, Err: err})
}

// SetUserData stores v (as JSON) under key with the session's state, for
// the application's own use across handoffs and recoveries.
func (s *Session) SetUserData(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("runtime: user data %q: %w", key, err)
	}
	_, err = onCore(ctx, s, func(k *engine.Core) struct{} {
		k.SetUserData(key, b)
		return struct{}{}
	})
	return err
}

// UserData reads the value stored under key into v; it reports whether
// there was one.
func (s *Session) UserData(ctx context.Context, key string, v any) (bool, error) {
	b, err := onCore(ctx, s, func(k *engine.Core) json.RawMessage { return k.UserData(key) })
	if err != nil || b == nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("runtime: user data %q: %w", key, err)
	}
	return true, nil
}

// Emit puts an event of the session's owner (a transport's warm transfer
// steps) in the session's stream, on the conductor: numbered and timed as
// the core's own, in the current epoch, and checkpointed when its kind is
// one that checkpoints (the transfer kinds are).
func (s *Session) Emit(ctx context.Context, e events.Event) error {
	_, err := onCore(ctx, s, func(k *engine.Core) struct{} {
		e.Epoch = k.Epoch()
		k.Emit(e)
		return struct{}{}
	})
	return err
}
