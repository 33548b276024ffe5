package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdline/holdline/tools"
)

// Redis is a [Store] on a Redis server, for many workers sharing sessions.
// Every write under a lease is one Lua script that checks the lease and
// writes, so that a worker that lost its lease cannot slip a write in
// between. Leases and aliases expire on the server's clock; [WithClock]
// does not apply.
//
// A session's keys share a hash tag, {SESSION}, so that its scripts touch
// one slot.
type Redis struct {
	client *redis.Client
	prefix string
}

var _ Store = (*Redis)(nil)

// leaseGuard begins every script that writes under a lease: KEYS[1] is the
// lease, ARGV[1] and ARGV[2] the owner and token written under. An expired
// lease is gone (PX), so it fails the check too.
const leaseGuard = `
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
	return 0
end
`

var (
	// acquireScript: KEYS lease, token counter; ARGV owner, ttl in ms.
	// Returns {1, token} or {0, 0} when another owner holds the lease.
	acquireScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] and cur[1] ~= ARGV[1] then
	return {0, 0}
end
local token = cur[2]
if not cur[1] then
	token = redis.call('INCR', KEYS[2])
	redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, tonumber(token)}
`)
	// takeoverScript: KEYS lease, token counter; ARGV owner, ttl in ms.
	// Takes the lease whoever holds it, with a new token. Returns the token.
	takeoverScript = redis.NewScript(`
local token = redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return token
`)
	// releaseScript: KEYS lease.
	releaseScript = redis.NewScript(leaseGuard + `
redis.call('DEL', KEYS[1])
return 1
`)
	// saveScript: KEYS lease, checkpoint; ARGV[3] the checkpoint.
	saveScript = redis.NewScript(leaseGuard + `
redis.call('SET', KEYS[2], ARGV[3])
return 1
`)
	// appendScript: KEYS lease, journal; ARGV[3] the record.
	appendScript = redis.NewScript(leaseGuard + `
redis.call('RPUSH', KEYS[2], ARGV[3])
return 1
`)
	// deleteScript: KEYS lease, checkpoint, journal.
	deleteScript = redis.NewScript(leaseGuard + `
