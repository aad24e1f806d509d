package daemon_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestE2EKill9ConcurrentInlineCommits: 8 clients, each on a session of its
// own, stream saves (which cairnd runs on each connection's reader, writing
// the answer there) while cairnd is killed with SIGKILL, in several rounds.
// After each kill a new cairnd serves the workspace, and every save any
// client saw acknowledged is there, in order.
func TestE2EKill9ConcurrentInlineCommits(t *testing.T) {
	const clients, rounds = 8, 4
	ws := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acked := make([]int, clients) // per client: saves acknowledged so far
	for round := 0; round < rounds; round++ {
		p := startCairnd(t, ws)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for k := 0; k < clients; k++ {
			c := p.dial(t)
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				sid := fmt.Sprintf("agent-%d", k)
				for i := acked[k]; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					msg := session.Value(strconv.Quote(fmt.Sprintf("%d/%d", k, i)))
					if _, err := c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{msg}}}); err != nil {
						return // the kill hit this call: it was not acknowledged
					}
					acked[k] = i + 1
				}
			}(k)
		}
		time.Sleep(150 * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("round %d: cairnd gone before the kill: %v; log:\n%s", round, err, p.logText())
		}
		<-p.done
		close(stop)
		wg.Wait()

		// Every acknowledged save is present in a fresh daemon, in order;
		// one in flight at the kill may be there too, and the next round
		// appends after it, so the rounds check against what is there.
		p2 := startCairnd(t, ws)
		c := p2.dial(t)
		for k := 0; k < clients; k++ {
			sid := fmt.Sprintf("agent-%d", k)
			rs, err := c.ResumeSession(ctx, sid)
			if acked[k] == 0 && protocol.CodeOf(err) == session.CodeNotFound {
				continue
			}
			if err != nil {
				t.Fatalf("round %d: resume %s: %v", round, sid, err)
			}
			msgs := rs.Snapshot.Messages
			if len(msgs) < acked[k] {
				t.Fatalf("round %d: %s: %d saves acknowledged, %d messages after the kill", round, sid, acked[k], len(msgs))
			}
			for i, m := range msgs {
				if want := strconv.Quote(fmt.Sprintf("%d/%d", k, i)); string(m) != want {
					t.Fatalf("round %d: %s: message %d = %s, want %s", round, sid, i, m, want)
				}
			}
			acked[k] = len(msgs)
		}
		c.Close()
		if err := p2.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p2.done
	}
	total := 0
	for _, n := range acked {
		total += n
	}
	if total == 0 {
		t.Fatal("no save was acknowledged")
	}
	t.Logf("%d saves acknowledged across %d clients and %d kills", total, clients, rounds)
}
