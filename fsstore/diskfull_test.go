//go:build linux

package fsstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// diskFullEnv makes the test binary run TestDiskFull under RLIMIT_FSIZE (the
// fallback when no small file system can be mounted), or forces it when
// set in the parent.
const diskFullEnv = "CAIRN_FSSTORE_DISKFULL"

// smallDisk is a place to fill up: a size-limited tmpfs, or any directory
// under a file size limit.
type smallDisk interface {
	// leave lets the log at path grow by about n more bytes.
	leave(t *testing.T, path string, n int64)
	// full lets no file grow by even a page.
	full(t *testing.T)
	// free gives the space back.
	free(t *testing.T)
}

// tmpfsDisk is a 2 MiB tmpfs filled with a filler file.
type tmpfsDisk struct{ dir, filler string }

func mountTmpfs(t *testing.T) (*tmpfsDisk, error) {
	dir, err := testkit.MountTmpfs(t, "2m")
	if err != nil {
		return nil, err
	}
	return &tmpfsDisk{dir: dir, filler: filepath.Join(dir, "filler")}, nil
}

// fillUp appends to the filler until the file system refuses even one
// byte, and returns the filler's size.
func (d *tmpfsDisk) fillUp(t *testing.T) int64 {
	t.Helper()
	testkit.FillUp(t, d.filler)
	fi, err := os.Stat(d.filler)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func (d *tmpfsDisk) leave(t *testing.T, _ string, n int64) {
	t.Helper()
	size := d.fillUp(t)
	if err := os.Truncate(d.filler, max(size-n, 0)); err != nil {
		t.Fatal(err)
	}
}

func (d *tmpfsDisk) full(t *testing.T) { t.Helper(); d.fillUp(t) }

func (d *tmpfsDisk) free(t *testing.T) {
	t.Helper()
	if err := os.Remove(d.filler); err != nil {
		t.Fatal(err)
	}
}

// rlimitDisk is any directory, under a soft RLIMIT_FSIZE that is lowered
// and raised again (process-wide: only in a child process of its own).
type rlimitDisk struct {
	dir  string
	orig syscall.Rlimit
}

func newRlimitDisk(t *testing.T) *rlimitDisk {
	// With SIGXFSZ ignored, a write past the limit fails with EFBIG
	// instead of killing the process.
	signal.Ignore(syscall.SIGXFSZ)
	d := &rlimitDisk{dir: t.TempDir()}
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &d.orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.free(t) })
	return d
}

func (d *rlimitDisk) set(t *testing.T, n uint64) {
	t.Helper()
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: n, Max: d.orig.Max}); err != nil {
		t.Fatal(err)
	}
}

func (d *rlimitDisk) leave(t *testing.T, path string, n int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	d.set(t, uint64(fi.Size()+n))
}

func (d *rlimitDisk) full(t *testing.T) { t.Helper(); d.set(t, 4096) }

func (d *rlimitDisk) free(t *testing.T) { t.Helper(); d.set(t, d.orig.Cur) }

// bigMessage is message i, about 8 KiB: more than a page, so no write of
// one fits in what is left of a file's last page.
func bigMessage(i int) session.Value {
	return session.Value(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat(string(rune('a'+i%26)), 8<<10)))
}

