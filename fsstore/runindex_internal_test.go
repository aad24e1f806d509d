package fsstore

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/session"
)

// TestRunLookupsAnswerAsTheScan runs random histories over three sessions
// and a few run ids (runs begun, checkpointed and dropped, the same id in
// two sessions, replaces, deletes, copies, compactions, reopens) and, after
// each step, asks FindRun, CheckpointSession and Checkpoint about every id:
// each must answer what a look through every session answers (a session
// that records the run, or not_found / no_checkpoint), the index or not.
func TestRunLookupsAnswerAsTheScan(t *testing.T) {
	ctx := context.Background()
	ids := []string{"a", "b", "c"}
	runs := []string{"r0", "r1", "r2", "r3", "r4"}
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		s, err := Open(dir, Options{})
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }()
		for i, steps := 0, rapid.IntRange(1, 30).Draw(rt, "steps"); i < steps; i++ {
			id := rapid.SampledFrom(ids).Draw(rt, "id")
			run := rapid.SampledFrom(runs).Draw(rt, "run")
			var c session.Change
			switch rapid.IntRange(0, 8).Draw(rt, "op") {
			case 0:
				c.UpsertRuns = []session.Run{{RunID: run, Status: session.RunRunning}}
			case 1, 2:
				c.UpsertRuns = []session.Run{{RunID: run, Status: session.RunRunning}}
				c.Checkpoint = &session.LoopCheckpoint{RunID: run, Turn: int64(i + 1)}
			case 3:
				c.DropCheckpoints = []string{run}
			case 4:
				c.Replace = &session.Snapshot{Messages: []session.Value{session.Value(`"fresh"`)}}
				if rapid.Bool().Draw(rt, "with run") {
					c.Replace.Runs = []session.Run{{RunID: run, Status: session.RunCompleted}}
				}
			case 5:
				if err := s.Delete(ctx, id); err != nil && session.CodeOf(err) != session.CodeNotFound {
					rt.Fatal(err)
				}
			case 6:
				dst := rapid.SampledFrom(ids).Draw(rt, "dst")
				if _, err := s.Copy(ctx, id, dst, 0, nil); err != nil {
					switch session.CodeOf(err) {
					case session.CodeNotFound, session.CodeConflict:
					default:
						rt.Fatal(err)
					}
				}
			case 7:
				if err := s.Compact(ctx, id); err != nil && session.CodeOf(err) != session.CodeNotFound {
					rt.Fatal(err)
				}
			case 8:
				s.Close()
				if s, err = Open(dir, Options{}); err != nil {
					rt.Fatal(err)
				}
			}
			if c.UpsertRuns != nil || c.Checkpoint != nil || c.DropCheckpoints != nil || c.Replace != nil {
				if _, err := s.Commit(ctx, id, &c, session.CommitOptions{}); err != nil {
					switch session.CodeOf(err) {
					case session.CodeInvalidArgument, session.CodeNotFound, session.CodeConflict:
					default:
						rt.Fatalf("commit %d: %v", i, err)
					}
				}
			}
			for _, run := range append(runs, "never") {
				checkRunLookups(rt, s, run)
			}
		}
	})
}

// checkRunLookups compares s's answers about run with a look at every
// session's index.
func checkRunLookups(rt *rapid.T, s *Store, run string) {
	ctx := context.Background()
	var withRun, withCkpt []string
	all, err := s.allSessions()
	if err != nil {
		rt.Fatal(err)
	}
	for _, sf := range all {
		sf.mu.Lock()
		if !sf.gone && sf.sick == nil && sf.t.gen > 0 {
			if records(sf.t, run) {
				withRun = append(withRun, sf.t.sessionID)
			}
			if sf.t.ckpts[run] != nil {
				withCkpt = append(withCkpt, sf.t.sessionID)
			}
		}
		sf.mu.Unlock()
	}
	sid, err := s.FindRun(ctx, run)
	if len(withRun) == 0 && session.CodeOf(err) != session.CodeNotFound || len(withRun) > 0 && (err != nil || !slices.Contains(withRun, sid)) {
		rt.Fatalf("FindRun(%q) = %q, %v; the sessions that record it: %v", run, sid, err, withRun)
	}
	sid, err = s.CheckpointSession(ctx, run)
	if len(withCkpt) == 0 && session.CodeOf(err) != session.CodeNoCheckpoint || len(withCkpt) > 0 && (err != nil || !slices.Contains(withCkpt, sid)) {
		rt.Fatalf("CheckpointSession(%q) = %q, %v; the sessions with its checkpoint: %v", run, sid, err, withCkpt)
	}
	cp, err := s.Checkpoint(ctx, run)
	if len(withCkpt) == 0 && session.CodeOf(err) != session.CodeNoCheckpoint || len(withCkpt) > 0 && (err != nil || cp == nil || !slices.Contains(withCkpt, cp.SessionID)) {
		rt.Fatalf("Checkpoint(%q) = %+v, %v; the sessions with its checkpoint: %v", run, cp, err, withCkpt)
	}
}

