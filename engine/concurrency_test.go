package engine_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// TestConcurrentSaversWithExpectGeneration: 16 goroutines save to one
// session, each naming the generation it last read. Every attempt wins or
// gets conflict, and the winners' generations are exactly 1..N.
func TestConcurrentSaversWithExpectGeneration(t *testing.T) {
	const writers, attempts = 16, 12
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		var (
			mu     sync.Mutex
			won    []uint64
			lost   int
			others []error
			wg     sync.WaitGroup
			start  = make(chan struct{})
		)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range attempts {
					var expect uint64
					if cur, err := e.ResumeSession(ctx, "s"); err == nil {
						expect = cur.Generation
					}
					res, err := e.Save(ctx, api.SaveRequest{SessionID: "s", ExpectGeneration: session.Expect(expect),
						Change: &session.Change{AppendMessages: []session.Value{msg("w", w*1000+i)}}})
					mu.Lock()
					switch {
					case err == nil:
						won = append(won, res.Generation)
						if res.Generation != expect+1 {
							others = append(others, fmt.Errorf("save expecting generation %d landed at %d", expect, res.Generation))
						}
					case session.CodeOf(err) == session.CodeConflict:
						lost++
					default:
						others = append(others, err)
					}
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(others) > 0 {
			t.Fatalf("unexpected errors: %v", others)
		}
		if len(won)+lost != writers*attempts {
			t.Fatalf("%d wins + %d conflicts != %d attempts", len(won), lost, writers*attempts)
		}
		slices.Sort(won)
		for i, g := range won {
			if g != uint64(i+1) {
				t.Fatalf("winners' generations %v are not 1..%d", won, len(won))
			}
		}
		final, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		if final.Generation != uint64(len(won)) || len(final.Snapshot.Messages) != len(won) {
			t.Fatalf("final generation %d with %d messages, %d winners", final.Generation, len(final.Snapshot.Messages), len(won))
		}
		t.Logf("%d wins, %d conflicts", len(won), lost)
	})
}

// TestConcurrentRuns checkpoints many runs of one session at once; the
// per-session lock and CAS keep every turn and message.
func TestConcurrentRuns(t *testing.T) {
	const runs, turns = 8, 10
	forEachStore(t, func(t *testing.T, f storeFactory) {
		e := newEngine(t, f)
		ctx := testkit.Context(t)
		saveDelta(t, e, "s", msg("u", 0))
		var wg sync.WaitGroup
		errs := make(chan error, runs*(turns+2))
		for range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
				if err != nil {
					errs <- err
					return
				}
				for turn := 1; turn <= turns; turn++ {
					_, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: r.RunID, Turn: int64(turn), NewMessages: []session.Value{msg(r.RunID, turn)}, ToolCallsCount: int64(turn)})
					if err != nil {
						errs <- err
					}
				}
				if _, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: r.RunID, Status: session.RunCompleted}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		res, err := e.ResumeSession(ctx, "s")
		noErr(t, err)
		if len(res.Snapshot.Messages) != 1+runs*turns || len(res.InterruptedRuns) != 0 {
			t.Fatalf("%d messages, %d interrupted runs", len(res.Snapshot.Messages), len(res.InterruptedRuns))
		}
		for _, r := range res.Snapshot.Runs {
			if r.Status != session.RunCompleted || r.ToolCallsCount != turns {
				t.Fatalf("run %+v", r)
			}
		}
	})
}
