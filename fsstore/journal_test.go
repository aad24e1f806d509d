package fsstore_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs/crashfs"
	"github.com/cairn-dev/cairn/session"
)

// TestPowerCutJournal checks every power cut of the workload with the
// workspace journal on: commits made durable by the journal's flush, its
// checkpoints when it wraps, the checkpoint before a delete and a
// compaction, a journal made for a store that has sessions.
func TestPowerCutJournal(t *testing.T) {
	crashfs.Check(t, runPowerCutJournal)
}

// TestPowerCutJournalMutation requires every sync the journal workload
// reaches.
func TestPowerCutJournalMutation(t *testing.T) {
	crashfs.Mutate(t, runPowerCutJournal)
}

// runJournalReplay makes an image a power cut leaves with commits in the
// journal that their logs lack (the logs were never fdatasynced), then
// checks every power cut of its recovery (the replay) and of what comes
// after: the delete of a replayed session, a new one under its name, more
// commits, a close.
func runJournalReplay(t *testing.T, disabled string, randomCuts int, stopAtFirst bool) (sites, failures []string, cuts int) {
	t.Helper()
	opts := fsstore.Options{Now: pcClock(), CompactMinBytes: 1 << 40, JournalBytes: 64 << 10}
	img, _, want := journalImage(t, opts, []string{"a", "b"}, 6)

	cfs, err := crashfs.New(img)
	must(t, err)
	cfs.Disable(disabled)
	opts.FS = cfs
	var s *fsstore.Store
	live := func() (crashfs.World, error) {
		if s == nil {
			return nil, errors.New("closed")
		}
		w, err := pcWorld(img, s)
		delete(w, ".gitignore")
		return w, err
	}
	read := func(dir string) (crashfs.World, error) {
		w, err := pcRead(dir)
		delete(w, ".gitignore")
		return w, err
	}
	delete(want, ".gitignore")
	rec := crashfs.NewRecorder(cfs, t.TempDir(), 16, read, live)
	rec.RandomCuts, rec.StopAtFirst = randomCuts, stopAtFirst
	rec.SetCur(want)
	step := func(name string, fn func() error) {
		t.Helper()
		if err := rec.Op(name, fn); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	step("recover", func() (err error) { s, err = fsstore.Open(img, opts); return err })
	if got := s.Stats().JournalReplayed; got < 10 {
		t.Fatalf("recovery replayed %d commits from the journal, want the 10 or more it holds", got)
	}
	step("delete a", func() error { return s.Delete(bg, "a") })
	must(t, commit(rec, s, "a", &session.Change{AppendMessages: []session.Value{pcMsg(30)}}))
	must(t, commit(rec, s, "b", &session.Change{AppendMessages: []session.Value{pcMsg(31)}}))
	rec.Final()
	must(t, s.Close())
	s = nil
	return cfs.Sites(), rec.Failures(), rec.Cuts
}

// TestJournalReplayPowerCut checks the recovery of commits only the
// journal held, at every power cut of it and after.
func TestJournalReplayPowerCut(t *testing.T) {
	crashfs.Check(t, runJournalReplay)
}

// TestJournalReplayPowerCutMutation requires every sync of the replay:
// its logs' and its new epoch's (TestPowerCutJournalMutation requires the
// others, which this workload need not).
func TestJournalReplayPowerCutMutation(t *testing.T) {
	replay := func(site string) bool { return strings.Contains(site, "(*journal).replay") }
	if n := crashfs.MutateOnly(t, runJournalReplay, replay); n != 2 {
		t.Fatalf("the replay reached %d sync sites, want 2 (its logs', its new epoch's)", n)
	}
}

// TestJournalGroupCommitPowerCut commits from many goroutines at once to
// sessions of their own, so that commits share the journal's flushes,
// and cuts the power while they run: every commit acknowledged before a
// cut began is in its image, whole.
func TestJournalGroupCommitPowerCut(t *testing.T) {
	root, cfs := crashRoot(t)
	const writers, turns = 8, 60
	// The first flush waits until every writer has written its log and
	// is about to queue, so at least the next one is shared.
	var written atomic.Int32
	var first sync.Once
	fault := func(point string) error {
		switch point {
		case fsstore.FaultCommitSync:
			written.Add(1)
		case fsstore.FaultJournalSync:
			first.Do(func() {
				for deadline := time.Now().Add(5 * time.Second); written.Load() < writers && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			})
		}
		return nil
	}
	// Small, so the run wraps it and checkpoints too.
	s, err := fsstore.Open(root, fsstore.Options{FS: cfs, JournalBytes: 32 << 10, Fault: fault})
	must(t, err)
	var mu sync.Mutex
	acked := map[string]int{} // session -> messages acknowledged
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("s%d", w)
			for i := range turns {
				msg := session.Value(fmt.Sprintf(`{"w":%d,"i":%d,"pad":%q}`, w, i, strings.Repeat("p", 200+(w*37+i*11)%900)))
				if _, err := s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{msg}}, session.CommitOptions{}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked[id] = i + 1
				mu.Unlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(7, 11))
	type image struct {
		dir   string
		acked map[string]int
	}
	var images []image
	for i := 0; ; i++ {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Duration(rng.IntN(3000)) * time.Microsecond):
		}
		mu.Lock()
		before := maps.Clone(acked)
		mu.Unlock()
		dir := filepath.Join(t.TempDir(), fmt.Sprint("img", i))
		mode := crashfs.SyncedOnly
		if i%2 == 1 {
			mode = crashfs.Random
		}
		must(t, cfs.Cut(dir, mode, rng))
		images = append(images, image{dir, before})
		select {
		case <-done:
		default:
			if i < 200 {
				continue
			}
			wg.Wait()
		}
		break
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := s.Stats()
	must(t, s.Close())
	if st.Journaled != writers*(turns-1) || st.JournalFlushes >= st.Journaled || st.JournalCheckpoints == 0 {
		t.Fatalf("stats %+v: want %d commits journaled in fewer flushes, and a checkpoint", st, writers*(turns-1))
	}
	t.Logf("%d commits journaled in %d flushes, %d checkpoints; %d images", st.Journaled, st.JournalFlushes, st.JournalCheckpoints, len(images))
	for _, img := range images {
		r, err := fsstore.Open(img.dir, fsstore.Options{})
		must(t, err)
		for w := range writers {
			id := fmt.Sprintf("s%d", w)
			msgs, err := r.Messages(bg, id, session.Query{})
			if session.CodeOf(err) == session.CodeNotFound && img.acked[id] == 0 {
				continue
			}
			must(t, err)
			if len(msgs.Items) < img.acked[id] {
				t.Errorf("%s: %s holds %d messages, %d were acknowledged before the cut", img.dir, id, len(msgs.Items), img.acked[id])
			}
			for i, m := range msgs.Items {
				if !strings.HasPrefix(string(m), fmt.Sprintf(`{"w":%d,"i":%d,`, w, i)) {
					t.Errorf("%s: %s message %d is %.40s", img.dir, id, i, m)
				}
			}
		}
		must(t, r.Close())
	}
}

