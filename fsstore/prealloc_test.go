package fsstore_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// preallocOpts turns on the zeros written ahead of session logs.
var preallocOpts = fsstore.Options{PreallocBytes: fsstore.DefaultPreallocBytes}

// quarantined lists the files in dir's quarantine/.
func quarantined(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ".cairn", "quarantine"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// logicalSizes commits n messages to session "k" of a store with
// preallocation on and returns the log's path and its committed size
// (Summary.SizeBytes) after each commit; the file runs on past the last
// one in zeros until the store closes.
func logicalSizes(t *testing.T, dir string, n int) (string, []int64) {
	t.Helper()
	s, err := fsstore.Open(dir, preallocOpts)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, ".cairn", "sessions", "s-k.log")
	var sizes []int64
	for i := 1; i <= n; i++ {
		if _, err := s.Commit(bg, "k", &session.Change{AppendMessages: []session.Value{message(i)}, Handoff: handoffFor(i)}, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		sum, err := s.Stat(bg, "k")
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, sum.SizeBytes)
	}
	fi, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() <= sizes[n-1] {
		t.Fatalf("log is %d bytes with preallocation on, no more than its committed %d", fi.Size(), sizes[n-1])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(log); fi.Size() != sizes[n-1] {
		t.Fatalf("log is %d bytes after Close, want its committed %d: the zeros ahead were not trimmed", fi.Size(), sizes[n-1])
	}
	return log, sizes
}

// TestZeroTail reopens logs that end in zeros: all zeros are a clean end
// (nothing trimmed into quarantine, nothing reported); a torn commit
// followed by zeros, or zeros followed by anything, fall to the rules for
// torn and damaged tails.
func TestZeroTail(t *testing.T) {
	cases := []struct {
		name      string
		wantGen   uint64 // 0: the session is refused as corrupt
		wantQuar  bool   // a torn tail is kept in quarantine
		wantClean bool   // the log ends at the last commit, nothing trimmed
		do        func(log string, sizes []int64, data []byte) []byte
	}{
		{"zero-filled tail", 4, false, true, func(log string, sizes []int64, data []byte) []byte {
			return append(data, make([]byte, 64<<10)...)
		}},
		{"zero-filled tail shorter than a frame header", 4, false, true, func(log string, sizes []int64, data []byte) []byte {
			return append(data, make([]byte, 8)...)
		}},
		{"torn commit then zeros", 3, true, false, func(log string, sizes []int64, data []byte) []byte {
			torn := data[:sizes[2]+(sizes[3]-sizes[2])/2]
			return append(torn, make([]byte, 8192)...)
		}},
		{"zeros then garbage", 4, true, false, func(log string, sizes []int64, data []byte) []byte {
			data = append(data, make([]byte, 4096)...)
			return append(data, "\x10\x00\x00\x00garbage-garbage-garbage"...)
		}},
		{"zeros then the last commit again", 4, true, false, func(log string, sizes []int64, data []byte) []byte {
			last := bytes.Clone(data[sizes[2]:sizes[3]])
			data = append(data, make([]byte, 4096)...)
			return append(data, last...)
		}},
		{"zeros in place of a commit, then a later one", 0, false, false, func(log string, sizes []int64, data []byte) []byte {
			last := bytes.Clone(data[sizes[2]:sizes[3]])
			data = append(data[:sizes[2]], make([]byte, 4096)...)
			return append(data, last...)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			log, sizes := logicalSizes(t, dir, 4)
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(log, c.do(log, sizes, data), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := fsstore.Open(dir, preallocOpts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			st, err := s.Load(bg, "k", 0)
			if c.wantGen == 0 {
				if session.CodeOf(err) != session.CodeCorrupt {
					t.Fatalf("load of a log with zeros in place of a commit and a later commit after them: %v, want corrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Snapshot.Generation != c.wantGen || len(st.Snapshot.Messages) != int(c.wantGen) {
				t.Fatalf("recovered generation %d with %d messages, want %d", st.Snapshot.Generation, len(st.Snapshot.Messages), c.wantGen)
			}
			q := quarantined(t, dir)
			if c.wantQuar != (len(q) > 0) {
				t.Fatalf("quarantine holds %q; want a kept torn tail: %v", q, c.wantQuar)
			}
			if c.wantClean {
				if n := s.Stats().Trimmed; n != 0 {
					t.Fatalf("recovery trimmed %d bytes of a zero-filled tail as torn", n)
				}
				rep, err := s.Verify(bg)
				if err != nil || len(rep.Problems) != 0 {
					t.Fatalf("verify after a zero-filled tail: %+v %v", rep.Problems, err)
				}
			}
			res, err := s.Commit(bg, "k", &session.Change{AppendMessages: []session.Value{message(9)}}, session.CommitOptions{})
			if err != nil || res.Generation != c.wantGen+1 {
				t.Fatalf("commit after recovery: %+v %v", res, err)
			}
			s.Close()
			s2, err := fsstore.Open(dir, fsstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			st, err = s2.Load(bg, "k", 0)
			if err != nil || st.Snapshot.Generation != c.wantGen+1 || !bytes.Equal(st.Snapshot.Messages[c.wantGen], message(9)) {
				t.Fatalf("reopened after the commit that followed recovery: %v", err)
			}
		})
	}
}

// messagesOnly opens the store and checks that session "k" holds exactly
// messages 1..gen, byte for byte, at a generation of at least minGen.
func messagesOnly(t *testing.T, dir string, minGen uint64) uint64 {
	t.Helper()
	s, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	st, err := s.Load(bg, "k", 0)
	if err != nil {
		t.Fatalf("load after kill: %v", err)
	}
	snap := st.Snapshot
	if snap.Generation < minGen || len(snap.Messages) != int(snap.Generation) {
		t.Fatalf("store reopened at generation %d with %d messages, but generation %d was acknowledged", snap.Generation, len(snap.Messages), minGen)
	}
	for i, m := range snap.Messages {
		if !bytes.Equal(m, message(i+1)) {
			t.Fatalf("generation %d: message %d differs from what was committed", snap.Generation, i+1)
		}
	}
	return snap.Generation
}

// childPreallocStop commits to session "k" with preallocation on, printing
// each acknowledged generation, until the hook kills it at the nth time it
// reaches the fault point.
func childPreallocStop(dir, point string, nth int) error {
	seen := 0
	opts := preallocOpts
	opts.Fault = func(p string) error {
		if p == point {
			if seen++; seen == nth {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
		return nil
	}
	s, err := fsstore.Open(dir, opts)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 1; i < 10000; i++ {
		res, err := s.Commit(bg, "k", &session.Change{AppendMessages: []session.Value{message(i)}}, session.CommitOptions{})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "ack %d\n", res.Generation)
		out.Flush()
	}
	return fmt.Errorf("fault point %s was reached fewer than %d times", point, nth)
}

// TestKillDuringPrealloc kills a process with SIGKILL at each step of its
// writing zeros ahead of a log's end, after commits that overwrote earlier
// zeros, and checks that every acknowledged commit is there after a
// reopen, that the zeros are not taken for a torn tail, and that commits go
// on.
func TestKillDuringPrealloc(t *testing.T) {
	for _, point := range fsstore.FaultPreallocPoints {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			cmd := startChild(t, "prealloc-stop", dir, "CAIRN_FSSTORE_POINT="+point, "CAIRN_FSSTORE_NTH=3")
			out, err := cmd.Output()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
				t.Fatalf("child did not stop at %s: %v\n%s", point, err, out)
			}
			var acked uint64
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if g, ok := strings.CutPrefix(line, "ack "); ok {
					acked, _ = strconv.ParseUint(g, 10, 64)
				}
			}
			if acked < 2 {
				t.Fatalf("child acknowledged %d commits before the third preallocation", acked)
			}
			got := messagesOnly(t, dir, acked)
			if got > acked+1 {
				t.Fatalf("recovered generation %d, acknowledged %d", got, acked)
			}
			if q := quarantined(t, dir); len(q) != 0 {
				t.Fatalf("recovery put %q in quarantine: the zeros ahead were taken for a torn tail", q)
			}
			s, err := fsstore.Open(dir, preallocOpts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if n := s.Stats().Trimmed; n != 0 {
				t.Fatalf("recovery trimmed %d bytes as torn", n)
			}
			st, err := s.Load(bg, "k", 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range st.Snapshot.Messages {
				if !bytes.Equal(m, message(i+1)) {
					t.Fatalf("message %d reads back wrong", i)
				}
			}
			if _, err := s.Commit(bg, "k", &session.Change{AppendMessages: []session.Value{message(int(got) + 1)}}, session.CommitOptions{}); err != nil {
				t.Fatalf("commit after recovery: %v", err)
			}
		})
	}
}