// tempFiles lists the temp files under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDiskFull fills a small file system (a 2 MiB tmpfs when it can mount
// one, else RLIMIT_FSIZE in a child process) under a session's commits, a
// new session, a workflow's steps, a new workflow and a compaction: each
// fails with no_space and a message naming its log, nothing acknowledged is
// lost, no temp file stays, and once space is freed every write succeeds
// on the same open store.
func TestDiskFull(t *testing.T) {
	var disk smallDisk
	var dir string
	switch os.Getenv(diskFullEnv) {
	case "rlimit":
		d := newRlimitDisk(t)
		disk, dir = d, d.dir
		t.Log("small disk: RLIMIT_FSIZE (child process)")
	case "":
		d, err := mountTmpfs(t)
		if err != nil {
			t.Logf("cannot mount a tmpfs (%v); running under RLIMIT_FSIZE in a child process", err)
			runDiskFullChild(t)
			return
		}
		disk, dir = d, d.dir
		t.Log("small disk: 2 MiB tmpfs")
	default:
		runDiskFullChild(t)
		return
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := fsstore.Open(ws, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	sessions, flows := layout.Sessions(ws), layout.Workflows(ws)
	logA := filepath.Join(sessions, fsstore.FileNameForTest("a"))

	var acked []session.Value // the messages of session a, as acknowledged
	commitA := func() error {
		m := bigMessage(len(acked) + 1)
		_, err := s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{m}}, session.CommitOptions{ExpectGeneration: ptr(uint64(len(acked)))})
		if err == nil {
			acked = append(acked, m)
		}
		return err
	}
	for range 3 {
		must(t, commitA())
	}
	must(t, s.SaveStep(bg, "w", "a", session.StepRecord{StepID: "s1", Identity: "i", Result: bigMessage(100)}))

	// noSpace checks that err is a no_space naming path, and that no temp
	// file is left.
	noSpace := func(what string, err error, path string) {
		t.Helper()
		if session.CodeOf(err) != session.CodeNoSpace || !errors.Is(err, session.ErrNoSpace) {
			t.Fatalf("%s on a full disk: %v (code %q), want no_space", what, err, session.CodeOf(err))
		}
		msg := err.Error()
		if !strings.Contains(msg, path) || strings.Contains(msg, atomicfile.TempPrefix) {
			t.Errorf("%s: message %q should name %s and no temp file", what, msg, path)
		}
		if tmps := tempFiles(t, ws); len(tmps) > 0 {
			t.Errorf("%s left temp files: %v", what, tmps)
		}
		t.Logf("%s: %v", what, err)
	}

	// Delta commits until the disk is full.
	disk.leave(t, logA, 48<<10)
	var err2 error
	for i := 0; i < 100 && err2 == nil; i++ {
		err2 = commitA()
	}
	noSpace("a delta commit", err2, logA)
	if len(acked) <= 3 {
		t.Fatalf("no commit fitted in the space left (%d acknowledged)", len(acked))
	}
	disk.full(t)
	noSpace("another delta commit", commitA(), logA)
	_, err = s.Commit(bg, "b", &session.Change{AppendMessages: []session.Value{bigMessage(1)}}, session.CommitOptions{})
	noSpace("a new session", err, filepath.Join(sessions, fsstore.FileNameForTest("b")))
	noSpace("a workflow step", s.SaveStep(bg, "w", "a", session.StepRecord{StepID: "s2", Identity: "i", Result: bigMessage(101)}), filepath.Join(flows, fsstore.FileNameForTest("w")))
	noSpace("a new workflow", s.SaveStep(bg, "w2", "", session.StepRecord{StepID: "s1", Identity: "i", Result: bigMessage(102)}), filepath.Join(flows, fsstore.FileNameForTest("w2")))
	noSpace("a compaction", s.Compact(bg, "a"), logA)

	// What was acknowledged reads back while the disk is still full.
	checkA := func(s *fsstore.Store) {
		t.Helper()
		st, err := s.Load(bg, "a", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Snapshot.Messages) != len(acked) || int(st.Snapshot.Generation) < len(acked) {
			t.Fatalf("session a: %d messages at generation %d, want the %d acknowledged", len(st.Snapshot.Messages), st.Snapshot.Generation, len(acked))
		}
		for i, m := range st.Snapshot.Messages {
			if !bytes.Equal(m, acked[i]) {
				t.Fatalf("session a: message %d differs from the one acknowledged", i)
			}
		}
	}
	checkA(s)

	// Space freed: the same store takes every write again.
	disk.free(t)
	must(t, commitA())
	_, err = s.Commit(bg, "b", &session.Change{AppendMessages: []session.Value{bigMessage(1)}}, session.CommitOptions{MustNotExist: true})
	must(t, err)
	must(t, s.SaveStep(bg, "w", "a", session.StepRecord{StepID: "s2", Identity: "i", Result: bigMessage(101)}))
	must(t, s.SaveStep(bg, "w2", "", session.StepRecord{StepID: "s1", Identity: "i", Result: bigMessage(102)}))
	must(t, s.Compact(bg, "a"))
	must(t, commitA())
	checkA(s)

	// After a restart's recovery: everything acknowledged, no temp file
	// found or removed.
	must(t, s.Close())
	s, err = fsstore.Open(ws, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkA(s)
	if st, err := s.Load(bg, "b", 0); err != nil || len(st.Snapshot.Messages) != 1 {
		t.Fatalf("session b after reopen: %v", err)
	}
	for id, n := range map[string]int{"w": 2, "w2": 1} {
		w, err := s.Workflow(bg, id)
		if err != nil || len(w.Steps) != n {
			t.Fatalf("workflow %s after reopen: %v (%+v)", id, err, w)
		}
	}
	if st := s.Stats(); st.TempsRemoved != 0 || st.Trimmed != 0 {
		t.Errorf("recovery found leftovers: %+v", st)
	}
	if tmps := tempFiles(t, ws); len(tmps) > 0 {
		t.Errorf("temp files after reopen: %v", tmps)
	}
}

// runDiskFullChild runs TestDiskFull again in a child process under
// RLIMIT_FSIZE (a process-wide limit, so not in this one).
func runDiskFullChild(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFull$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), diskFullEnv+"=rlimit")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("the RLIMIT_FSIZE run failed: %v", err)
	}
	if !bytes.Contains(out, []byte("small disk: RLIMIT_FSIZE")) {
		t.Fatal("the child did not run the RLIMIT_FSIZE test")
	}
}

func ptr[T any](v T) *T { return &v }
