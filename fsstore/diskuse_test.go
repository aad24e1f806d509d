package fsstore_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// diskUse sums st_blocks*512 over every file and directory under dir.
func diskUse(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		total += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// agentMessage is a message of about 2 KB, the smaller of an agent turn's
// two.
func agentMessage(i int) session.Value {
	return session.Value(`{"role":"user","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("x", 2000) + `"}`)
}

// sessionCount is how many sessions TestDiskUseManySessions makes:
// CAIRN_DISKUSE_SESSIONS (`make test-diskuse` sets 100,000, which takes
// minutes: a session's first commit is three syncs), default 2,000.
func sessionCount(t *testing.T) int {
	if v := os.Getenv("CAIRN_DISKUSE_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 2_000
}

// TestDiskUseManySessions makes a workspace of many sessions of one
// message each, with the embedded library's options (zeros written ahead)
// and with cairnd's (the workspace journal), and checks that it takes no
// more disk (st_blocks) than twice its live data plus 64 MiB, with the
// store open and after it closes.
func TestDiskUseManySessions(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { diskUseManySessions(t, preallocOpts) })
	t.Run("cairnd", func(t *testing.T) {
		diskUseManySessions(t, fsstore.Options{JournalBytes: fsstore.DefaultJournalBytes})
	})
}

func diskUseManySessions(t *testing.T, opts fsstore.Options) {
	n := sessionCount(t)
	dir := t.TempDir()
	s, err := fsstore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Commits of different sessions run side by side, as a daemon's
	// clients do: their creations' syncs share the file system's journal
	// commits, which brings 100,000 of them from minutes to about one.
	var live atomic.Int64
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make(chan error, 16)
	)
	for range 16 {
		wg.Go(func() {
			errs <- func() error {
				for {
					i := int(next.Add(1) - 1)
					if i >= n {
						return nil
					}
					id := "s" + strconv.Itoa(i)
					if _, err := s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{agentMessage(i)}}, session.CommitOptions{}); err != nil {
						return err
					}
					sum, err := s.Stat(bg, id)
					if err != nil {
						return err
					}
					live.Add(sum.LiveBytes)
				}
			}()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	bound := 2*live.Load() + 64<<20
	open := diskUse(t, filepath.Join(dir, ".cairn"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closed := diskUse(t, filepath.Join(dir, ".cairn"))
	t.Logf("%d sessions: %d live bytes; on disk %d bytes open, %d closed; bound %d", n, live.Load(), open, closed, bound)
	if open > bound || closed > bound {
		t.Fatalf("%d sessions of one message take %d bytes on disk open, %d closed, past 2x their %d live bytes + 64 MiB", n, open, closed, live.Load())
	}
}

// TestPreallocBudget commits to many sessions in turn, with a small
// budget for the zeros ahead, and checks that the zeros ahead of all logs
// together never pass it, and that the logs the store keeps open still
// get some (the budget is taken back from idle logs).
func TestPreallocBudget(t *testing.T) {
	const budget = 256 << 10
	dir := t.TempDir()
	s, err := fsstore.Open(dir, fsstore.Options{PreallocBytes: budget, MaxOpenLogs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sessions := filepath.Join(dir, ".cairn", "sessions")
	slack := func() int64 {
		var total int64
		for i := range 200 {
			sum, err := s.Stat(bg, "s"+strconv.Itoa(i))
			if err != nil {
				continue
			}
			fi, err := os.Stat(filepath.Join(sessions, "s-s"+strconv.Itoa(i)+".log"))
			if err != nil {
				t.Fatal(err)
			}
			total += fi.Size() - sum.SizeBytes
		}
		return total
	}
	most := int64(0)
	for round := range 4 {
		for i := range 200 {
			id := "s" + strconv.Itoa(i)
			if _, err := s.Commit(bg, id, &session.Change{AppendMessages: []session.Value{agentMessage(round)}}, session.CommitOptions{}); err != nil {
				t.Fatal(err)
			}
			if i%20 == 0 {
				got := slack()
				most = max(most, got)
				if got > budget {
					t.Fatalf("round %d, session %d: %d bytes of zeros ahead of the logs, past the budget of %d", round, i, got, budget)
				}
			}
		}
	}
	if most == 0 {
		t.Fatal("no log ever had zeros ahead of its end")
	}
	t.Logf("at most %d bytes of zeros ahead, budget %d", most, budget)
}
