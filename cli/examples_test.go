package cli

import (
	"context"
	"io"

	"github.com/holdline/holdline/examples"
)

// run runs a command over the example agents, as cmd/holdline does.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var demo examples.Demo
	return Run(ctx, args, demo.Agents(), WithName("holdline"), WithDefaultAgent("booking"), WithFlags(demo.Flags), WithIO(stdin, stdout, stderr))
}