// TestJournalFailureRefusesCommits fails the journal's fdatasync once:
// the commits of that flush fail and are rolled back, later ones are
// refused until the store is reopened, and the reopened store holds every
// acknowledged commit.
func TestJournalFailureRefusesCommits(t *testing.T) {
	root := t.TempDir()
	opts, fail := failingAt(fsstore.FaultJournalSync, fsstore.Options{JournalBytes: 64 << 10})
	s, err := fsstore.Open(root, opts)
	must(t, err)
	c := func(i int) error {
		_, err := s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{pcMsg(i)}}, session.CommitOptions{})
		return err
	}
	must(t, c(1))
	must(t, c(2))
	fail.Store(true)
	if err := c(3); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("commit with the journal's fdatasync failing: %v", err)
	}
	fail.Store(false)
	err = c(4)
	if session.CodeOf(err) != session.CodeInternal || !strings.Contains(err.Error(), "reopened") {
		t.Fatalf("commit after the journal failed: %v, want internal saying the store must be reopened", err)
	}
	st, err := s.Load(bg, "a", 0)
	must(t, err)
	if len(st.Snapshot.Messages) != 2 {
		t.Fatalf("%d messages after the failed commits, want 2", len(st.Snapshot.Messages))
	}
	s.Close()
	s, err = fsstore.Open(root, opts)
	must(t, err)
	defer s.Close()
	st, err = s.Load(bg, "a", 0)
	must(t, err)
	// The failed commit's frame was written; whether a reopen brings it
	// back is the disk's to say (here the write reached the page cache):
	// whole if at all.
	if n := len(st.Snapshot.Messages); n != 2 && n != 3 {
		t.Fatalf("%d messages after reopening, want 2 or 3", n)
	}
	must(t, c(5))
}

