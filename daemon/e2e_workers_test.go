package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/protocol"
)

// TestE2EWorkersAcrossBursts: on one connection, a client alternates calls
// made one at a time (each served by the worker the previous one left
// waiting) with bursts of protocol.MaxInFlightPerConn concurrent calls
// (which start workers of their own, most of which end after their call).
// Every call is answered with its own result, the session holds every
// save in order of generation, and SIGTERM then stops cairnd cleanly
// within the test's bound: no worker is left waiting.
func TestE2EWorkersAcrossBursts(t *testing.T) {
	p := startCairnd(t, workspace(t), "--log-level", "warn", "--no-track-files")
	c := p.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var gen uint64
	for round := range 4 {
		for range 10 {
			r, err := c.Save(ctx, msg("seq"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Generation != gen+1 {
				t.Fatalf("round %d: generation %d after %d", round, r.Generation, gen)
			}
			gen = r.Generation
		}
		var wg sync.WaitGroup
		errs := make([]error, protocol.MaxInFlightPerConn)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sid := fmt.Sprintf("burst-%02d", i)
				r, err := c.Save(ctx, msg(sid))
				if err == nil && r.Generation != uint64(round+1) {
					err = fmt.Errorf("%s: generation %d in round %d", sid, r.Generation, round)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := c.Summary(ctx, "seq"); err != nil || s.MessageCount != 40 {
		t.Fatalf("seq: %+v %v", s, err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM; log:\n%s", code, p.logText())
	}
}
