package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenPicksStoreByURL(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, "file:"+filepath.Join(t.TempDir(), "holdline.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*File); !ok {
		t.Errorf("Open(file:...) = %T, want *File", s)
	}
	s.Close()

	s, err = Open(ctx, redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*Redis); !ok {
		t.Errorf("Open(redis://...) = %T, want *Redis", s)
	}
	s.Close()
}

func TestOpenRejectsOtherURLsListingAcceptedForms(t *testing.T) {
	for _, url := range []string{"", "holdline.db", "postgres://admin:hunter2@db/holdline", "http://localhost:6379"} {
		_, err := Open(context.Background(), url)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", url)
		}
		for _, want := range []string{"file:PATH", "redis://HOST:PORT"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%q) error %q does not list %s", url, err, want)
			}
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) error shows the password: %v", url, err)
		}
	}
}