// TestJournalTooLargeCommitFailureRefusesCommits fails the fdatasync of
// a commit too large for a journal frame, which makes it durable in its
// own log: that commit fails and is rolled back, and the journal takes no
// commits until the store is reopened, as when its own fdatasync fails.
// The log holds a journaled commit's bytes that the failed writeback may
// have lost, whose only other copy is its frame: a later fdatasync (the
// checkpoint's) could succeed without them and retire the frame.
func TestJournalTooLargeCommitFailureRefusesCommits(t *testing.T) {
	root := t.TempDir()
	opts, fail := failingAt(fsstore.FaultJournalTooLarge, fsstore.Options{JournalBytes: 64 << 10})
	s, err := fsstore.Open(root, opts)
	must(t, err)
	c := func(m string) error {
		_, err := s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{session.Value(m)}}, session.CommitOptions{})
		return err
	}
	large := func(i int) string { return fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("L", 20<<10)) }
	must(t, c(`{"i":1}`))
	must(t, c(`{"i":2}`)) // a frame in the journal
	must(t, c(large(3)))  // its own log's fdatasync
	must(t, c(`{"i":4}`)) // a frame again: its bytes in the log are not synced
	if st := s.Stats(); st.Journaled != 2 || st.JournalTooLarge != 1 {
		t.Fatalf("stats %+v: want two commits journaled and one too large for the journal", st)
	}
	fail.Store(true)
	if err := c(large(5)); err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("a large commit with its log's fdatasync failing: %v", err)
	}
	fail.Store(false)
	err = c(`{"i":6}`)
	if session.CodeOf(err) != session.CodeInternal || !strings.Contains(err.Error(), "reopened") {
		t.Fatalf("commit after a large commit's fdatasync failed: %v, want internal saying the store must be reopened", err)
	}
	s.Close()
	s, err = fsstore.Open(root, opts)
	must(t, err)
	defer s.Close()
	if got := messagesOf(t, s, "a"); len(got) != 4 {
		t.Fatalf("%d messages after reopening, want the 4 acknowledged", len(got))
	}
	must(t, c(`{"i":7}`))
}

// failingAt returns opts with a fault hook that fails point with an
// injected EIO while the returned flag is set.
func failingAt(point string, opts fsstore.Options) (fsstore.Options, *atomic.Bool) {
	fail := new(atomic.Bool)
	opts.Fault = func(p string) error {
		if p == point && fail.Load() {
			return errors.New("injected EIO")
		}
		return nil
	}
	return opts, fail
}

// journalImage commits rounds times to each of the sessions ids on
// crashfs with the journal on, every commit after a session's first
// through the journal, then returns an image of what a power cut keeps (no
// log was fdatasynced after its first commit, so the journal alone holds
// the rest), the messages each session was acknowledged with, and the
// acknowledged world (pcWorld).
func journalImage(t *testing.T, opts fsstore.Options, ids []string, rounds int) (string, map[string][]string, crashfs.World) {
	t.Helper()
	root, cfs := crashRoot(t)
	opts.FS = cfs
	s, err := fsstore.Open(root, opts)
	must(t, err)
	acked := map[string][]string{}
	for i := range rounds {
		for _, id := range ids {
			m := fmt.Sprintf(`{"id":%q,"i":%d,"pad":%q}`, id, i, strings.Repeat("q", 100+i*40))
			_, err := s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{session.Value(m)}}, session.CommitOptions{})
			must(t, err)
			acked[id] = append(acked[id], m)
		}
	}
	if got, want := s.Stats().Journaled, int64((rounds-1)*len(ids)); got != want {
		t.Fatalf("%d commits went through the journal, want %d", got, want)
	}
	world, err := pcWorld(root, s)
	must(t, err)
	img := filepath.Join(t.TempDir(), "img")
	must(t, cfs.Cut(img, crashfs.SyncedOnly, nil))
	// Abandoned, as the power cut left it; its descriptors are closed by
	// Close, whose writes go to root, not to the image.
	s.Close()
	return img, acked, world
}

