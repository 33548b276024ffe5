package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

func TestOpenFileInUseFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holdline.db")
	first, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	start := time.Now()
	second, err := OpenFile(path, withLockTimeout(50*time.Millisecond))
	if err == nil {
		second.Close()
		t.Fatal("second OpenFile of an open file succeeded")
	}
	if want := "store: " + path + " is in use by another process"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("second OpenFile took %v to give up", waited)
	}
}

func TestOpenFileAfterCloseSucceeds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "holdline.db")
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = OpenFile(path, withLockTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatalf("OpenFile after Close: %v", err)
	}
	f.Close()
}

func TestFileKeepsStateAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "holdline.db")
	clock := &fakeClock{now: time.Date(2026, 7, 14, 9, 0, 0, 0, time.UTC)}
	f, err := OpenFile(path, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	l := acquire(t, f, "s1", "a", longTTL)
	if err := f.Save(ctx, l, []byte("checkpoint")); err != nil {
		t.Fatal(err)
	}
	if err := f.Append(ctx, l, record("c1", "")); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f, err = OpenFile(path, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := f.Load(ctx, "s1"); err != nil || string(got) != "checkpoint" {
		t.Fatalf("Load after reopen = %q, %v", got, err)
	}
	if recs, err := f.Journal(ctx, "s1"); err != nil || len(recs) != 1 || recs[0].CallID != "c1" {
		t.Fatalf("Journal after reopen = %+v, %v", recs, err)
	}
	if next := acquire(t, f, "s1", "b", longTTL); next.Token <= l.Token {
		t.Fatalf("token after reopen %d is not above %d", next.Token, l.Token)
	}
}

func TestOpenFileSweepsExpiredAliases(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "holdline.db")
	clock := &fakeClock{now: time.Date(2026, 7, 14, 9, 0, 0, 0, time.UTC)}
	f, err := OpenFile(path, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	for name, ttl := range map[string]time.Duration{"old-1": time.Second, "old-2": time.Second, "live": time.Hour} {
		if err := f.PutAlias(ctx, name, "s1", ttl); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	f, err = OpenFile(path, WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var left []string
	err = f.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketAliases).ForEach(func(k, _ []byte) error {
			left = append(left, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != "live" {
		t.Fatalf("aliases after reopen %q, want only live", left)
	}
}
