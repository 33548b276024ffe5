package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tried as a new user would: serve with no store settings keeps a file
// store with a key of its own next to it, readable by the user only, and
// the same key on the next start; a shared Redis store wants the key
// given.
func TestServeStoreDefaults(t *testing.T) {
	t.Setenv(snapshotKeyEnv, "")
	if got := defaultStore("127.0.0.1:0"); got != "none" {
		t.Errorf("an ephemeral port gets store %q; want none", got)
	}
	if got := defaultStore("127.0.0.1:8080"); !strings.HasPrefix(got, "file:") || !strings.HasSuffix(got, "sessions-8080.db") {
		t.Errorf("port 8080 gets store %q", got)
	}
	path := filepath.Join(t.TempDir(), "holdline", "sessions-8080.db")
	st, key, err := openStore(context.Background(), "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	info, err := os.Stat(strings.TrimSuffix(path, ".db") + ".key")
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want one readable by the user only", err, info.Mode())
	}
	st, again, err := openStore(context.Background(), "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if string(again.Secret) != string(key.Secret) || len(key.Secret) < 16 {
		t.Error("the file store's key changed between starts, or is short")
	}
	if _, _, err := openStore(context.Background(), "redis://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), snapshotKeyEnv) {
		t.Errorf("redis without a key: %v; want an error naming %s", err, snapshotKeyEnv)
	}
	t.Setenv(snapshotKeyEnv, "short")
	if _, _, err := openStore(context.Background(), "file:"+path); err == nil {
		t.Error("a 5-byte key was accepted")
	}
}