// messagesOf returns session id's messages in the store at root.
func messagesOf(t *testing.T, s *fsstore.Store, id string) []string {
	t.Helper()
	page, err := s.Messages(bg, id, session.Query{})
	must(t, err)
	var out []string
	for _, m := range page.Items {
		out = append(out, string(m))
	}
	return out
}

// TestJournalTornTailAndGoneLog reopens images whose journal has a torn
// last frame, and holds frames for a log that is gone: the torn frame and
// what follows are not replayed, everything before is, and a gone log is
// not made again.
func TestJournalTornTailAndGoneLog(t *testing.T) {
	img, acked, _ := journalImage(t, fsstore.Options{JournalBytes: 64 << 10}, []string{"a", "b"}, 4)
	jpath := filepath.Join(img, ".cairn", "sessions", "journal")
	data, err := os.ReadFile(jpath)
	must(t, err)
	commits := commitFrames(data)
	// a and b's commits after their first: 6.
	if len(commits) != 6 {
		t.Fatalf("the journal holds %d commit frames, want 6", len(commits))
	}
	// Tear the last (b's fourth commit): one byte of its payload.
	data[commits[5]+recordlog.HeaderSize+3] ^= 0xff
	must(t, os.WriteFile(jpath, data, 0o600))
	// And remove a's log: its frames have nowhere to go.
	must(t, os.Remove(filepath.Join(img, ".cairn", "sessions", "s-a.log")))

	s, err := fsstore.Open(img, fsstore.Options{})
	must(t, err)
	if got := s.Stats().JournalReplayed; got != 2 {
		t.Errorf("replayed %d commits, want b's second and third", got)
	}
	if _, err := s.Stat(bg, "a"); session.CodeOf(err) != session.CodeNotFound {
		t.Errorf("a, whose log was removed: %v, want not found", err)
	}
	if got, want := messagesOf(t, s, "b"), acked["b"][:3]; !slices.Equal(got, want) {
		t.Errorf("b holds %d messages, want its first 3", len(got))
	}
	must(t, s.Close())
	if _, err := os.Stat(filepath.Join(img, ".cairn", "sessions", "s-a.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the replay made a's log again: %v", err)
	}
	// Replayed once: a second reopen finds nothing to replay.
	s, err = fsstore.Open(img, fsstore.Options{})
	must(t, err)
	defer s.Close()
	if got := s.Stats().JournalReplayed; got != 0 {
		t.Errorf("the second reopen replayed %d commits", got)
	}
}

// commitFrames returns where each intact commit frame of the journal
// data starts, in order, scanning as far as the frames go.
func commitFrames(data []byte) []int64 {
	var at []int64
	recordlog.Scan(data, 0, func(r recordlog.Record) bool {
		if r.Kind == fsstore.JournalKindCommit {
			at = append(at, r.End-r.Size)
		}
		return true
	})
	return at
}

