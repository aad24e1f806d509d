// Command cairn is the cairn command line; see "cairn --help". It only
// wires signals and the process; internal/cli does the work.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairn-dev/cairn/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Run(ctx)
	stop()
	os.Exit(code)
}