// TestRunLookupsTouchOneSession checks that, once the index is built, a
// run lookup looks at the session that records the run, and at no other:
// with another session's lock held the whole time, FindRun,
// CheckpointSession and Checkpoint answer about runs begun before and after
// the index was built, and about an unknown run, without waiting on it. A
// beginRun, which checks that its new id is unused, used to lock every
// session of the workspace.
func TestRunLookupsTouchOneSession(t *testing.T) {
	ctx := context.Background()
	s := openRunStore(t)
	begin := func(id, run string) { beginRunIn(t, s, id, run) }
	for i := range 20 {
		begin(fmt.Sprintf("s%d", i), fmt.Sprintf("old%d", i))
	}
	if _, err := s.FindRun(ctx, "old0"); err != nil { // builds the index
		t.Fatal(err)
	}
	begin("s3", "new3")
	begin("fresh", "new-fresh")
	busy := s.sessions["s7"]
	busy.mu.Lock()
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			for run, want := range map[string]string{"old3": "s3", "new3": "s3", "new-fresh": "fresh", "old19": "s19"} {
				if sid, err := s.FindRun(ctx, run); err != nil || sid != want {
					return fmt.Errorf("FindRun(%q) = %q, %v; want %q", run, sid, err, want)
				}
				if sid, err := s.CheckpointSession(ctx, run); err != nil || sid != want {
					return fmt.Errorf("CheckpointSession(%q) = %q, %v; want %q", run, sid, err, want)
				}
				if cp, err := s.Checkpoint(ctx, run); err != nil || cp.SessionID != want {
					return fmt.Errorf("Checkpoint(%q) = %v; want session %q", run, err, want)
				}
			}
			if _, err := s.FindRun(ctx, "unknown"); session.CodeOf(err) != session.CodeNotFound {
				return fmt.Errorf("FindRun(unknown) = %v; want not_found", err)
			}
			return nil
		}()
	}()
	select {
	case err := <-done:
		busy.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		busy.mu.Unlock()
		<-done
		t.Fatal("run lookups waited on the lock of a session that does not record the run")
	}
}

// TestRunLookupsAfterCopies follows a run through the copies of its
// session (a copy takes the run's record, not its checkpoints): a copy
// brings the run into a second session, so the index forgets what it knew
// (a lookup after the source is deleted finds the copy), and a run two
// sessions record is looked for in every session (after one of them
// commits it again and is deleted, a lookup finds the other).
func TestRunLookupsAfterCopies(t *testing.T) {
	ctx := context.Background()
	s := openRunStore(t)
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	commit := func(id, run string) { beginRunIn(t, s, id, run) }
	find := func(run, want string) {
		t.Helper()
		if sid, err := s.FindRun(ctx, run); err != nil || sid != want {
			t.Fatalf("FindRun(%q) = %q, %v; want %q", run, sid, err, want)
		}
	}
	// A copy, then its source deleted.
	commit("a", "r")
	find("r", "a")
	_, err := s.Copy(ctx, "a", "b", 0, nil)
	step("copy", err)
	step("delete", s.Delete(ctx, "a"))
	find("r", "b")
	// The run in two sessions, committed again in one, which is deleted.
	_, err = s.Copy(ctx, "b", "c", 0, nil)
	step("copy", err)
	if sid, err := s.FindRun(ctx, "r"); err != nil || sid != "b" && sid != "c" {
		t.Fatalf("FindRun(r) = %q, %v; want b or c", sid, err)
	}
	commit("c", "r")
	step("delete", s.Delete(ctx, "c"))
	find("r", "b")
	// A copy carries no checkpoint: the one left is b's, which has none.
	if sid, err := s.CheckpointSession(ctx, "r"); session.CodeOf(err) != session.CodeNoCheckpoint {
		t.Fatalf("CheckpointSession(r) = %q, %v; want no_checkpoint", sid, err)
	}
}