// TestJournalFlushesEndOnBlocks: every flush ends on a 4 KiB boundary,
// padded there by a pad frame, whatever its commits' sizes, so no flush
// writes part of a block (one that the page cache may have dropped, and
// that the kernel would first read from the disk). After a power cut the
// journal's commits are replayed across the pads.
func TestJournalFlushesEndOnBlocks(t *testing.T) {
	root, cfs := crashRoot(t)
	s, err := fsstore.Open(root, fsstore.Options{FS: cfs, JournalBytes: 1 << 20})
	must(t, err)
	jpath := filepath.Join(root, ".cairn", "sessions", "journal")
	rng := rand.New(rand.NewPCG(7, 17))
	var acked []string
	for i := range 40 {
		m := fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("p", rng.IntN(9000)))
		_, err := s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{session.Value(m)}}, session.CommitOptions{})
		must(t, err)
		acked = append(acked, m)
		if i == 0 {
			continue // the log's creation: fdatasynced, not journaled
		}
		data, err := os.ReadFile(jpath)
		must(t, err)
		var end int64
		pads := 0
		recordlog.Scan(data, 0, func(r recordlog.Record) bool {
			end = r.End
			if r.Kind == fsstore.JournalKindPad {
				pads++
			}
			return true
		})
		if end%4096 != 0 {
			t.Fatalf("after commit %d the journal's frames end at %d, not on a 4 KiB boundary", i, end)
		}
		if pads == 0 {
			t.Fatalf("after commit %d the journal holds no pad frame", i)
		}
	}
	if got := s.Stats().Journaled; got != 39 {
		t.Fatalf("%d commits journaled, want 39", got)
	}
	img := filepath.Join(t.TempDir(), "img")
	must(t, cfs.Cut(img, crashfs.SyncedOnly, nil))
	s.Close()
	s, err = fsstore.Open(img, fsstore.Options{})
	must(t, err)
	defer s.Close()
	if got := s.Stats().JournalReplayed; got != 39 {
		t.Errorf("replayed %d commits, want 39", got)
	}
	if got := messagesOf(t, s, "a"); !slices.Equal(got, acked) {
		t.Errorf("a holds %d messages after the power cut, want the %d acknowledged", len(got), len(acked))
	}
}

// TestJournalVersion1Replayed: a journal an earlier cairn wrote (version
// 1: no pad frames) left by a power cut is replayed; one of a version
// after this build's is refused, untouched.
func TestJournalVersion1Replayed(t *testing.T) {
	img, acked, _ := journalImage(t, fsstore.Options{JournalBytes: 64 << 10}, []string{"a", "b"}, 4)
	jpath := filepath.Join(img, ".cairn", "sessions", "journal")
	data, err := os.ReadFile(jpath)
	must(t, err)
	// Rewrite it as version 1 wrote it: its start frame's magic, and its
	// commit frames back to back after it, without the pads.
	var start []byte
	var v1 []byte
	recordlog.Scan(data, 0, func(r recordlog.Record) bool {
		switch r.Kind {
		case fsstore.JournalKindStart:
			start = slices.Clone(r.Payload)
		case fsstore.JournalKindCommit:
			v1 = recordlog.Append(v1, r.Kind, r.Payload)
		}
		return true
	})
	if string(start[:8]) != "cairnjr2" {
		t.Fatalf("the journal starts with %q, want version 2's magic", start[:8])
	}
	copy(start, "cairnjr1")
	v1 = append(recordlog.Append(nil, fsstore.JournalKindStart, start), v1...)
	v1 = append(v1, make([]byte, len(data)-len(v1))...)
	must(t, os.WriteFile(jpath, v1, 0o600))

	newer := slices.Clone(v1)
	copy(start, "cairnjr3")
	copy(newer, recordlog.Append(nil, fsstore.JournalKindStart, start))
	newerImg := filepath.Join(t.TempDir(), "newer")
	must(t, os.CopyFS(newerImg, os.DirFS(img)))
	must(t, os.WriteFile(filepath.Join(newerImg, ".cairn", "sessions", "journal"), newer, 0o600))

	s, err := fsstore.Open(img, fsstore.Options{})
	must(t, err)
	if got := s.Stats().JournalReplayed; got != 6 {
		t.Errorf("replayed %d commits of the version 1 journal, want 6", got)
	}
	for _, id := range []string{"a", "b"} {
		if got := messagesOf(t, s, id); !slices.Equal(got, acked[id]) {
			t.Errorf("%s holds %d messages, want the %d acknowledged", id, len(got), len(acked[id]))
		}
	}
	must(t, s.Close())

	_, err = fsstore.Open(newerImg, fsstore.Options{})
	if session.CodeOf(err) != session.CodeSchemaUnsupported {
		t.Fatalf("open with a journal of version 3: %v, want schema_unsupported", err)
	}
	if got, _ := os.ReadFile(filepath.Join(newerImg, ".cairn", "sessions", "journal")); !slices.Equal(got, newer) {
		t.Error("the refused journal was changed")
	}
}

