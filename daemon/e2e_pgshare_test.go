package daemon_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// twoHosts starts a PostgreSQL server and two cairnd processes with their
// own workspaces on one database of it.
func twoHosts(t *testing.T, db string) (*pgtest.Server, [2]*proc) {
	t.Helper()
	srv := pgtest.Start(t)
	url := srv.CreateDB(db)
	return srv, [2]*proc{startCairnd(t, t.TempDir(), "--store", url), startCairnd(t, t.TempDir(), "--store", url)}
}

// TestPostgresCASAcrossDaemons has 32 clients, half on each of two daemons
// on one database, append to one session, each commit a compare-and-swap
// on the generation the client last read. Every generation must be
// acknowledged to exactly one client, and the session's messages must be
// exactly the acknowledged ones, in generation order: none lost, none
// duplicated.
func TestPostgresCASAcrossDaemons(t *testing.T) {
	_, hosts := twoHosts(t, "cas")
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	c0 := hosts[0].dial(t)
	if _, err := c0.Save(ctx, api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{}}); err != nil {
		t.Fatal(err)
	}
	const clients, each = 32, 6
	var mu sync.Mutex
	acked := map[uint64]string{}
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := hosts[i%2].dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; {
				sum, err := c.Summary(ctx, "s")
				if err != nil {
					errs <- err
					return
				}
				label := fmt.Sprintf(`"c%d-%d"`, i, k)
				res, err := c.Save(ctx, api.SaveRequest{SessionID: "s", ExpectGeneration: session.Expect(sum.Generation),
					Change: &session.Change{AppendMessages: []session.Value{session.Value(label)}}})
				if protocol.CodeOf(err) == session.CodeConflict {
					conflicts.Add(1)
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
				if res.Generation != sum.Generation+1 {
					errs <- fmt.Errorf("client %d expected %d and was given generation %d", i, sum.Generation, res.Generation)
					return
				}
				mu.Lock()
				if prev, dup := acked[res.Generation]; dup {
					errs <- fmt.Errorf("generation %d acknowledged twice: %s and %s", res.Generation, prev, label)
				}
				acked[res.Generation] = label
				mu.Unlock()
				k++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m, err := hosts[1].dial(t).Messages(ctx, api.MessagesRequest{SessionID: "s", Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if m.Total != clients*each || len(acked) != clients*each || m.Generation != clients*each+1 {
		t.Fatalf("%d messages at generation %d, %d acknowledged; want %d", m.Total, m.Generation, len(acked), clients*each)
	}
	for j, msg := range m.Messages {
		if want := acked[uint64(j)+2]; string(msg) != want {
			t.Fatalf("message %d is %s; generation %d was acknowledged as %s", j, msg, j+2, want)
		}
	}
	t.Logf("%d commits, %d lost compare-and-swaps retried", clients*each, conflicts.Load())
}

// TestPostgresKillThroughDaemons streams commits from clients of two
// daemons while the postmaster is SIGKILLed and, a moment later, started
// again. Clients must see only unavailable while it is down; the same
// daemons serve again once it is back; and every acknowledged message is
// in its session afterwards.
func TestPostgresKillThroughDaemons(t *testing.T) {
	srv, hosts := twoHosts(t, "kill")
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	const clients = 4
	var phase atomic.Int32 // 0 before the kill, 1 down, 2 back
	var wg sync.WaitGroup
	acked := make([][]string, clients)
	afterBack := make([]atomic.Int64, clients)
	bad := make(chan error, clients)
	var unavailable atomic.Int64
	stop := make(chan struct{})
	for i := range clients {
		c := hosts[i%2].dial(t)
		sid := fmt.Sprintf("s%d", i)
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: sid, Snapshot: &session.Snapshot{}}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				label := fmt.Sprintf(`"m%d"`, n)
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.Save(cctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{session.Value(label)}}})
				ccancel()
				switch code := protocol.CodeOf(err); {
				case err == nil:
					acked[i] = append(acked[i], label)
					if phase.Load() == 2 {
						afterBack[i].Add(1)
					}
				case code == api.CodeUnavailable:
					unavailable.Add(1)
					time.Sleep(20 * time.Millisecond)
				default:
					bad <- fmt.Errorf("client %d, commit %d: %v (code %q); only unavailable is allowed", i, n, err, code)
					return
				}
			}
		}()
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case err := <-bad:
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	srv.Kill()
	phase.Store(1)
	waitFor("clients to see the database gone", func() bool { return unavailable.Load() >= clients })
	srv.Restart()
	phase.Store(2)
	waitFor("every client to commit again through the same daemons", func() bool {
		for i := range clients {
			if afterBack[i].Load() < 5 {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()
	select {
	case err := <-bad:
		t.Fatal(err)
	default:
	}
	for i := range clients {
		m, err := hosts[(i+1)%2].dial(t).Messages(ctx, api.MessagesRequest{SessionID: fmt.Sprintf("s%d", i), Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, msg := range m.Messages {
			have[string(msg)] = true
		}
		for _, l := range acked[i] {
			if !have[l] {
				t.Fatalf("session s%d lost acknowledged message %s (%d messages there, %d acknowledged)", i, l, m.Total, len(acked[i]))
			}
		}
	}
	t.Logf("%d calls answered unavailable while the database was down", unavailable.Load())
}
