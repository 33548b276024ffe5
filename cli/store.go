package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/holdline/holdline/handoff"
	"github.com/holdline/holdline/store"
)

// snapshotKeyEnv names the environment variable with the key that signs
// session snapshots: the same on every worker sharing a store.
const snapshotKeyEnv = "HOLDLINE_SNAPSHOT_KEY"

// defaultStore is the file store serve uses with no --store: one file per
// HTTP port under the user's cache, so that a worker restarted on its port
// finds its sessions, and two workers on one machine do not share a file.
// A server on a port the system picks (:0) cannot be found again after a
// restart, so it keeps no store.
func defaultStore(listen string) string {
	_, port, _ := net.SplitHostPort(listen)
	if port == "" || port == "0" {
		return "none"
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return "file:" + filepath.Join(dir, "holdline", "sessions-"+port+".db")
}

// openStore opens the store spec names ("none" for none) and returns it
// with the snapshot key: HOLDLINE_SNAPSHOT_KEY, or for a file store a key
// kept next to the file (created on first use, readable by this user
// only).
func openStore(ctx context.Context, spec string) (store.Store, handoff.Key, error) {
	if spec == "none" {
		return nil, handoff.Key{}, nil
	}
	key, err := snapshotKey(spec)
	if err != nil {
		return nil, handoff.Key{}, err
	}
	if path, ok := strings.CutPrefix(spec, "file:"); ok {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, handoff.Key{}, fmt.Errorf("--store %s: %w", spec, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := store.Open(ctx, spec)
	if err != nil {
		return nil, handoff.Key{}, fmt.Errorf("--store: %w", err)
	}
	return st, key, nil
}

func snapshotKey(spec string) (handoff.Key, error) {
	if v := os.Getenv(snapshotKeyEnv); v != "" {
		if len(v) < handoff.MinKeyLen {
			return handoff.Key{}, fmt.Errorf("%s is %d bytes; it must be at least %d", snapshotKeyEnv, len(v), handoff.MinKeyLen)
		}
		return handoff.Key{ID: "env", Secret: []byte(v)}, nil
	}
	path, ok := strings.CutPrefix(spec, "file:")
	if !ok {
		return handoff.Key{}, fmt.Errorf("--store %s is shared by workers: set %s to the same secret (at least %d bytes) on each", spec, snapshotKeyEnv, handoff.MinKeyLen)
	}
	keyFile := strings.TrimSuffix(path, filepath.Ext(path)) + ".key"
	b, err := os.ReadFile(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, 32)
		_, _ = rand.Read(raw)
		b = []byte(hex.EncodeToString(raw))
		if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
			return handoff.Key{}, fmt.Errorf("snapshot key: %w", err)
		}
		if err := os.WriteFile(keyFile, b, 0o600); err != nil {
			return handoff.Key{}, fmt.Errorf("snapshot key: %w", err)
		}
	} else if err != nil {
		return handoff.Key{}, fmt.Errorf("snapshot key: %w", err)
	}
	return handoff.Key{ID: "file", Secret: []byte(strings.TrimSpace(string(b)))}, nil
}

// workerName names this process in leases.
func workerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}