// TestJournalCleanCloseIsVersion1: a store closed cleanly leaves a
// journal of one start frame labeled version 1, which a build that knows
// only version 1 opens; the next Open begins a version 2 epoch.
func TestJournalCleanCloseIsVersion1(t *testing.T) {
	root := t.TempDir()
	opts := fsstore.Options{JournalBytes: 64 << 10}
	jpath := filepath.Join(root, ".cairn", "sessions", "journal")
	// frames returns the start frame's magic and how many frames of its
	// epoch follow it.
	frames := func() (magic string, n int) {
		data, err := os.ReadFile(jpath)
		must(t, err)
		var epoch []byte
		recordlog.Scan(data, 0, func(r recordlog.Record) bool {
			if epoch == nil {
				magic, epoch = string(r.Payload[:8]), r.Payload[8:16]
				return true
			}
			if !slices.Equal(r.Payload[:8], epoch) {
				return false
			}
			n++
			return true
		})
		return magic, n
	}
	for round := range 2 {
		s, err := fsstore.Open(root, opts)
		must(t, err)
		if magic, _ := frames(); magic != "cairnjr2" {
			t.Fatalf("round %d: an open journal starts with %q, want cairnjr2", round, magic)
		}
		for i := range 3 {
			_, err := s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{pcMsg(10*round + i)}}, session.CommitOptions{})
			must(t, err)
		}
		if _, n := frames(); n < 2 {
			t.Fatalf("round %d: the journal's epoch holds %d frames before the close", round, n)
		}
		must(t, s.Close())
		if magic, n := frames(); magic != "cairnjr1" || n != 0 {
			t.Fatalf("round %d: a closed journal's epoch holds %d frames and is labeled %q, want none, cairnjr1", round, n, magic)
		}
	}
}

// TestJournalLogClosedBeforeCheckpoint commits to more sessions than may
// be open at once, so logs with commits only the journal holds are
// closed, then wraps the journal: each was fdatasynced before its close,
// so the checkpoint that retires their frames loses nothing.
func TestJournalLogClosedBeforeCheckpoint(t *testing.T) {
	var ids []string
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("s%02d", i))
	}
	img, acked, _ := journalImage(t, fsstore.Options{JournalBytes: 16 << 10, MaxOpenLogs: 4}, ids, 6)
	s, err := fsstore.Open(img, fsstore.Options{})
	must(t, err)
	defer s.Close()
	for _, id := range ids {
		if got := messagesOf(t, s, id); !slices.Equal(got, acked[id]) {
			t.Errorf("%s holds %d messages, want the %d acknowledged", id, len(got), len(acked[id]))
		}
	}
}

// TestJournalTooSmallIsMadeAgain opens a store whose journal a crash
// left empty: it is made again at its full size and used.
func TestJournalTooSmallIsMadeAgain(t *testing.T) {
	root := t.TempDir()
	opts := fsstore.Options{JournalBytes: 64 << 10}
	s, err := fsstore.Open(root, opts)
	must(t, err)
	_, err = s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{pcMsg(1)}}, session.CommitOptions{})
	must(t, err)
	must(t, s.Close())
	jpath := filepath.Join(root, ".cairn", "sessions", "journal")
	must(t, os.Truncate(jpath, 0))
	s, err = fsstore.Open(root, opts)
	must(t, err)
	defer s.Close()
	_, err = s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{pcMsg(2)}}, session.CommitOptions{})
	must(t, err)
	if st := s.Stats(); st.Journaled != 1 {
		t.Errorf("%d commits journaled, want 1", st.Journaled)
	}
	if fi, err := os.Stat(jpath); err != nil || fi.Size() != 64<<10 {
		t.Errorf("journal after reopening: %v, %v; want 64 KiB", fi, err)
	}
}

