package daemon_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// killRounds is how many times TestE2EManyKills kills cairnd:
// CAIRN_KILL_ROUNDS, else 10 (`make test-kills` runs 200).
func killRounds(t *testing.T) int {
	t.Helper()
	v := os.Getenv("CAIRN_KILL_ROUNDS")
	if v == "" {
		return 10
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("CAIRN_KILL_ROUNDS=%q: want a positive number", v)
	}
	return n
}

// TestE2EManyKills: 8 clients, each on a session of its own, commit as fast
// as they can (saves, and run checkpoints carrying a message) while cairnd
// is killed with SIGKILL at a random moment, round after round. Each round's
// new cairnd first checks that every commit any client saw acknowledged
// is there, in order and nothing else but, at most, the one commit per
// client in flight at the kill.
func TestE2EManyKills(t *testing.T) {
	const clients = 8
	rounds := killRounds(t)
	ws := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	acked := make([]int, clients) // per client: commits acknowledged so far
	runs := make([]string, clients)
	var checkpoints atomic.Int64
	total := 0
	for round := 0; round <= rounds; round++ {
		p := startCairnd(t, ws)
		c := p.dial(t)
		for k := range clients {
			sid := fmt.Sprintf("agent-%d", k)
			rs, err := c.ResumeSession(ctx, sid)
			if acked[k] == 0 && protocol.CodeOf(err) == session.CodeNotFound {
				continue
			}
			if err != nil {
				t.Fatalf("round %d: resume %s: %v", round, sid, err)
			}
			msgs := rs.Snapshot.Messages
			if len(msgs) < acked[k] || len(msgs) > acked[k]+1 {
				t.Fatalf("round %d: %s: %d commits acknowledged, %d messages after the kill", round, sid, acked[k], len(msgs))
			}
			for i, m := range msgs {
				if want := strconv.Quote(fmt.Sprintf("%d/%d", k, i)); string(m) != want {
					t.Fatalf("round %d: %s: message %d = %s, want %s", round, sid, i, m, want)
				}
			}
			acked[k] = len(msgs)
		}
		c.Close()
		if round == rounds {
			break
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for k := range clients {
			c := p.dial(t)
			wg.Go(func() {
				defer c.Close()
				sid := fmt.Sprintf("agent-%d", k)
				for i := acked[k]; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					msg := session.Value(strconv.Quote(fmt.Sprintf("%d/%d", k, i)))
					var err error
					cp := i%3 == 2 && runs[k] != ""
					if cp {
						_, err = c.Checkpoint(ctx, api.CheckpointRequest{RunID: runs[k], Turn: int64(i), NewMessages: []session.Value{msg}})
						if protocol.CodeOf(err) == session.CodeNotFound || protocol.CodeOf(err) == session.CodeNoCheckpoint {
							runs[k] = "" // the run's begin was in flight at a kill
							err = nil
							i--
							continue
						}
					} else {
						_, err = c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{msg}}})
					}
					if err != nil {
						return // the kill hit this call: it was not acknowledged
					}
					if cp {
						checkpoints.Add(1)
					}
					acked[k] = i + 1
					if runs[k] == "" {
						r, err := c.BeginRun(ctx, api.BeginRunRequest{SessionID: sid})
						if err != nil {
							return
						}
						runs[k] = r.RunID
					}
				}
			})
		}
		time.Sleep(time.Duration(20+rand.IntN(120)) * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: cairnd gone before the kill: %v; log:\n%s", round, err, p.logText())
		}
		<-p.done
		close(stop)
		wg.Wait()
	}
	for _, n := range acked {
		total += n
	}
	if total < rounds || checkpoints.Load() == 0 {
		t.Fatalf("only %d commits (%d checkpoints) acknowledged over %d kills", total, checkpoints.Load(), rounds)
	}
	t.Logf("%d commits (%d of them run checkpoints) acknowledged by 8 clients across %d kills, all present", total, checkpoints.Load(), rounds)
}
