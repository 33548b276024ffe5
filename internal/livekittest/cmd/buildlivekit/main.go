// Command buildlivekit builds livekit-server into the cache the tests
// and the bench use (livekittest.BinaryPath), once: make test-deps runs
// it. It prints the binary's path.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/holdline/holdline/internal/livekittest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bin, err := livekittest.Binary(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
