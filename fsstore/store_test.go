package fsstore_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/session/storetest"
)

func openT(t *testing.T, dir string, opts fsstore.Options) *fsstore.Store {
	t.Helper()
	s, err := fsstore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// allocated runs fn and returns the bytes of heap it allocated.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

func TestLayoutAndPermissions(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{})
	if _, err := s.Commit(bg, "p", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStep(bg, "w", "", session.StepRecord{StepID: "a", Identity: "i"}); err != nil {
		t.Fatal(err)
	}
	gi, err := os.ReadFile(filepath.Join(dir, ".cairn", ".gitignore"))
	if err != nil || string(gi) != "*\n" {
		t.Fatalf(".gitignore = %q, %v", gi, err)
	}
	err = filepath.Walk(filepath.Join(dir, ".cairn"), func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			return fmt.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTightensExistingDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".cairn"), 0o755); err != nil {
		t.Fatal(err)
	}
	openT(t, dir, fsstore.Options{})
	fi, _ := os.Stat(filepath.Join(dir, ".cairn"))
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf(".cairn mode %v", fi.Mode().Perm())
	}
}

func TestRefusesSymlinks(t *testing.T) {
	outside := t.TempDir()
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{".cairn is a link", func(t *testing.T, dir string) {
			must(t, os.Symlink(outside, filepath.Join(dir, ".cairn")))
		}},
		{"sessions is a link", func(t *testing.T, dir string) {
			must(t, os.MkdirAll(filepath.Join(dir, ".cairn"), 0o700))
			must(t, os.Symlink(outside, filepath.Join(dir, ".cairn", "sessions")))
		}},
		{"LOCK is a link", func(t *testing.T, dir string) {
			must(t, os.MkdirAll(filepath.Join(dir, ".cairn"), 0o700))
			must(t, os.Symlink(filepath.Join(outside, "LOCK"), filepath.Join(dir, ".cairn", "LOCK")))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			s, err := fsstore.Open(dir, fsstore.Options{})
			if err == nil {
				s.Close()
				t.Fatal("opened a store through a symlink")
			}
			if entries, _ := os.ReadDir(outside); len(entries) > 1 {
				t.Fatalf("wrote outside the store: %v", entries)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestHostileIDsStayInside(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{})
	for _, id := range storetest.HostileIDs {
		if _, err := s.Commit(bg, id, &session.Change{}, session.CommitOptions{}); err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if err := s.SaveStep(bg, id, "", session.StepRecord{StepID: id, Identity: "i"}); err != nil {
			t.Fatalf("workflow %q: %v", id, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != ".cairn" {
		t.Fatalf("workspace holds %v", entries)
	}
	for _, sub := range []string{"sessions", "workflows"} {
		got, _ := os.ReadDir(filepath.Join(dir, ".cairn", sub))
		if len(got) != len(storetest.HostileIDs) {
			t.Fatalf("%s holds %d files, want %d", sub, len(got), len(storetest.HostileIDs))
		}
		for _, e := range got {
			if !e.Type().IsRegular() || len(e.Name()) > 255 || strings.HasPrefix(e.Name(), ".") {
				t.Fatalf("bad file name %q", e.Name())
			}
		}
	}
}

func TestTooLarge(t *testing.T) {
	s := openT(t, t.TempDir(), fsstore.Options{MaxCommitBytes: 64 << 10})
	big := session.Value(`"` + strings.Repeat("x", 70<<10) + `"`)
	_, err := s.Commit(bg, "t", &session.Change{AppendMessages: []session.Value{big}}, session.CommitOptions{})
	if session.CodeOf(err) != session.CodeTooLarge {
		t.Fatalf("oversized commit: %v", err)
	}
	if _, err := s.Load(bg, "t", 0); session.CodeOf(err) != session.CodeNotFound {
		t.Fatalf("oversized commit created the session: %v", err)
	}
	if _, err := s.Commit(bg, "t", &session.Change{AppendMessages: []session.Value{message(5)}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStep(bg, "w", "", session.StepRecord{StepID: "a", Identity: "i", Result: big}); session.CodeOf(err) != session.CodeTooLarge {
		t.Fatalf("oversized step: %v", err)
	}
	def := openT(t, t.TempDir(), fsstore.Options{})
	huge := session.Value(`"` + strings.Repeat("y", fsstore.DefaultMaxCommitBytes) + `"`)
	if _, err := def.Commit(bg, "t", &session.Change{AppendMessages: []session.Value{huge}}, session.CommitOptions{}); session.CodeOf(err) != session.CodeTooLarge {
		t.Fatalf("commit over the 64 MiB default: %v", err)
	}
}

// TestDeltaCostsWhatItAdds checks that a delta commit writes its new bytes
// plus a small fixed overhead, whatever the session's size.
func TestDeltaCostsWhatItAdds(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{})
	log := filepath.Join(dir, ".cairn", "sessions", "s-d.log")
	for i := 1; i <= 300; i++ {
		before, _ := os.Stat(log)
		m := message(i)
		res, err := s.Commit(bg, "d", &session.Change{AppendMessages: []session.Value{m}}, session.CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		after, _ := os.Stat(log)
		grew := after.Size()
		if before != nil {
			grew -= before.Size()
		}
		if grew != res.BytesWritten {
			t.Fatalf("commit %d: file grew %d bytes, commit reports %d", i, grew, res.BytesWritten)
		}
		if i > 1 && res.BytesWritten > int64(len(m))+128 {
			t.Fatalf("commit %d of a %d-byte message wrote %d bytes", i, len(m), res.BytesWritten)
		}
	}
}

// TestCompactionBoundsSize upserts the same records over and over and checks
// that the log stays within 2x its live data, while readers always see a
// complete generation.
func TestCompactionBoundsSize(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{CompactMinBytes: 16 << 10})
	log := filepath.Join(dir, ".cairn", "sessions", "s-c.log")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			st, err := s.Load(bg, "c", 0)
			if err != nil {
				if session.CodeOf(err) == session.CodeNotFound {
					continue
				}
				readerErr <- err
				return
			}
			g := st.Snapshot.Generation
			if g < last || len(st.Snapshot.Messages) != int(g) || st.Snapshot.Runs[0].ToolCallsCount != int64(g) {
				readerErr <- fmt.Errorf("reader saw generation %d (after %d) with %d messages and run %+v", g, last, len(st.Snapshot.Messages), st.Snapshot.Runs[0])
				return
			}
			last = g
		}
	}()
	pad := strings.Repeat("p", 2000)
	for i := 1; i <= 1500; i++ {
		_, err := s.Commit(bg, "c", &session.Change{
			AppendMessages: []session.Value{session.Value(fmt.Sprint(i))},
			UpsertRuns:     []session.Run{{RunID: "r", Status: session.RunRunning, ToolCallsCount: int64(i)}},
			Handoff:        &session.Handoff{Done: []string{pad}},
			Metadata:       map[string]session.Value{"k": session.Value(fmt.Sprintf("%q", pad))},
		}, session.CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-readerErr:
		t.Fatal(err)
	default:
	}
	// Let a compaction the last commits started finish, then measure.
	s.Close()
	s = openT(t, dir, fsstore.Options{})
	fi, _ := os.Stat(log)
	st, err := s.Load(bg, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	live := liveSize(t, st)
	if fi.Size() > 2*live+16<<10 {
		t.Fatalf("log is %d bytes for %d live bytes", fi.Size(), live)
	}
	t.Logf("log %d bytes, live about %d bytes, after 1500 commits of about 4 KB each", fi.Size(), live)
	if err := s.Compact(bg, "c"); err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(log)
	if fi2.Size() > fi.Size() || fi2.Size() > 2*live {
		t.Fatalf("explicit compaction left %d bytes (live %d)", fi2.Size(), live)
	}
	_, err = s.Load(bg, "c", 1)
	if session.CodeOf(err) != session.CodeNotFound {
		t.Fatalf("compacted-away generation: %v", err)
	}
	st2, err := s.Load(bg, "c", 0)
	if err != nil || st2.Snapshot.Generation != 1500 || len(st2.Snapshot.Messages) != 1500 {
		t.Fatalf("after compaction: %v", err)
	}
}

// liveSize approximates the live data of st by its JSON encoding.
func liveSize(t *testing.T, st *session.State) int64 {
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b))
}

func TestFutureSchemaOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{})
	for _, id := range []string{"old", "future"} {
		if _, err := s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// A newer cairn appended a record kind this build does not know.
	log := filepath.Join(dir, ".cairn", "sessions", "s-future.log")
	data, _ := os.ReadFile(log)
	must(t, appendBytes(log, fsstore.FrameForTest('Q', []byte{0xa0}, 2)))
	s2 := openT(t, dir, fsstore.Options{})
	if _, err := s2.Load(bg, "future", 0); session.CodeOf(err) != session.CodeSchemaUnsupported {
		t.Fatalf("load of a future log: %v", err)
	}
	if _, err := s2.Commit(bg, "future", &session.Change{}, session.CommitOptions{}); session.CodeOf(err) != session.CodeSchemaUnsupported {
		t.Fatalf("commit over a future log: %v", err)
	}
	after, _ := os.ReadFile(log)
	if !bytes.HasPrefix(after, data) || len(after) <= len(data) {
		t.Fatalf("the future log was modified")
	}
	if _, err := s2.Load(bg, "old", 0); err != nil {
		t.Fatalf("other sessions must stay usable: %v", err)
	}
}

func TestFinishesInterruptedDelete(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{})
	if _, err := s.Commit(bg, "gone", &session.Change{}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, s.SaveStep(bg, "owned", "gone", session.StepRecord{StepID: "a", Identity: "i"}))
	must(t, s.SaveStep(bg, "free", "", session.StepRecord{StepID: "a", Identity: "i"}))
	s.Close()
	// A crash right after the tombstone rename.
	sessions := filepath.Join(dir, ".cairn", "sessions")
	must(t, os.Rename(filepath.Join(sessions, "s-gone.log"), filepath.Join(sessions, ".del-s-gone.log")))
	s = openT(t, dir, fsstore.Options{})
	if _, err := s.Load(bg, "gone", 0); session.CodeOf(err) != session.CodeNotFound {
		t.Fatalf("deleted session: %v", err)
	}
	if _, err := s.Workflow(bg, "owned"); session.CodeOf(err) != session.CodeNotFound {
		t.Fatalf("owned workflow survived: %v", err)
	}
	if _, err := s.Workflow(bg, "free"); err != nil {
		t.Fatal(err)
	}
	noTemps(t, dir)
}

func TestConcurrentCommitsAndCAS(t *testing.T) {
	s := openT(t, t.TempDir(), fsstore.Options{})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[uint64]bool{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				cur := uint64(0)
				if sum, err := s.Stat(bg, "cas"); err == nil {
					cur = sum.Generation
				}
				res, err := s.Commit(bg, "cas", &session.Change{AppendMessages: []session.Value{session.Value(fmt.Sprint(w))}}, session.CommitOptions{ExpectGeneration: session.Expect(cur)})
				if err != nil {
					if session.CodeOf(err) != session.CodeConflict {
						t.Error(err)
					}
					continue
				}
				if res.Generation != cur+1 {
					t.Errorf("commit expecting generation %d landed at %d", cur, res.Generation)
				}
				mu.Lock()
				if won[res.Generation] {
					t.Errorf("generation %d won twice", res.Generation)
				}
				won[res.Generation] = true
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	st, err := s.Load(bg, "cas", 0)
	if err != nil {
		t.Fatal(err)
	}
	if int(st.Snapshot.Generation) != len(won) || len(st.Snapshot.Messages) != len(won) {
		t.Fatalf("%d winners but generation %d with %d messages", len(won), st.Snapshot.Generation, len(st.Snapshot.Messages))
	}
	for g := uint64(1); g <= st.Snapshot.Generation; g++ {
		if !won[g] {
			t.Fatalf("generation %d has no winner", g)
		}
	}
}

// TestConcurrentDeletesCommitsAndCompaction runs commits that keep
// triggering compaction alongside deletes, loads and workflow steps on the
// same sessions, to catch lock-order and lifetime bugs (run with -race).
func TestConcurrentDeletesCommitsAndCompaction(t *testing.T) {
	s := openT(t, t.TempDir(), fsstore.Options{CompactMinBytes: 1024})
	ids := []string{"x", "y"}
	pad := strings.Repeat("z", 1500)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 150; i++ {
				id := ids[(w+i)%len(ids)]
				var err error
				switch (w + i) % 5 {
				case 0:
					err = s.Delete(bg, id)
				case 1:
					_, err = s.Load(bg, id, 0)
				case 2:
					err = s.SaveStep(bg, "wf-"+id, id, session.StepRecord{StepID: fmt.Sprint(i), Identity: "i"})
				default:
					_, err = s.Commit(bg, id, &session.Change{
						AppendMessages: []session.Value{session.Value(fmt.Sprint(i))},
						Handoff:        &session.Handoff{Done: []string{pad}},
					}, session.CommitOptions{})
				}
				if err != nil && session.CodeOf(err) != session.CodeNotFound {
					t.Errorf("worker %d op %d: %v", w, i, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	for _, id := range ids {
		if _, err := s.Load(bg, id, 0); err != nil && session.CodeOf(err) != session.CodeNotFound {
			t.Fatal(err)
		}
	}
}

// TestHostileIDsCannotClobber puts things where hostile ids would land:
// a directory and a file at each id's own log name (before the store opens,
// and behind its back after), and the names a naive mapping of "..",
// "../x" and "/abs" would use. No id writes outside the store or replaces
// anything it did not create: each commit either saves correctly under the
// id's own name or fails naming what is in the way, and every planted file
// is intact afterwards.
func TestHostileIDsCannotClobber(t *testing.T) {
	planted := map[string]string{} // path -> content ("" for a directory)
	plant := func(t *testing.T, path, content string) {
		t.Helper()
		if content == "" {
			must(t, os.MkdirAll(path, 0o700))
			path = filepath.Join(path, "inside")
			content = "kept inside " + path
		}
		must(t, os.WriteFile(path, []byte(content), 0o600))
		planted[path] = content
	}
	for _, tc := range []struct {
		name   string
		before bool // plant before Open (else after)
		dir    bool // plant a directory (else a file)
	}{
		{"directory before open", true, true},
		{"file before open", true, false},
		{"directory after open", false, true},
		{"file after open", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(planted)
			ws := filepath.Join(t.TempDir(), "ws")
			state := filepath.Join(ws, ".cairn")
			for _, sub := range []string{"sessions", "workflows"} {
				must(t, os.MkdirAll(filepath.Join(state, sub), 0o700))
			}
			// Where a naive id-to-path mapping would write.
			plant(t, filepath.Join(state, "sessions", "s-.."), "")
			plant(t, filepath.Join(state, "workflows", "s-.."), "naive")
			for _, p := range []string{filepath.Join(state, "x"), filepath.Join(ws, "x"), filepath.Join(ws, "b")} {
				plant(t, p, "naive "+p)
			}
			inTheWay := func() {
				for _, id := range storetest.HostileIDs {
					for _, sub := range []string{"sessions", "workflows"} {
						p := filepath.Join(state, sub, fsstore.FileNameForTest(id))
						if tc.dir {
							plant(t, p, "")
						} else {
							plant(t, p, "not a log of "+id)
						}
					}
				}
			}
			if tc.before {
				inTheWay()
			}
			s := openT(t, ws, fsstore.Options{})
			if !tc.before {
				inTheWay()
			}
			for _, id := range storetest.HostileIDs {
				if _, err := s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{session.Value(`"m"`)}}, session.CommitOptions{}); err == nil {
					t.Errorf("commit of %q saved over what was in the way", id)
				} else if !strings.Contains(err.Error(), fsstore.FileNameForTest(id)) {
					t.Errorf("commit of %q: %v does not name its log", id, err)
				}
				if err := s.SaveStep(bg, id, "", session.StepRecord{StepID: "x", Identity: "i"}); err == nil {
					t.Errorf("step of workflow %q saved over what was in the way", id)
				}
			}
			// Ids whose names nothing blocks save, and stay inside.
			for _, id := range []string{"..x", "../../x", "s-..", "x"} {
				if _, err := s.Commit(bg, id, &session.Change{}, session.CommitOptions{}); err != nil {
					t.Fatalf("commit of %q: %v", id, err)
				}
			}
			must(t, s.Close())
			for path, want := range planted {
				if got, err := os.ReadFile(path); err != nil || string(got) != want {
					t.Errorf("%s now holds %q (%v), planted %q", path, got, err, want)
				}
			}
			entries, _ := os.ReadDir(ws)
			if len(entries) != 3 { // .cairn, x, b
				t.Errorf("workspace holds %d entries, want the 3 planted", len(entries))
			}
			s = openT(t, ws, fsstore.Options{})
			list, err := s.List(bg)
			must(t, err)
			// What was planted at a log's name is listed as not served
			// (not a cairn log, or not a file), never read as a session.
			served := 0
			for _, sum := range list {
				if sum.State == "" {
					served++
				}
			}
			if served != 4 || len(list) != 4+len(storetest.HostileIDs) {
				t.Errorf("store lists %d sessions, %d served; want the 4 that had room served and the %d in the way listed as not served", len(list), served, len(storetest.HostileIDs))
			}
		})
	}
}