redis.call('DEL', KEYS[2], KEYS[3])
return 1
`)
)

// OpenRedis connects to the Redis server at url, redis://HOST:PORT[/DB]
// (a user and password may precede the host), and checks that it answers
// within ctx, so that a wrong address fails at start rather than at the
// first checkpoint.
func OpenRedis(ctx context.Context, url string, opts ...Option) (*Redis, error) {
	o := newOptions(opts)
	ro, err := redis.ParseURL(url)
	if err != nil {
		// A parse error quotes the URL, password and all: keep the cause only.
		if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("store: redis URL (want redis://HOST:PORT[/DB]): %w", err)
	}
	client := redis.NewClient(ro)
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		return nil, fmt.Errorf("store: redis at %s does not answer: %w", ro.Addr, err)
	}
	return &Redis{client: client, prefix: o.prefix}, nil
}

// Acquire takes or renews the lease on session for owner; see [Store].
// Expires is read from this machine's clock before the request, so it is
// no later than the server's expiry.
func (s *Redis) Acquire(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error) {
	if err := checkAcquire(ctx, session, owner, ttl); err != nil {
		return Lease{}, err
	}
	expires := time.Now().Add(ttl)
	res, err := acquireScript.Run(ctx, s.client,
		[]string{s.key(session, "lease"), s.key(session, "token")},
		owner, millis(ttl)).Int64Slice()
	if err != nil {
		return Lease{}, fmt.Errorf("store: redis acquire: %w", err)
	}
	if len(res) != 2 {
		return Lease{}, fmt.Errorf("store: redis acquire: unexpected reply %v", res)
	}
	if res[0] == 0 {
		return Lease{}, fmt.Errorf("%w: session %q", ErrLeaseHeld, session)
	}
	return Lease{Session: session, Owner: owner, Token: uint64(res[1]), Expires: expires}, nil
}

// Takeover takes the lease on session for owner whoever holds it; see
// [Store].
func (s *Redis) Takeover(ctx context.Context, session, owner string, ttl time.Duration) (Lease, error) {
	if err := checkAcquire(ctx, session, owner, ttl); err != nil {
		return Lease{}, err
	}
	expires := time.Now().Add(ttl)
	token, err := takeoverScript.Run(ctx, s.client,
		[]string{s.key(session, "lease"), s.key(session, "token")}, owner, millis(ttl)).Int64()
	if err != nil {
		return Lease{}, fmt.Errorf("store: redis takeover: %w", err)
	}
	return Lease{Session: session, Owner: owner, Token: uint64(token), Expires: expires}, nil
}

// Release gives l up if it is still held; see [Store].
func (s *Redis) Release(ctx context.Context, l Lease) error {
	_, err := s.underLease(ctx, releaseScript, l, []string{s.key(l.Session, "lease")})
	if err != nil {
		return fmt.Errorf("store: redis release: %w", err)
	}
	return nil // a lost lease is not ours to give up
}

// Save replaces the session's checkpoint under l; see [Store].
func (s *Redis) Save(ctx context.Context, l Lease, data []byte) error {
	return s.write(ctx, "save", saveScript, l,
		[]string{s.key(l.Session, "lease"), s.key(l.Session, "checkpoint")}, data)
}

// Load returns the session's latest checkpoint; see [Store].
func (s *Redis) Load(ctx context.Context, session string) ([]byte, error) {
	data, err := s.client.Get(ctx, s.key(session, "checkpoint")).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: checkpoint of session %q", ErrNotFound, session)
	}
	if err != nil {
		return nil, fmt.Errorf("store: redis load: %w", err)
	}
	return data, nil
}

// Delete removes the session's checkpoint and journal under l; see
// [Store]. The session's token counter stays, so that its tokens keep
// growing should the session be taken again.
func (s *Redis) Delete(ctx context.Context, l Lease) error {
	return s.write(ctx, "delete", deleteScript, l, []string{
		s.key(l.Session, "lease"), s.key(l.Session, "checkpoint"), s.key(l.Session, "journal"),
	})
}

// Append adds r to the session's journal under l; see [Store].
func (s *Redis) Append(ctx context.Context, l Lease, r tools.Record) error {
	r, err := recordFor(l, r)
	if err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: redis append: %w", err)
	}
	return s.write(ctx, "append", appendScript, l,
		[]string{s.key(l.Session, "lease"), s.key(l.Session, "journal")}, v)
}

// Journal returns the session's records in the order appended; see
// [Store].
func (s *Redis) Journal(ctx context.Context, session string) ([]tools.Record, error) {
	vs, err := s.client.LRange(ctx, s.key(session, "journal"), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("store: redis journal: %w", err)
	}
	out := make([]tools.Record, 0, len(vs))
	for _, v := range vs {
		var r tools.Record
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return nil, fmt.Errorf("store: redis journal: record of session %q: %w", session, err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// PutAlias makes name lead to session for ttl; see [Store].
func (s *Redis) PutAlias(ctx context.Context, name, session string, ttl time.Duration) error {
	if err := checkAlias(ctx, name, session, ttl); err != nil {
		return err
	}
	if err := s.client.Set(ctx, s.aliasKey(name), session, time.Duration(millis(ttl))*time.Millisecond).Err(); err != nil {
		return fmt.Errorf("store: redis put alias: %w", err)
	}
	return nil
}

// TakeAlias returns the session name leads to and removes the alias in
// one command (GETDEL); see [Store].
func (s *Redis) TakeAlias(ctx context.Context, name string) (string, error) {
	session, err := s.client.GetDel(ctx, s.aliasKey(name)).Result()
	return aliasResult("take", session, err)
}

// GetAlias returns the session name leads to; see [Store].
func (s *Redis) GetAlias(ctx context.Context, name string) (string, error) {
	session, err := s.client.Get(ctx, s.aliasKey(name)).Result()
	return aliasResult("get", session, err)
}

// Close closes the connections to the server.
func (s *Redis) Close() error {
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("store: redis close: %w", err)
	}
	return nil
}

// key names one of the session's keys. The braces make the session a hash
// tag: a script's keys must share a slot on a cluster.
func (s *Redis) key(session, kind string) string {
	return s.prefix + "{" + session + "}:" + kind
}

func (s *Redis) aliasKey(name string) string { return s.prefix + "alias:" + name }

// write runs script under l and reports a refused write as ErrLeaseLost.
func (s *Redis) write(ctx context.Context, op string, script *redis.Script, l Lease, keys []string, args ...any) error {
	ok, err := s.underLease(ctx, script, l, keys, args...)
	if err != nil {
		return fmt.Errorf("store: redis %s: %w", op, err)
	}
	if !ok {
		return fmt.Errorf("%w: session %q, token %d", ErrLeaseLost, l.Session, l.Token)
	}
	return nil
}

// underLease runs a script that begins with leaseGuard, reporting whether
// l passed the guard.
func (s *Redis) underLease(ctx context.Context, script *redis.Script, l Lease, keys []string, args ...any) (bool, error) {
	if l.Session == "" || l.Owner == "" {
		return false, nil // no lease at all: nothing can match it
	}
	argv := append([]any{l.Owner, strconv.FormatUint(l.Token, 10)}, args...)
	n, err := script.Run(ctx, s.client, keys, argv...).Int64()
	return n == 1, err
}

// aliasResult maps a missing alias to ErrNotFound, naming no alias: an
// alias may be a secret token.
func aliasResult(op, session string, err error) (string, error) {
	switch {
	case errors.Is(err, redis.Nil):
		return "", errAliasNotFound
	case err != nil:
		return "", fmt.Errorf("store: redis %s alias: %w", op, err)
	}
	return session, nil
}

// millis is d in whole milliseconds, rounded up: Redis's PX would take a
// zero as "expire now".
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
