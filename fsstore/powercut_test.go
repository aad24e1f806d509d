package fsstore_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/internal/vfs/crashfs"
	"github.com/cairn-dev/cairn/session"
)

// The power-cut tests run a workload on a crashfs file system, cut the
// power at every sync point of it (and keep random parts of what was not
// synced, as disks may), reopen each image with the real file system and
// check that it holds exactly what was acknowledged, or that plus the
// operation in flight, whole (crashfs.Recorder). TestPowerCutMutation then
// turns each sync the workload reaches into a no-op in turn and requires
// some cut to fail: a sync no check needs would not be tested by them.

// pcWorkflows are the workflow ids the workload uses; a world lists each
// one that exists.
var pcWorkflows = []string{"w1", "w2", "w3", "w4"}

// pcWorld describes the store at root: its .gitignore as on disk (read
// before any Open recreates it) and, through s, every session (Load, Head,
// Messages, encoded) and workflow.
func pcWorld(root string, s *fsstore.Store) (crashfs.World, error) {
	w := crashfs.World{}
	if data, err := os.ReadFile(filepath.Join(root, ".cairn", ".gitignore")); err == nil {
		w[".gitignore"] = string(data)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	list, err := s.List(bg)
	if err != nil {
		return nil, err
	}
	for _, sum := range list {
		id := sum.SessionID
		st, err := s.Load(bg, id, 0)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", id, err)
		}
		head, _, err := s.Head(bg, id)
		if err != nil {
			return nil, fmt.Errorf("head %s: %w", id, err)
		}
		msgs, err := s.Messages(bg, id, session.Query{})
		if err != nil {
			return nil, fmt.Errorf("messages %s: %w", id, err)
		}
		b, err := json.Marshal([]any{st, head, msgs, sum.Generation})
		if err != nil {
			return nil, err
		}
		w["session "+id] = string(b)
	}
	for _, id := range pcWorkflows {
		wf, err := s.Workflow(bg, id)
		if session.CodeOf(err) == session.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("workflow %s: %w", id, err)
		}
		b, _ := json.Marshal(wf)
		w["workflow "+id] = string(b)
	}
	return w, nil
}

// pcRead reopens an image with the real file system and describes it.
func pcRead(img string) (crashfs.World, error) {
	gi, giErr := os.ReadFile(filepath.Join(img, ".cairn", ".gitignore"))
	s, err := fsstore.Open(img, fsstore.Options{FS: vfs.OS})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	w, err := pcWorld(img, s)
	if err != nil {
		return nil, err
	}
	delete(w, ".gitignore")
	if giErr == nil {
		w[".gitignore"] = string(gi)
	}
	return w, nil
}

// pcClock is a deterministic clock, so every run writes the same bytes.
func pcClock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Second); return t }
}

// runPowerCut runs the workload on a fresh crashfs with site disabled
// ("" for none) and returns the sync sites reached and the failed checks.
func runPowerCut(t *testing.T, disabled string, randomCuts int, stopAtFirst bool) (sites, failures []string, cuts int) {
	return runPowerCutWith(t, 0, disabled, randomCuts, stopAtFirst)
}

// runPowerCutJournal is runPowerCut with a workspace journal small
// enough to wrap in the workload; it also opens the store without one
// first, so a journal is made for a session that exists, and commits to
// a new session a after a's delete.
func runPowerCutJournal(t *testing.T, disabled string, randomCuts int, stopAtFirst bool) (sites, failures []string, cuts int) {
	return runPowerCutWith(t, pcJournalBytes, disabled, randomCuts, stopAtFirst)
}

// pcJournalBytes is the journal of runPowerCutJournal: most of the
// workload's commits fit a quarter of it, the largest do not.
const pcJournalBytes = 8 << 10

