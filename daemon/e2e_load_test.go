package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestE2EConcurrentClients: 32 clients (one connection each) commit 200
// times each, concurrently, to their own sessions and to one shared
// session; no call fails, and every acknowledged commit is readable after.
func TestE2EConcurrentClients(t *testing.T) {
	const clients, commits = 32, 200
	p := startCairnd(t, workspace(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var failures atomic.Int64
	shared := make([][]uint64, clients) // generations acknowledged on the shared session
	for i := range clients {
		c := p.dial(t)
		wg.Go(func() {
			for j := range commits {
				sid, text := fmt.Sprintf("c%02d", i), fmt.Sprintf(`{"client":%d,"n":%d}`, i, j)
				if j%10 == 9 {
					sid = "shared"
				}
				r, err := c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{session.Value(text)}}})
				if err != nil {
					if failures.Add(1) < 5 {
						t.Errorf("client %d commit %d: %v", i, j, err)
					}
					continue
				}
				if sid == "shared" {
					shared[i] = append(shared[i], r.Generation)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d clients x %d commits in %v (%.0f commits/s)", clients, commits, elapsed.Round(time.Millisecond), float64(clients*commits)/elapsed.Seconds())
	if failures.Load() > 0 {
		t.Fatalf("%d commits failed", failures.Load())
	}
	c := p.dial(t)
	for i := range clients {
		rs, err := c.ResumeSession(ctx, fmt.Sprintf("c%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		want := commits - commits/10
		if rs.Generation != uint64(want) || len(rs.Snapshot.Messages) != want {
			t.Fatalf("client %d: generation %d, %d messages; want %d", i, rs.Generation, len(rs.Snapshot.Messages), want)
		}
		k := 0
		for j := range commits {
			if j%10 == 9 {
				continue
			}
			if got, w := string(rs.Snapshot.Messages[k]), fmt.Sprintf(`{"client":%d,"n":%d}`, i, j); got != w {
				t.Fatalf("client %d message %d = %s, want %s", i, k, got, w)
			}
			k++
		}
	}
	rs, err := c.ResumeSession(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, gens := range shared {
		for _, g := range gens {
			if seen[g] {
				t.Fatalf("generation %d acknowledged twice", g)
			}
			seen[g] = true
		}
	}
	if want := clients * commits / 10; rs.Generation != uint64(want) || len(seen) != want || len(rs.Snapshot.Messages) != want {
		t.Fatalf("shared: generation %d, %d messages, %d acknowledged; want %d", rs.Generation, len(rs.Snapshot.Messages), len(seen), want)
	}
}

// TestE2ECASRace: two clients race compare-and-swap commits on one
// session; each generation is won by exactly one, the loser gets
// "conflict", and nothing is lost.
func TestE2ECASRace(t *testing.T) {
	const rounds = 200
	p := startCairnd(t, workspace(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := p.dial(t), p.dial(t)
	if _, err := a.Save(ctx, msg("cas")); err != nil {
		t.Fatal(err)
	}
	var wins, conflicts [2]int
	var mu sync.Mutex
	won := map[uint64]int{}
	var wg sync.WaitGroup
	for who, c := range []*protocol.Client{a, b} {
		wg.Go(func() {
			for range rounds {
				rs, err := c.ResumeSession(ctx, "cas")
				if err != nil {
					t.Error(err)
					return
				}
				r, err := c.Save(ctx, api.SaveRequest{SessionID: "cas", ExpectGeneration: session.Expect(rs.Generation),
					Change: &session.Change{AppendMessages: []session.Value{session.Value(fmt.Sprintf(`{"who":%d,"gen":%d}`, who, rs.Generation+1))}}})
				switch {
				case err == nil:
					wins[who]++
					mu.Lock()
					won[r.Generation]++
					mu.Unlock()
					if r.Generation != rs.Generation+1 {
						t.Errorf("CAS on %d produced generation %d", rs.Generation, r.Generation)
					}
				case errors.Is(err, session.ErrConflict):
					conflicts[who]++
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rs, err := a.ResumeSession(ctx, "cas")
	if err != nil {
		t.Fatal(err)
	}
	total := wins[0] + wins[1]
	if rs.Generation != uint64(1+total) || len(rs.Snapshot.Messages) != 1+total {
		t.Fatalf("final generation %d with %d messages; %d wins", rs.Generation, len(rs.Snapshot.Messages), total)
	}
	for g, n := range won {
		if n != 1 {
			t.Fatalf("generation %d won %d times", g, n)
		}
	}
	for i, m := range rs.Snapshot.Messages[1:] {
		if want := fmt.Sprintf(`"gen":%d}`, i+2); len(m) < len(want) || string(m[len(m)-len(want):]) != want {
			t.Fatalf("message %d = %s: not the winner of generation %d", i+1, m, i+2)
		}
	}
	t.Logf("wins %v, conflicts %v", wins, conflicts)
}

// TestE2ESubscribeOrder: events arrive in commit order, across event types.
func TestE2ESubscribeOrder(t *testing.T) {
	const commits = 300
	p := startCairnd(t, workspace(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sub, err := p.dial(t).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := p.dial(t)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for i := range commits {
			sid := "a"
			if i%3 == 0 {
				sid = "b"
			}
			if _, err := w.Save(ctx, msg(sid)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	last := map[string]uint64{}
	for n := 0; n < commits; {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			if ev.Type != api.EventSessionCommitted {
				t.Fatalf("unexpected event %+v", ev)
			}
			sid, _ := ev.Data["session_id"].(string)
			gen, _ := ev.Data["generation"].(uint64)
			if gen != last[sid]+1 {
				t.Fatalf("session %s: generation %d after %d", sid, gen, last[sid])
			}
			last[sid] = gen
			n++
		case <-ctx.Done():
			t.Fatalf("only %v events", last)
		}
	}
	if sub.Dropped() != 0 {
		t.Fatalf("dropped %d", sub.Dropped())
	}
}
