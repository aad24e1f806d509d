package fsstore_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// A damage is applied to a whole log's bytes; span is the commit it aims
// at ([start, commit record start, end]). It returns the new bytes and the
// damaged range [lo, hi).
type damage struct {
	name string
	do   func(data []byte, span [3]int64) (out []byte, lo, hi int64)
}

var damages = []damage{
	{"flip a bit", func(data []byte, sp [3]int64) ([]byte, int64, int64) {
		at := (sp[0] + sp[1]) / 2
		data[at] ^= 0x10
		return data, at, at + 1
	}},
	{"zero a sector", func(data []byte, sp [3]int64) ([]byte, int64, int64) {
		lo := ((sp[0] + sp[1]) / 2) &^ 511
		hi := min(lo+512, int64(len(data)))
		clear(data[lo:hi])
		return data, lo, hi
	}},
	{"duplicate a record", func(data []byte, sp [3]int64) ([]byte, int64, int64) {
		// The commit's first record, again, right after itself.
		n := int64(data[sp[0]]) | int64(data[sp[0]+1])<<8 | int64(data[sp[0]+2])<<16 | int64(data[sp[0]+3])<<24
		rec := append([]byte{}, data[sp[0]:sp[0]+9+n]...)
		at := sp[0] + 9 + n
		out := append(append(append([]byte{}, data[:at]...), rec...), data[at:]...)
		return out, at, at
	}},
}

// outcome is what Open must make of a log whose commits are spans after
// damage to [lo, hi): good is how many commits end before the damage, and
// corrupt says whether an intact commit record follows it (otherwise the
// damage is a torn tail, trimmed).
func outcome(spans [][3]int64, lo, hi int64) (good int, corrupt bool) {
	for _, sp := range spans {
		if sp[2] <= lo {
			good++
		}
		if sp[1] >= hi && sp[2] > lo {
			corrupt = true
		}
	}
	return good, corrupt
}