func runPowerCutWith(t *testing.T, journal int64, disabled string, randomCuts int, stopAtFirst bool) (sites, failures []string, cuts int) {
	// Two phases: a workload on a new store, then recovery of an image
	// cut in the middle of it and more work on that.
	t.Helper()
	root, cfs := crashRoot(t)
	cfs.Disable(disabled)
	var s *fsstore.Store
	var rec *crashfs.Recorder
	live := func() (crashfs.World, error) {
		if s != nil {
			return pcWorld(root, s)
		}
		// Closed: the content is as acknowledged, the .gitignore as on disk.
		w := rec.Cur()
		delete(w, ".gitignore")
		if data, err := os.ReadFile(filepath.Join(root, ".cairn", ".gitignore")); err == nil {
			w[".gitignore"] = string(data)
		}
		return w, nil
	}
	rec = crashfs.NewRecorder(cfs, t.TempDir(), 14, pcRead, live)
	rec.RandomCuts, rec.StopAtFirst = randomCuts, stopAtFirst
	// The image phase two recovers from: the power cut during the delete
	// of a, once its tombstone is durable and before its workflow's
	// removal is.
	grab := filepath.Join(t.TempDir(), "grab")
	grabbed := false
	rec.OnCut = func(site, op string) {
		if !grabbed && op == "delete session a" && strings.Contains(site, "deleteOwnedLocked") {
			grabbed = true
			must(t, cfs.Cut(grab, crashfs.SyncedOnly, nil))
		}
	}

	landed := false
	var landErr error
	opts := fsstore.Options{
		FS: cfs, Now: pcClock(), CompactMinBytes: 1 << 40, // compaction only when asked, so the run is deterministic
	}
	opts.Fault = func(point string) error {
		// A commit lands while compaction copies (its first sync runs
		// without the session lock), so compaction must carry it over.
		if point == fsstore.FaultCompactSync && !landed && s.Stats().Compactions == 1 {
			landed = true
			landErr = commit(rec, s, "b", &session.Change{AppendMessages: []session.Value{pcMsg(40)}, UpsertRuns: []session.Run{{RunID: "rb", Status: session.RunRunning, ToolCallsCount: 2}}})
		}
		return nil
	}
	step := func(name string, fn func() error) {
		t.Helper()
		if err := rec.Op(name, fn); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	c := func(id string, ch *session.Change) {
		t.Helper()
		if err := commit(rec, s, id, ch); err != nil {
			t.Fatalf("commit to %s: %v", id, err)
		}
	}
	saveStep := func(wid, owner, stepID string) {
		t.Helper()
		step("step "+wid+"/"+stepID, func() error {
			return s.SaveStep(bg, wid, owner, session.StepRecord{StepID: stepID, Identity: "id-" + stepID, Result: json.RawMessage(`"` + stepID + `"`), CompletedAt: opts.Now()})
		})
	}

	if journal > 0 {
		step("open without a journal", func() (err error) { s, err = fsstore.Open(root, opts); return err })
		c("z", &session.Change{AppendMessages: []session.Value{pcMsg(20)}})
		step("close", func() error { err := s.Close(); s = nil; return err })
		opts.JournalBytes = journal
	}
	step("open a new store", func() (err error) { s, err = fsstore.Open(root, opts); return err })
	if journal > 0 {
		// Small enough for the journal, which must hold it by now.
		c("z", &session.Change{AppendMessages: []session.Value{session.Value(`{"z":21}`)}})
	}
	c("a", &session.Change{AppendMessages: []session.Value{pcMsg(1), pcMsg(2)}, AppendArtifacts: []session.Artifact{{ID: "art1", Data: []byte(strings.Repeat("x", 700))}}})
	c("a", &session.Change{
		AppendMessages: []session.Value{pcMsg(3)},
		PutArtifacts:   []session.Artifact{{ID: "art2", Data: []byte("second")}},
		UpsertRuns:     []session.Run{{RunID: "ra", Status: session.RunRunning, ToolCallsCount: 1}},
		Checkpoint:     &session.LoopCheckpoint{RunID: "ra", Turn: 1, State: json.RawMessage(`{"turn":1}`)},
	})
	c("b", &session.Change{AppendMessages: []session.Value{pcMsg(4)}, UpsertRuns: []session.Run{{RunID: "rb", Status: session.RunRunning, ToolCallsCount: 1}}})
	saveStep("w1", "a", "one")
	saveStep("w1", "a", "two")
	saveStep("w2", "b", "one")
	cut := int64(1)
	c("a", &session.Change{TruncateMessages: &cut, DeleteArtifacts: []string{"art1"}, Handoff: &session.Handoff{Done: []string{"x"}}})
	step("compact a", func() error { return s.Compact(bg, "a") })
	c("a", &session.Change{AppendMessages: []session.Value{pcMsg(5)}, Checkpoint: &session.LoopCheckpoint{RunID: "ra", Turn: 2, State: json.RawMessage(`{"turn":2}`)}})
	c("b", &session.Change{Handoff: &session.Handoff{Done: []string{strings.Repeat("y", 600)}}})
	step("compact b, a commit landing meanwhile", func() error { return s.Compact(bg, "b") })
	if !landed || landErr != nil {
		t.Fatalf("no commit landed during compaction of b: %v", landErr)
	}
	c("b", &session.Change{AppendMessages: []session.Value{pcMsg(6)}})
	step("delete workflow w2", func() error { return s.DeleteWorkflow(bg, "w2") })
	c("a", &session.Change{AppendMessages: []session.Value{pcMsg(7)}})
	step("delete session a", func() error { return s.Delete(bg, "a") })
	// A workflow owned by the deleted session's id, saved after the
	// delete, must not be taken for one the delete left behind.
	saveStep("w3", "a", "one")
	if journal > 0 {
		// A new log under the deleted one's name, which no frame the
		// journal held for the old one may reach.
		c("a", &session.Change{AppendMessages: []session.Value{pcMsg(22)}})
		c("a", &session.Change{AppendMessages: []session.Value{pcMsg(23)}})
	}
	c("b", &session.Change{AppendMessages: []session.Value{pcMsg(8)}})
	step("copy b to d", func() error {
		_, err := s.Copy(bg, "b", "d", 0, &session.Change{AppendMessages: []session.Value{pcMsg(9)}})
		return err
	})
	c("d", &session.Change{AppendMessages: []session.Value{pcMsg(10)}})
	c("c", &session.Change{AppendMessages: []session.Value{pcMsg(11)}})
	// Reopen a store whose .gitignore was deleted: Open writes it again.
	step("close, delete .gitignore", func() error {
		if err := s.Close(); err != nil {
			return err
		}
		s = nil
		gi := filepath.Join(root, ".cairn", ".gitignore")
		if err := cfs.Remove(gi); err != nil {
			return err
		}
		return cfs.SyncDir(filepath.Dir(gi))
	})
	step("reopen", func() (err error) { s, err = fsstore.Open(root, opts); return err })
	c("c", &session.Change{AppendMessages: []session.Value{pcMsg(12)}})
	rec.Final()
	must(t, s.Close())
	sites, failures, cuts = cfs.Sites(), rec.Failures(), rec.Cuts
	if stopAtFirst && len(failures) > 0 {
		return sites, failures, cuts
	}

	// Phase two: recovery, on crashfs too, of the image grabbed during the
	// delete, given a torn tail on b's log and a stale temp file as well;
	// then a workflow saved under the deleted session's id, and commits.
	if !grabbed {
		t.Fatal("the workload never reached the delete's workflow removal")
	}
	tornLog := litter(t, filepath.Join(grab, ".cairn", "sessions"))
	tail := []byte{200, 0, 0, 0, 1, 2, 3, 4, 5, 'p', 'a', 'r', 't'}
	fi, err := os.Stat(filepath.Join(grab, ".cairn", "sessions", tornLog))
	must(t, err)
	preTear := fi.Size() // nothing else writes that log before the tear
	probe := filepath.Join(t.TempDir(), "probe")
	must(t, os.CopyFS(probe, os.DirFS(grab)))
	before, err := pcRead(probe)
	must(t, err)
	if _, ok := before["workflow w1"]; ok {
		return sites, append(failures, "recovery of the image cut during the delete of a left its workflow w1"), cuts
	}
	root = grab
	cfs, err = crashfs.New(grab)
	must(t, err)
	cfs.Disable(disabled)
	opts.FS = cfs
	// Recovery never destroys what it moves aside: in every image, the
	// torn tail is in its log or whole in quarantine, and so is the log
	// with no intact commit; nothing in quarantine is partial.
	keptRead := func(img string) (crashfs.World, error) {
		if err := pcKept(img, tornLog, tail, preTear); err != nil {
			return nil, err
		}
		return pcRead(img)
	}
	rec = crashfs.NewRecorder(cfs, t.TempDir(), 15, keptRead, live)
	rec.RandomCuts, rec.StopAtFirst = randomCuts, stopAtFirst
	rec.SetCur(before)
	step("recover", func() (err error) { s, err = fsstore.Open(root, opts); return err })
	saveStep("w4", "a", "one")
	c("e", &session.Change{AppendMessages: []session.Value{pcMsg(13)}})
	// A torn tail, recovered by an Open of its own: the only quarantine
	// write of that recovery, so no other sync stands in for its own.
	step("close, tear "+tornLog, func() error {
		if err := s.Close(); err != nil {
			return err
		}
		s = nil
		f, err := cfs.OpenFile(filepath.Join(root, ".cairn", "sessions", tornLog), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(tail, fi.Size()); err != nil {
			return err
		}
		return f.Sync()
	})
	step("reopen after the tear", func() (err error) { s, err = fsstore.Open(root, opts); return err })
	c("b", &session.Change{AppendMessages: []session.Value{pcMsg(14)}})
	c("b", &session.Change{AppendMessages: []session.Value{pcMsg(15)}})
	rec.Final()
	must(t, s.Close())
	for _, site := range cfs.Sites() {
		if !slices.Contains(sites, site) {
			sites = append(sites, site)
		}
	}
	return sites, append(failures, rec.Failures()...), cuts + rec.Cuts
}

// pcNoCommit is a session log with no intact commit, which recovery moves
// to quarantine.
const pcNoCommit = fsstore.LogMagicForTest + "\x05\x00\x00\x00junk"

// pcKept checks, in the image img as the cut left it, that what recovery
// moves aside is never lost: once the log tornLog has grown past preTear
// (the tail was added, or trimmed and later commits appended), tail is at
// its end or is a whole file in quarantine; pcNoCommit is still in
// sessions/ or is; and every file in quarantine is one of them, whole.
func pcKept(img, tornLog string, tail []byte, preTear int64) error {
	sessions, q := filepath.Join(img, ".cairn", "sessions"), filepath.Join(img, ".cairn", "quarantine")
	kept := map[string]bool{}
	entries, err := os.ReadDir(q)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(q, e.Name()))
		if err != nil {
			return err
		}
		if string(data) != string(tail) && string(data) != pcNoCommit {
			return fmt.Errorf("quarantine holds %s, which is not whole (%d bytes)", e.Name(), len(data))
		}
		kept[string(data)] = true
	}
	logData, err := os.ReadFile(filepath.Join(sessions, tornLog))
	if err != nil {
		return err
	}
	if int64(len(logData)) > preTear && !kept[string(tail)] && !bytes.HasSuffix(logData, tail) {
		return fmt.Errorf("the torn tail of %s was trimmed but is not in quarantine", tornLog)
	}
	if _, err := os.Stat(filepath.Join(sessions, "s-nocommit.log")); errors.Is(err, os.ErrNotExist) && !kept[pcNoCommit] {
		return fmt.Errorf("the log with no intact commit left sessions/ but is not in quarantine")
	}
	return nil
}

