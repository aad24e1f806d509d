// Command pgserve runs a throwaway PostgreSQL server for the bindings'
// tests, as the Go tests get from pgtest: it prints the URL of a new, empty
// database (named by its argument, default "cairn") as its first line of
// output, serves until its standard input closes (or SIGINT/SIGTERM), then
// stops the server and removes its folder. Without PostgreSQL's binaries it
// exits with status 3 after saying so, or with status 4 when
// CAIRN_SKIP_PG=1 says to skip on purpose.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

func main() {
	owner := &pgtest.Program{}
	srv := pgtest.Start(owner)
	name := "cairn"
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	fmt.Println(srv.CreateDB(name))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-stop:
	case <-eof:
	}
	owner.Close()
}
