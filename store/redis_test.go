package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdline/holdline/internal/freeport"
	"github.com/holdline/holdline/internal/redistest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if testRedis.srv != nil {
		if err := testRedis.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "store: stopping redis-server:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// testRedis is the redis-server this test binary starts for its tests,
// on first use, and stops in TestMain.
var testRedis struct {
	once sync.Once
	srv  *redistest.Server
	err  error
}

// redisURL returns the URL of the test redis-server, starting it if need
// be.
func redisURL(tb testing.TB) string {
	tb.Helper()
	path := redistest.Path(tb)
	testRedis.once.Do(func() { testRedis.srv, testRedis.err = redistest.StartAt(path) })
	if testRedis.err != nil {
		tb.Fatal(testRedis.err)
	}
	return testRedis.srv.URL()
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

func TestOpenRedisNamesUnansweringAddress(t *testing.T) {
	port, err := freeport.TCP()
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
