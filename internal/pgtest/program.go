package pgtest

import (
	"fmt"
	"os"
)

// Program stands in for a *testing.T when a program (pgserve, a benchmark)
// owns the server: Fatalf and Skipf print, run the cleanups and exit, with
// status 3 and 4 respectively; Close runs the cleanups.
type Program struct{ cleanups []func() }

var _ T = (*Program)(nil)

// Helper does nothing.
func (p *Program) Helper() {}

// Cleanup registers f to run at Close, last registered first.
func (p *Program) Cleanup(f func()) { p.cleanups = append(p.cleanups, f) }

// Close stops the server and removes its folder.
func (p *Program) Close() {
	for i := len(p.cleanups) - 1; i >= 0; i-- {
		p.cleanups[i]()
	}
	p.cleanups = nil
}

// Fatalf reports a failure and exits with status 3.
func (p *Program) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pgtest: "+format+"\n", args...)
	p.Close()
	os.Exit(3)
}

// Skipf reports why PostgreSQL is not used and exits with status 4.
func (p *Program) Skipf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pgtest: "+format+"\n", args...)
	p.Close()
	os.Exit(4)
}