// TestJournalGrowsInBackground opens a store whose journal is larger than
// what Open writes before it returns: Open leaves it at 1 MiB, commits go
// on meanwhile, and once it has grown a commit too large for 1 MiB goes
// through it. A store closed at once reopens and grows it too.
func TestJournalGrowsInBackground(t *testing.T) {
	const size = 24 << 20
	opts := fsstore.Options{JournalBytes: size}
	sizeOf := func(root string) int64 {
		fi, err := os.Stat(filepath.Join(root, ".cairn", "sessions", "journal"))
		must(t, err)
		return fi.Size()
	}
	root := t.TempDir()
	// Held until the size is read: a quick disk could otherwise write the
	// rest before this test looks.
	release := fsstore.HoldJournalGrowth(t)
	s, err := fsstore.Open(root, opts)
	must(t, err)
	defer s.Close()
	defer release() // before Close, which waits for the growth
	if got := sizeOf(root); got >= size {
		t.Fatalf("Open wrote all %d bytes of the journal before it returned", got)
	}
	release()
	// A commit larger than a quarter of 1 MiB goes through the journal
	// once it has grown; until then it fdatasyncs its own log.
	big := session.Value(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("b", 400<<10)))
	n := 0
	for deadline := time.Now().Add(20 * time.Second); s.Stats().Journaled == 0; n++ {
		if time.Now().After(deadline) {
			t.Fatalf("no commit of 400 KiB went through the journal in 20 s (it is %d bytes)", sizeOf(root))
		}
		_, err = s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{big}}, session.CommitOptions{})
		must(t, err)
	}
	if got := sizeOf(root); got != size {
		t.Errorf("the journal is %d bytes, want %d", got, size)
	}
	if got := messagesOf(t, s, "a"); len(got) != n {
		t.Errorf("a holds %d messages, want %d", len(got), n)
	}
	t.Logf("%d commits of 400 KiB, the last through the journal", n)

	// Closed at once, its growth stopped or done; reopened, it grows.
	root = t.TempDir()
	s2, err := fsstore.Open(root, opts)
	must(t, err)
	must(t, s2.Close())
	s2, err = fsstore.Open(root, opts)
	must(t, err)
	defer s2.Close()
	for deadline := time.Now().Add(20 * time.Second); sizeOf(root) < size; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the reopened journal is %d bytes after 20 s, want %d", sizeOf(root), size)
		}
	}
}

// TestKillDuringGroupCommits kills, with SIGKILL at random moments, a
// child committing to four sessions at once through a journal that wraps
// every hundred commits or so while compactions run, and checks after each
// kill that every session reopens complete at or after its last
// acknowledged generation. A kill leaves the page cache whole, so what it
// tests is the replay: a frame replayed where it does not belong (a log
// compacted since, say) would write over what is there.
func TestKillDuringGroupCommits(t *testing.T) {
	dir := t.TempDir()
	kills := 60
	if testing.Short() || raceEnabled {
		kills = 15 // make test-norace runs the 60 without -race
	}
	rng := rand.New(rand.NewPCG(2, uint64(time.Now().UnixNano())))
	acked := map[string]uint64{}
	var journaled, compactions uint64
	for range kills {
		var childJournaled, childCompactions uint64
		killChild(t, "journal-loop", dir, rng, 40, func(line string) {
			var id string
			var g, j, c uint64
			if _, err := fmt.Sscanf(line, "ack %s %d %d %d", &id, &g, &j, &c); err == nil {
				acked[id] = max(acked[id], g)
				childJournaled, childCompactions = max(childJournaled, j), max(childCompactions, c)
			}
		})
		journaled += childJournaled
		compactions += childCompactions
		s, err := fsstore.Open(dir, fsstore.Options{})
		must(t, err)
		for i := range journalSessions {
			id := fmt.Sprint("g", i)
			acked[id] = max(acked[id], checkLoop(t, s, id, acked[id]))
		}
		must(t, s.Close())
	}
	t.Logf("%d kills; generations acknowledged %v; %d commits journaled, %d compactions completed before a kill", kills, acked, journaled, compactions)
	if journaled == 0 || compactions == 0 {
		t.Fatalf("%d commits journaled, %d compactions: the test does not cover both", journaled, compactions)
	}
}
