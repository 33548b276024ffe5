package store_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/holdline/holdline/store"
)

func ExampleOpenFile() {
	dir, err := os.MkdirTemp("", "holdline-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.OpenFile(filepath.Join(dir, "holdline.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	lease, err := s.Acquire(ctx, "session-1", "worker-a", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Save(ctx, lease, []byte(`{"turns":3}`)); err != nil {
		log.Fatal(err)
	}
	data, err := s.Load(ctx, "session-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token:", lease.Token)
	fmt.Println("checkpoint:", string(data))

	// A second worker cannot take the session while the lease is live.
	_, err = s.Acquire(ctx, "session-1", "worker-b", 30*time.Second)
	fmt.Println(err)
	// Output:
	// token: 1
	// checkpoint: {"turns":3}
	// store: session leased by another owner: session "session-1"
}