// TestRunLookupsDuringCommitsAndDrops begins runs in four sessions at once,
// each looked up right after its commit with one begun earlier, while
// copies drop the index again and again and lookups of an unknown run
// rebuild it: every run is found in its session (a build that raced a
// commit or a drop must not leave a run out and call the index whole).
func TestRunLookupsDuringCommitsAndDrops(t *testing.T) {
	ctx := context.Background()
	s := openRunStore(t)
	if _, err := s.Commit(ctx, "src", &session.Change{AppendMessages: []session.Value{session.Value(`"m"`)}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 8)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				errs <- nil
				return
			default:
			}
			if _, err := s.Copy(ctx, "src", fmt.Sprintf("copy-%d", i), 0, nil); err != nil {
				errs <- err
				return
			}
			if _, err := s.FindRun(ctx, "unknown"); session.CodeOf(err) != session.CodeNotFound {
				errs <- fmt.Errorf("FindRun(unknown): %v", err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("w%d", w)
			for i := range 30 {
				run := fmt.Sprintf("w%d-r%d", w, i)
				c := session.Change{UpsertRuns: []session.Run{{RunID: run, Status: session.RunRunning}}}
				if _, err := s.Commit(ctx, id, &c, session.CommitOptions{}); err != nil {
					errs <- err
					return
				}
				for _, run := range []string{run, fmt.Sprintf("w%d-r%d", w, i/2)} {
					if sid, err := s.FindRun(ctx, run); err != nil || sid != id {
						errs <- fmt.Errorf("FindRun(%q) = %q, %v; want %q", run, sid, err, id)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	// The copier's answer (nil once stopped) comes after any worker's.
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

// openRunStore opens a store in a temp dir, closed at cleanup.
func openRunStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// beginRunIn commits run, running, with a checkpoint, to session id of s.
func beginRunIn(t *testing.T, s *Store, id, run string) {
	t.Helper()
	c := session.Change{UpsertRuns: []session.Run{{RunID: run, Status: session.RunRunning}},
		Checkpoint: &session.LoopCheckpoint{RunID: run, Turn: 1}}
	if _, err := s.Commit(context.Background(), id, &c, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRunIndexBytes reports the heap the run index takes per run, for
// 100,000 runs over 1,000 sessions, ids as the engine makes them ("run_"
// and 32 hex digits). The ids themselves are not counted: the index's keys
// share the bytes of the trackers' own.
func BenchmarkRunIndexBytes(b *testing.B) {
	const runs, sessions = 100_000, 1_000
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("run_%032x", i)
	}
	files := make([]sessionFile, sessions)
	var perRun float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := &runIndex{of: map[string]*sessionFile{}}
		for i, id := range ids {
			x.add(&files[i%sessions], id)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perRun = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / runs
		runtime.KeepAlive(x)
	}
	b.ReportMetric(perRun, "B/run")
}

// TestSickListHoldsOnlyUnservedSessions damages a session's log and
// repairs it, again and again, then damages and deletes it: the list of
// sessions the store does not serve, which run lookups ask, must hold the
// damaged session once while it is damaged and let it go once a repair
// replaced it or a delete removed it, so that it keeps no index of a log
// that is gone however often a session is damaged.
func TestSickListHoldsOnlyUnservedSessions(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit := func(i int) {
		t.Helper()
		c := &session.Change{
			AppendMessages: []session.Value{session.Value(fmt.Sprintf(`"m%d"`, i))},
			UpsertRuns:     []session.Run{{RunID: "run", Status: session.RunRunning}},
		}
		if _, err := s.Commit(ctx, "k", c, session.CommitOptions{}); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	sick := func() int {
		t.Helper()
		return len(s.runs.sickFiles())
	}
	// damage flips a byte inside the last commit of k's log and has
	// Verify find it.
	damage := func() {
		t.Helper()
		s.mu.Lock()
		sf := s.sessions["k"]
		s.mu.Unlock()
		sf.mu.Lock()
		path, end := sf.path, sf.size
		sf.mu.Unlock()
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, end-3); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0xff
		if _, err := f.WriteAt(b, end-3); err != nil {
			t.Fatal(err)
		}
		f.Close()
		rep, err := s.Verify(ctx)
		if err != nil || rep.OK {
			t.Fatalf("verify after damage: %v %+v", err, rep)
		}
	}
	for i := 1; i <= 3; i++ {
		commit(2 * i)
		commit(2*i + 1)
		damage()
		if n := sick(); n != 1 {
			t.Fatalf("round %d: %d sessions on the sick list with one damaged, want 1", i, n)
		}
		// Verify again: the same session is not listed twice.
		if _, err := s.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		if n := sick(); n != 1 {
			t.Fatalf("round %d: %d sessions on the sick list after a second verify, want 1", i, n)
		}
		if _, err := s.FindRun(ctx, "run"); session.CodeOf(err) != session.CodeCorrupt {
			t.Fatalf("round %d: find run in the damaged session: %v, want code corrupt", i, err)
		}
		rep, err := s.Repair(ctx, session.RepairRequest{SessionID: "k", Apply: true})
		if err != nil || !rep.Applied {
			t.Fatalf("round %d: repair: %v %+v", i, err, rep)
		}
		if n := sick(); n != 0 {
			t.Fatalf("round %d: %d sessions on the sick list after the repair, want 0", i, n)
		}
		if sid, err := s.FindRun(ctx, "run"); err != nil || sid != "k" {
			t.Fatalf("round %d: find run after the repair: %q, %v", i, sid, err)
		}
	}
	commit(100)
	damage()
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatalf("delete the damaged session: %v", err)
	}
	if n := sick(); n != 0 {
		t.Fatalf("%d sessions on the sick list after the damaged one was deleted, want 0", n)
	}
	if _, err := s.FindRun(ctx, "run"); session.CodeOf(err) != session.CodeNotFound {
		t.Fatalf("find run after the delete: %v, want not_found", err)
	}
}
