package daemon_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestPostgresEventsAcrossHosts has clients of two daemons on one database
// commit to the same sessions at once, while a subscriber on each daemon
// listens. Each subscriber must get every session.committed, whichever
// daemon committed it, each session's in generation order with none
// missing, and the run events of a run that lives on the other host.
func TestPostgresEventsAcrossHosts(t *testing.T) {
	_, hosts := twoHosts(t, "events")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var subs [2]*protocol.Subscription
	for i, h := range hosts {
		s, err := h.dial(t).Subscribe(ctx, api.EventSessionCommitted, api.EventRunCheckpointed, api.EventSessionDeleted)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	const sessions, writers, each = 3, 4, 10
	for k := range sessions {
		if _, err := hosts[0].dial(t).Save(ctx, api.SaveRequest{SessionID: fmt.Sprintf("s%d", k), Snapshot: &session.Snapshot{}}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		c := hosts[w%2].dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range each {
				sid := fmt.Sprintf("s%d", (w+n)%sessions)
				if _, err := c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{session.Value(`1`)}}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A run on host A, watched from host B.
	ca := hosts[0].dial(t)
	run, err := ca.BeginRun(ctx, api.BeginRunRequest{SessionID: "s0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Checkpoint(ctx, api.CheckpointRequest{RunID: run.RunID, SessionID: "s0", Turn: 1}); err != nil {
		t.Fatal(err)
	}
	if err := hosts[1].dial(t).Delete(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	total := sessions + writers*each + 2 // creations, appends, beginRun, checkpoint
	for i, sub := range subs {
		last := map[string]uint64{}
		committed, checkpointed, deleted := 0, 0, false
		for committed < total || checkpointed < 1 || !deleted {
			select {
			case ev, ok := <-sub.C:
				if !ok {
					t.Fatalf("host %d: subscription ended: %v", i, sub.Err())
				}
				switch ev.Type {
				case api.EventSessionCommitted:
					sid, gen := ev.Data["session_id"].(string), ev.Data["generation"].(uint64)
					if gen != last[sid]+1 {
						t.Fatalf("host %d: %s generation %d after %d: out of order or missing", i, sid, gen, last[sid])
					}
					last[sid] = gen
					committed++
				case api.EventRunCheckpointed:
					if ev.Data["run_id"] != run.RunID {
						t.Fatalf("host %d: %+v", i, ev)
					}
					checkpointed++
				case api.EventSessionDeleted:
					deleted = ev.Data["session_id"] == "s2"
				default:
					t.Fatalf("host %d: unexpected event %+v", i, ev)
				}
			case <-ctx.Done():
				t.Fatalf("host %d: %d of %d session.committed, %d run.checkpointed, deleted %v before the deadline", i, committed, total, checkpointed, deleted)
			}
		}
	}
}