func buildSession(t *testing.T, commits int) (dir string, data []byte) {
	t.Helper()
	dir = t.TempDir()
	// No compaction: the test damages commits it can find.
	s, err := fsstore.Open(dir, fsstore.Options{CompactMinBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= commits; i++ {
		if _, err := s.Commit(bg, "k", &session.Change{
			AppendMessages: []session.Value{message(i)},
			UpsertRuns:     []session.Run{{RunID: "run", Status: session.RunRunning, ToolCallsCount: int64(i)}},
			Handoff:        handoffFor(i),
			Checkpoint:     ckptFor(i),
		}, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(bg, "other", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, s.Close())
	data, err = os.ReadFile(filepath.Join(dir, ".cairn", "sessions", "s-k.log"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, data
}

// TestDamagedSessionLog damages the first, a middle and the last commit of
// a 100-commit session log in three ways, and checks the documented
// outcome: damage followed by an intact commit is corrupt (no byte is
// destroyed, the session is listed and refused with corrupt, every other
// session is served, verify reports it, repair keeps the intact prefix
// and the original bytes); damage that reaches the last commit record is a
// torn tail (trimmed, its bytes kept in quarantine).
func TestDamagedSessionLog(t *testing.T) {
	const commits = 100
	for _, d := range damages {
		for _, where := range []struct {
			name string
			i    int
		}{{"first", 0}, {"tenth", 9}, {"last", commits - 1}} {
			t.Run(d.name+" in the "+where.name+" commit", func(t *testing.T) {
				dir, data := buildSession(t, commits)
				spans := fsstore.CommitsForTest(data)
				if len(spans) != commits {
					t.Fatalf("%d commits in the log, want %d", len(spans), commits)
				}
				log := filepath.Join(dir, ".cairn", "sessions", "s-k.log")
				damaged, lo, hi := d.do(data, spans[where.i])
				must(t, os.WriteFile(log, damaged, 0o600))
				good, corrupt := outcome(spans, lo, hi)
				t.Logf("damage at [%d, %d): %d good commits, corrupt=%v", lo, hi, good, corrupt)
				// Repair keeps the intact prefix and every intact commit
				// that continues it: after a duplicated record, that is
				// every commit.
				keep := uint64(good)
				if lo == hi {
					keep = commits
				}
				if corrupt {
					checkCorruptSession(t, dir, log, damaged, uint64(good), keep, spans)
				} else {
					checkTornSession(t, dir, log, damaged, uint64(good), spans)
				}
			})
		}
	}
}

// TestTornTailKept checks that a torn tail (an interrupted last write, or
// damage that reaches the last commit record, which cannot be told apart
// from one) is still trimmed silently, and that its bytes are kept in
// quarantine.
func TestTornTailKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(data []byte, last [3]int64) []byte
	}{
		{"cut inside the last commit", func(data []byte, last [3]int64) []byte { return data[:(last[0]+last[1])/2] }},
		{"flip a bit in the last commit record", func(data []byte, last [3]int64) []byte {
			data[last[2]-3] ^= 0x10
			return data
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, data := buildSession(t, 10)
			spans := fsstore.CommitsForTest(data)
			log := filepath.Join(dir, ".cairn", "sessions", "s-k.log")
			damaged := tc.do(data, spans[9])
			must(t, os.WriteFile(log, damaged, 0o600))
			checkTornSession(t, dir, log, damaged, 9, spans)
		})
	}
}

func checkCorruptSession(t *testing.T, dir, log string, damaged []byte, good, keep uint64, spans [][3]int64) {
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatalf("open with one damaged log: %v", err)
	}
	defer s.Close()
	if now, _ := os.ReadFile(log); !bytes.Equal(now, damaged) {
		t.Fatalf("open changed the damaged log (%d bytes, was %d)", len(now), len(damaged))
	}
	list, err := s.List(bg)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %+v", err, list)
	}
	if k := list[0]; k.SessionID != "k" || k.State != fsstore.StateCorrupt || k.Generation != good || !strings.Contains(k.Problem, "cairn repair k") {
		t.Fatalf("list shows the damaged session as %+v, want state corrupt at generation %d", k, good)
	}
	if o := list[1]; o.SessionID != "other" || o.State != "" {
		t.Fatalf("list shows the healthy session as %+v", o)
	}
	for what, err := range map[string]error{
		"load":     second(s.Load(bg, "k", 0)),
		"head":     third(s.Head(bg, "k")),
		"commit":   second(s.Commit(bg, "k", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})),
		"messages": second(s.Messages(bg, "k", session.Query{Tail: 1})),
		"find run": second(s.FindRun(bg, "run")),
	} {
		if session.CodeOf(err) != session.CodeCorrupt {
			t.Errorf("%s of the damaged session: %v, want code corrupt", what, err)
		}
	}
	if _, err := s.Commit(bg, "other", &session.Change{AppendMessages: []session.Value{message(2)}}, session.CommitOptions{}); err != nil {
		t.Fatalf("commit to another session: %v", err)
	}
	rep, err := s.Verify(bg)
	if err != nil || rep.OK || len(rep.Problems) != 1 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	wantAt := int64(8)
	if good > 0 {
		wantAt = spans[good-1][2]
	}
	if p := rep.Problems[0]; p.ID != "k" || p.State != fsstore.StateCorrupt || p.Offset != wantAt || p.Generation != good {
		t.Fatalf("verify reports %+v, want k corrupt at byte %d, generation %d", p, wantAt, good)
	}

	plan, err := s.Repair(bg, session.RepairRequest{SessionID: "k"})
	if err != nil || plan.Applied || plan.Generation != keep || plan.KeptBytes+plan.LostBytes != int64(len(damaged)) {
		t.Fatalf("repair plan: %v %+v", err, plan)
	}
	if now, _ := os.ReadFile(log); !bytes.Equal(now, damaged) {
		t.Fatal("a repair without apply wrote to the log")
	}
	done, err := s.Repair(bg, session.RepairRequest{SessionID: "k", Apply: true})
	if err != nil || !done.Applied {
		t.Fatalf("repair: %v %+v", err, done)
	}
	if kept, _ := os.ReadFile(done.Quarantine); !bytes.Equal(kept, damaged) {
		t.Fatalf("quarantine %s does not hold the original bytes", done.Quarantine)
	}
	if keep == 0 {
		if _, err := os.Stat(log); !os.IsNotExist(err) {
			t.Fatalf("nothing could be kept, but the log is still there: %v", err)
		}
		if _, err := s.Load(bg, "k", 0); session.CodeOf(err) != session.CodeNotFound {
			t.Fatalf("load after a repair that kept nothing: %v", err)
		}
		return
	}
	// The run the repaired log holds is found again (the lookup above
	// found it in no served session).
	if sid, err := s.FindRun(bg, "run"); err != nil || sid != "k" {
		t.Fatalf("find run after repair: %q, %v", sid, err)
	}
	res, err := s.Commit(bg, "k", &session.Change{
		AppendMessages: []session.Value{message(int(keep) + 1)},
		UpsertRuns:     []session.Run{{RunID: "run", Status: session.RunRunning, ToolCallsCount: int64(keep) + 1}},
		Handoff:        handoffFor(int(keep) + 1),
		Checkpoint:     ckptFor(int(keep) + 1),
	}, session.CommitOptions{})
	if err != nil || res.Generation != keep+1 {
		t.Fatalf("commit after repair: %+v %v", res, err)
	}
	must(t, s.Close())
	if got := checkSession(t, dir, keep+1); got != keep+1 {
		t.Fatalf("after repair and a commit the session is at %d, want %d", got, keep+1)
	}
}

func checkTornSession(t *testing.T, dir, log string, damaged []byte, good uint64, spans [][3]int64) {
	if got := checkSession(t, dir, good); got != good {
		t.Fatalf("torn tail: recovered generation %d, want %d", got, good)
	}
	end := spans[good-1][2]
	q, _ := filepath.Glob(filepath.Join(dir, ".cairn", "quarantine", fmt.Sprintf("s-k.log.*.tail-at-%d", end)))
	if len(q) != 1 {
		t.Fatalf("torn tail: quarantine holds %v, want the trimmed tail", q)
	}
	if kept, _ := os.ReadFile(q[0]); !bytes.Equal(kept, damaged[end:]) {
		t.Fatal("torn tail: the bytes kept in quarantine are not the trimmed tail")
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

func step(i int) session.StepRecord {
	return session.StepRecord{StepID: fmt.Sprintf("step-%02d", i), Identity: "v1", Result: session.Value(fmt.Sprintf(`{"n":%d}`, i))}
}

func buildWorkflow(t *testing.T, steps int) (dir string, data []byte) {
	t.Helper()
	dir = t.TempDir()
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, second(s.Commit(bg, "k2", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})))
	for i := 1; i <= steps; i++ {
		must(t, s.SaveStep(bg, "w", "k2", step(i)))
	}
	must(t, s.SaveStep(bg, "w2", "k2", step(1)))
	must(t, s.Close())
	data, err = os.ReadFile(filepath.Join(dir, ".cairn", "workflows", "s-w.log"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, data
}

func stepIDs(w *session.Workflow) []string {
	out := []string{}
	for _, st := range w.Steps {
		out = append(out, st.StepID)
	}
	return out
}

// TestDamagedWorkflowLog damages the first, a middle and the last commit of
// a 20-step workflow log in three ways. Damage followed by an intact commit
// is corrupt: the workflow is refused (so no completed step runs again by
// mistake), its bytes are untouched, other workflows are served, verify
// reports it, and repair keeps every intact step. Damage that reaches the
// last commit record is a torn tail, trimmed with its bytes kept.
func TestDamagedWorkflowLog(t *testing.T) {
	const steps = 20
	for _, d := range damages {
		for _, where := range []struct {
			name string
			i    int
		}{{"first", 0}, {"tenth", 9}, {"last", steps - 1}} {
			t.Run(d.name+" in the "+where.name+" commit", func(t *testing.T) {
				dir, data := buildWorkflow(t, steps)
				spans := fsstore.CommitsForTest(data)
				if len(spans) != steps {
					t.Fatalf("%d commits in the log, want %d", len(spans), steps)
				}
				log := filepath.Join(dir, ".cairn", "workflows", "s-w.log")
				damaged, lo, hi := d.do(data, spans[where.i])
				must(t, os.WriteFile(log, damaged, 0o600))
				good, corrupt := outcome(spans, lo, hi)
				// Repair keeps every commit the damage does not touch. A
				// duplicated record touches none: the commit record still
				// counts the records before it, and those are the
				// original ones, so that commit is proven intact.
				var kept []string
				for i, sp := range spans {
					if lo == hi || sp[2] <= lo || sp[0] >= hi {
						kept = append(kept, step(i+1).StepID)
					}
				}
				t.Logf("damage at [%d, %d): %d good commits, corrupt=%v, intact steps %v", lo, hi, good, corrupt, kept)

				s, err := fsstore.Open(dir, fsstore.Options{})
				if err != nil {
					t.Fatalf("open with one damaged workflow log: %v", err)
				}
				defer s.Close()
				if !corrupt {
					w, err := s.Workflow(bg, "w")
					if err != nil || fmt.Sprint(stepIDs(w)) != fmt.Sprint(kept[:good]) {
						t.Fatalf("torn tail: workflow %v %v, want steps %v", w, err, kept[:good])
					}
					return
				}
				if now, _ := os.ReadFile(log); !bytes.Equal(now, damaged) {
					t.Fatal("open changed the damaged workflow log")
				}
				calls := map[string]error{
					"workflow":  second(s.Workflow(bg, "w")),
					"save step": s.SaveStep(bg, "w", "k2", step(99)),
				}
				if lo > spans[0][1] {
					// The owner record is intact, so the owner's export
					// cannot silently leave the workflow out.
					calls["workflows of the owner"] = second(s.Workflows(bg, "k2"))
				}
				for what, err := range calls {
					if session.CodeOf(err) != session.CodeCorrupt {
						t.Errorf("%s: %v, want code corrupt", what, err)
					}
				}
				if w2, err := s.Workflow(bg, "w2"); err != nil || len(w2.Steps) != 1 {
					t.Fatalf("another workflow: %v %v", w2, err)
				}
				rep, err := s.Verify(bg)
				if err != nil || rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != "workflow" || rep.Problems[0].ID != "w" {
					t.Fatalf("verify: %v %+v", err, rep)
				}
				plan, err := s.Repair(bg, session.RepairRequest{WorkflowID: "w"})
				if err != nil || plan.Applied || fmt.Sprint(plan.Steps) != fmt.Sprint(kept) {
					t.Fatalf("repair plan: %v %+v, want steps %v", err, plan, kept)
				}
				done, err := s.Repair(bg, session.RepairRequest{WorkflowID: "w", Apply: true})
				if err != nil || !done.Applied {
					t.Fatalf("repair: %v %+v", err, done)
				}
				if q, _ := os.ReadFile(done.Quarantine); !bytes.Equal(q, damaged) {
					t.Fatal("quarantine does not hold the original bytes")
				}
				w, err := s.Workflow(bg, "w")
				if err != nil || fmt.Sprint(stepIDs(w)) != fmt.Sprint(kept) {
					t.Fatalf("after repair: %v %v, want steps %v", w, err, kept)
				}
				must(t, s.SaveStep(bg, "w", "k2", step(99)))
				must(t, s.Close())
				s2, err := fsstore.Open(dir, fsstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer s2.Close()
				w, err = s2.Workflow(bg, "w")
				if err != nil || fmt.Sprint(stepIDs(w)) != fmt.Sprint(append(kept, step(99).StepID)) {
					t.Fatalf("after reopen: %v %v", w, err)
				}
			})
		}
	}
}

// TestVerifyFindsDamageSinceOpen: bit rot in a log the store has open is
// found by Verify, which stops serving that session (and only it); a
// repair then puts the intact prefix back in service without a reopen.
func TestVerifyFindsDamageSinceOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := fsstore.Open(dir, fsstore.Options{CompactMinBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 1; i <= 10; i++ {
		must(t, second(s.Commit(bg, "k", &session.Change{
			AppendMessages: []session.Value{message(i)},
			UpsertRuns:     []session.Run{{RunID: "run", Status: session.RunRunning, ToolCallsCount: int64(i)}},
			Handoff:        handoffFor(i),
			Checkpoint:     ckptFor(i),
		}, session.CommitOptions{})))
	}
	must(t, second(s.Commit(bg, "other", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})))
	if rep, err := s.Verify(bg); err != nil || !rep.OK || rep.Sessions != 2 {
		t.Fatalf("verify of a healthy store: %v %+v", err, rep)
	}
	if sid, err := s.FindRun(bg, "run"); err != nil || sid != "k" {
		t.Fatalf("find run: %q, %v", sid, err)
	}
	log := filepath.Join(dir, ".cairn", "sessions", "s-k.log")
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	spans := fsstore.CommitsForTest(data)
	must(t, flip(log, (spans[4][0]+spans[4][1])/2)) // inside commit 5

	rep, err := s.Verify(bg)
	if err != nil || rep.OK || len(rep.Problems) != 1 || rep.Problems[0].ID != "k" || rep.Problems[0].Generation != 4 {
		t.Fatalf("verify after bit rot: %v %+v", err, rep)
	}
	if _, err := s.Load(bg, "k", 0); session.CodeOf(err) != session.CodeCorrupt {
		t.Fatalf("load of the rotten session: %v, want corrupt", err)
	}
	for what, err := range map[string]error{
		"find run":           second(s.FindRun(bg, "run")),
		"checkpoint session": second(s.CheckpointSession(bg, "run")),
		"checkpoint":         second(s.Checkpoint(bg, "run")),
	} {
		if session.CodeOf(err) != session.CodeCorrupt {
			t.Fatalf("%s of the rotten session: %v, want corrupt", what, err)
		}
	}
	must(t, second(s.Commit(bg, "other", &session.Change{AppendMessages: []session.Value{message(2)}}, session.CommitOptions{})))
	done, err := s.Repair(bg, session.RepairRequest{SessionID: "k", Apply: true})
	if err != nil || done.Generation != 4 {
		t.Fatalf("repair: %v %+v", err, done)
	}
	res, err := s.Commit(bg, "k", &session.Change{
		AppendMessages: []session.Value{message(5)},
		UpsertRuns:     []session.Run{{RunID: "run", Status: session.RunRunning, ToolCallsCount: 5}},
		Handoff:        handoffFor(5),
		Checkpoint:     ckptFor(5),
	}, session.CommitOptions{})
	if err != nil || res.Generation != 5 {
		t.Fatalf("commit after repair: %+v %v", res, err)
	}
	must(t, s.Close())
	if got := checkSession(t, dir, 5); got != 5 {
		t.Fatalf("reopened at %d, want 5", got)
	}
}