// litter leaves in dir a stale temp file, as a crash in the middle of a
// create would, and a log with no intact commit. It returns the name of a
// session log there, for a later tear.
func litter(t *testing.T, dir string) (name string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") && !strings.HasPrefix(e.Name(), ".") {
			name = e.Name()
			break
		}
	}
	if name == "" {
		t.Fatalf("no session log in %s", dir)
	}
	must(t, os.WriteFile(filepath.Join(dir, atomicfile.TempPrefix+"stale"), []byte("half"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "s-nocommit.log"), []byte(pcNoCommit), 0o600))
	return name
}

// crashRoot makes an empty workspace directory and a crashfs over it.
func crashRoot(t *testing.T) (string, *crashfs.FS) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ws")
	must(t, os.Mkdir(root, 0o700))
	cfs, err := crashfs.New(root)
	must(t, err)
	return root, cfs
}

// commit is one acknowledged commit, as an operation of rec.
func commit(rec *crashfs.Recorder, s *fsstore.Store, id string, c *session.Change) error {
	return rec.Op("commit to "+id, func() error {
		_, err := s.Commit(bg, id, c, session.CommitOptions{})
		return err
	})
}

// pcMsg is a small message whose size crosses a few sectors.
func pcMsg(i int) session.Value {
	return session.Value(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat(string(rune('a'+i%26)), 300+i*97)))
}

// TestPowerCut checks every power cut of the workload, with the random
// images too.
func TestPowerCut(t *testing.T) {
	if sites := crashfs.Check(t, runPowerCut); len(sites) < 10 {
		t.Fatalf("the workload reaches only %d sync sites: %q", len(sites), sites)
	}
}

// TestPowerCutMutation disables each sync site the workload reaches, in
// turn, and requires some power cut to lose or half-show something: every
// sync is needed for the guarantees.
func TestPowerCutMutation(t *testing.T) {
	crashfs.Mutate(t, runPowerCut)
}
