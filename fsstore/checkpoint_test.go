package fsstore_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// ckptOpts make small logs keep index checkpoints, and never compact on
// their own: the tests decide when a log is rewritten.
var ckptOpts = fsstore.Options{IndexCheckpointBytes: 4096, CompactMinBytes: 1 << 40}

// noCkpt opens without reading or writing checkpoints: a full walk.
var noCkpt = fsstore.Options{IndexCheckpointBytes: -1, CompactMinBytes: 1 << 40}

var ckptRuns = []string{"r-a", "r-c", "r-none"}

// buildCkptHistory commits, to sessions a (large), b (small, no
// checkpoint) and c (large), messages, traces, artifacts, runs, loop
// checkpoints, metadata, a truncation and a delete.
func buildCkptHistory(t *testing.T, dir string) {
	t.Helper()
	s, err := fsstore.Open(dir, ckptOpts)
	must(t, err)
	for i := 1; i <= 30; i++ {
		for _, id := range []string{"a", "c"} {
			c := &session.Change{
				AppendMessages: []session.Value{message(i), message(i + 1000)},
				AppendTraces:   []session.Trace{{Seq: uint64(i), Type: "tool", RunID: "r-" + id, Data: message(i)}},
				UpsertRuns:     []session.Run{{RunID: "r-" + id, Status: session.RunRunning, ToolCallsCount: int64(i)}},
				Metadata:       map[string]session.Value{"turn": session.Value(fmt.Sprint(i))},
			}
			switch i % 5 {
			case 0:
				c.Checkpoint = &session.LoopCheckpoint{RunID: "r-" + id, Turn: int64(i), State: session.Value(fmt.Sprint(i))}
			case 1:
				c.PutArtifacts = []session.Artifact{{ID: fmt.Sprint("art", i%3), Data: []byte(message(i)), Metadata: session.Value(`{"v":1}`)}}
			case 2:
				cut := int64(i)
				c.TruncateMessages = &cut
			case 3:
				c.DeleteArtifacts = []string{fmt.Sprint("art", (i-2)%3)}
			}
			must(t, second(s.Commit(bg, id, c, session.CommitOptions{})))
		}
	}
	must(t, second(s.Commit(bg, "b", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})))
	must(t, s.Close())
}

// observeStore is everything the store answers about its sessions, as
// JSON, with each session's index.
func observeStore(t *testing.T, s *fsstore.Store) string {
	t.Helper()
	var b strings.Builder
	add := func(what string, v any, err error) {
		j, _ := json.Marshal(v)
		fmt.Fprintf(&b, "%s: %s %v\n", what, j, session.CodeOf(err))
	}
	list, err := s.List(bg)
	add("list", list, err)
	for _, sum := range list {
		id := sum.SessionID
		st, err := s.Load(bg, id, 0)
		add("load "+id, st, err)
		head, hs, err := s.Head(bg, id)
		add("head "+id, []any{head, hs}, err)
		p, err := s.Messages(bg, id, session.Query{})
		add("messages "+id, p, err)
		tr, err := s.Traces(bg, id, session.Query{})
		add("traces "+id, tr, err)
		arts, err := s.Artifacts(bg, id, nil, true)
		add("artifacts "+id, arts, err)
		for _, run := range ckptRuns {
			ev, err := s.RunEvents(bg, id, run, session.Query{})
			add("events "+id+" "+run, ev, err)
		}
		idx, _ := fsstore.IndexForTest(s, id)
		add("index "+id, idx, nil)
	}
	for _, run := range ckptRuns {
		found, err := s.FindRun(bg, run)
		add("findrun "+run, found, err)
		cp, err := s.Checkpoint(bg, run)
		add("checkpoint "+run, cp, err)
	}
	return b.String()
}

// copyTree copies the directory tree src to dst, leaving out files whose
// name ends in skip (when skip is not empty).
func copyTree(t *testing.T, src, dst, skip string) {
	t.Helper()
	must(t, filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if os.IsNotExist(err) {
			return nil // a temp file renamed by a background write
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(to, fi.Mode().Perm())
		}
		if skip != "" && strings.HasSuffix(path, skip) {
			return nil
		}
		in, err := os.Open(path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, in)
		return err
	}))
}

// openedBoth opens dir as it is (checkpoints used where usable) and a copy
// of it without its checkpoints (every log walked from the start), and
// returns what each answers and the prefix session a's checkpoint covered.
func openedBoth(t *testing.T, dir string) (withIdx, full string, idxAt int64, trimmed [2]int64) {
	t.Helper()
	bare := t.TempDir()
	copyTree(t, dir, bare, ".idx")
	f, err := fsstore.Open(bare, noCkpt)
	must(t, err)
	full, trimmed[1] = observeStore(t, f), f.Stats().Trimmed
	must(t, f.Close())
	s, err := fsstore.Open(dir, ckptOpts)
	must(t, err)
	_, idxAt = fsstore.IndexForTest(s, "a")
	withIdx, trimmed[0] = observeStore(t, s), s.Stats().Trimmed
	must(t, s.Close())
	return withIdx, full, idxAt, trimmed
}

func sessionsDir(dir string) string { return filepath.Join(dir, ".cairn", "sessions") }

// TestIndexCheckpoints: a checkpoint that is usable is used, and one that
// is stale (the log cut below it, or rewritten behind it), torn, corrupt,
// of another version or another log's is detected and the log walked from
// the start; either way the store answers exactly what a full walk of the
// same bytes answers.
func TestIndexCheckpoints(t *testing.T) {
	logA := func(dir string) string { return filepath.Join(sessionsDir(dir), "s-a.log") }
	idxA := func(dir string) string { return filepath.Join(sessionsDir(dir), "s-a.idx") }
	edit := func(path string, fn func([]byte) []byte) {
		data, err := os.ReadFile(path)
		must(t, err)
		must(t, os.WriteFile(path, fn(data), 0o600))
	}
	commitMore := func(t *testing.T, dir string, n int) {
		s, err := fsstore.Open(dir, noCkpt)
		must(t, err)
		for i := 0; i < n; i++ {
			must(t, second(s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{message(500 + i)}}, session.CommitOptions{})))
		}
		must(t, s.Close())
	}
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		used    bool // the checkpoint of a is used
		trimmed bool
	}{
		{"usable", func(*testing.T, string) {}, true, false},
		{"log grew after it", func(t *testing.T, dir string) { commitMore(t, dir, 5) }, true, false},
		{"torn log tail after it", func(t *testing.T, dir string) {
			commitMore(t, dir, 2)
			edit(logA(dir), func(b []byte) []byte { return b[:len(b)-7] })
		}, true, true},
		{"log cut below it", func(t *testing.T, dir string) {
			data, err := os.ReadFile(logA(dir))
			must(t, err)
			spans := fsstore.CommitsForTest(data)
			must(t, os.Truncate(logA(dir), spans[len(spans)/2][2]))
		}, false, false},
		{"log compacted behind it", func(t *testing.T, dir string) {
			fi, err := os.Stat(logA(dir))
			must(t, err)
			// The compaction removes the checkpoint; a crash can bring it
			// back (the removal is not synced), as this copy does.
			old, err := os.ReadFile(idxA(dir))
			must(t, err)
			defer func() { must(t, os.WriteFile(idxA(dir), old, 0o600)) }()
			s, err := fsstore.Open(dir, noCkpt)
			must(t, err)
			must(t, s.Compact(bg, "a"))
			// Grow the compacted log past the old length, so only the
			// check of the prefix's bytes can tell.
			for i := 0; ; i++ {
				nfi, err := os.Stat(logA(dir))
				must(t, err)
				if nfi.Size() >= fi.Size() {
					break
				}
				must(t, second(s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{message(700 + i)}}, session.CommitOptions{})))
			}
			must(t, s.Close())
		}, false, false},
		{"another log's checkpoint", func(t *testing.T, dir string) {
			data, err := os.ReadFile(filepath.Join(sessionsDir(dir), "s-c.idx"))
			must(t, err)
			must(t, os.WriteFile(idxA(dir), data, 0o600))
		}, false, false},
		{"checkpoint torn", func(t *testing.T, dir string) {
			edit(idxA(dir), func(b []byte) []byte { return b[:len(b)/2] })
		}, false, false},
		{"checkpoint empty", func(t *testing.T, dir string) {
			edit(idxA(dir), func(b []byte) []byte { return nil })
		}, false, false},
		{"checkpoint byte flipped", func(t *testing.T, dir string) {
			edit(idxA(dir), func(b []byte) []byte { b[len(b)*2/3] ^= 0x04; return b })
		}, false, false},
		{"checkpoint of another version", func(t *testing.T, dir string) {
			edit(idxA(dir), func(b []byte) []byte { b[7] = '9'; return b })
		}, false, false},
		{"checkpoint removed", func(t *testing.T, dir string) { must(t, os.Remove(idxA(dir))) }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			buildCkptHistory(t, dir)
			for _, name := range []string{"s-a.idx", "s-c.idx"} {
				if _, err := os.Stat(filepath.Join(sessionsDir(dir), name)); err != nil {
					t.Fatalf("Close wrote no checkpoint %s: %v", name, err)
				}
			}
			if _, err := os.Stat(filepath.Join(sessionsDir(dir), "s-b.idx")); err == nil {
				t.Fatal("a log below IndexCheckpointBytes has a checkpoint")
			}
			tc.damage(t, dir)
			got, want, idxAt, trimmed := openedBoth(t, dir)
			if used := idxAt > 0; used != tc.used {
				t.Errorf("checkpoint used: %v (covering %d bytes), want %v", used, idxAt, tc.used)
			}
			if got != want {
				t.Errorf("with the checkpoint the store answers otherwise than without: %s", firstDiff(got, want))
			}
			if trimmed[0] != trimmed[1] || (trimmed[0] > 0) != tc.trimmed {
				t.Errorf("trimmed %d bytes with the checkpoint, %d without; want a trim: %v", trimmed[0], trimmed[1], tc.trimmed)
			}
			// The reopen rewrote what it could not use: a third open uses
			// the checkpoint of a again and still agrees.
			got2, want2, idxAt2, _ := openedBoth(t, dir)
			if idxAt2 == 0 || got2 != want2 || got2 != got {
				t.Errorf("after Close rewrote it: checkpoint covers %d bytes; %s; %s", idxAt2, firstDiff(got2, want2), firstDiff(got2, got))
			}
		})
	}
}

// TestIndexCheckpointsRandom commits random histories to two sessions,
// with compactions, clean reopens and crash images (copies taken while the
// store is open, background checkpoints included) in between; at each
// reopen the store with its checkpoints answers exactly what a full walk
// of the same bytes answers.
func TestIndexCheckpointsRandom(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		opts := fsstore.Options{IndexCheckpointBytes: 512, CompactMinBytes: 1 << 40}
		s, err := fsstore.Open(dir, opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }()
		seq := 0
		compare := func(img string) {
			bare := t.TempDir()
			copyTree(t, img, bare, ".idx")
			f, err := fsstore.Open(bare, noCkpt)
			if err != nil {
				rt.Fatal(err)
			}
			want := observeStore(t, f)
			f.Close()
			g, err := fsstore.Open(img, opts)
			if err != nil {
				rt.Fatal(err)
			}
			got := observeStore(t, g)
			g.Close()
			if got != want {
				rt.Fatalf("with checkpoints the store answers otherwise than without: %s", firstDiff(got, want))
			}
		}
		for i, steps := 0, rapid.IntRange(1, 40).Draw(rt, "steps"); i < steps; i++ {
			id := rapid.SampledFrom([]string{"a", "c"}).Draw(rt, "id")
			seq++
			var c session.Change
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2:
				for k := rapid.IntRange(1, 6).Draw(rt, "k"); k > 0; k-- {
					c.AppendMessages = append(c.AppendMessages, message(seq*10+k))
				}
				c.AppendTraces = []session.Trace{{Seq: uint64(seq), Type: "tool", RunID: "r-" + id}}
			case 3:
				cut := int64(rapid.IntRange(0, 5).Draw(rt, "cut"))
				c.TruncateMessages = &cut
			case 4:
				c.PutArtifacts = []session.Artifact{{ID: rapid.SampledFrom([]string{"x", "y"}).Draw(rt, "art"), Data: []byte(message(seq))}}
			case 5:
				c.UpsertRuns = []session.Run{{RunID: "r-" + id, Status: session.RunRunning, ToolCallsCount: int64(seq)}}
				c.Checkpoint = &session.LoopCheckpoint{RunID: "r-" + id, Turn: int64(seq)}
			case 6:
				if err := s.Compact(bg, id); err != nil && session.CodeOf(err) != session.CodeNotFound {
					rt.Fatal(err)
				}
				continue
			case 7:
				img := t.TempDir()
				copyTree(t, dir, img, "")
				compare(img)
				continue
			case 8:
				s.Close()
				compare(dir)
				if s, err = fsstore.Open(dir, opts); err != nil {
					rt.Fatal(err)
				}
				continue
			case 9:
				c.Metadata = map[string]session.Value{"k": session.Value(fmt.Sprint(seq))}
			}
			if _, err := s.Commit(bg, id, &c, session.CommitOptions{}); err != nil && session.CodeOf(err) != session.CodeInvalidArgument {
				rt.Fatal(err)
			}
		}
		s.Close()
		compare(dir)
		s, _ = fsstore.Open(dir, opts)
	})
}

// firstDiff describes where two observations first differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < min(len(g), len(w)); i++ {
		if g[i] == w[i] {
			continue
		}
		j := 0
		for j < min(len(g[i]), len(w[i])) && g[i][j] == w[i][j] {
			j++
		}
		lo := max(j-80, 0)
		return fmt.Sprintf("line %d at %d: got ...%.200s, want ...%.200s", i, j, g[i][lo:], w[i][lo:])
	}
	if len(g) != len(w) {
		return fmt.Sprintf("%d lines, want %d", len(g), len(w))
	}
	return "same"
}

// TestIndexCheckpointInBackground: a log that grows far past its
// checkpoint gets a new one while the store is open, with no Close; an
// image of the store taken then (as a crash leaves it) opens from that
// checkpoint, walks only the commits after it, and answers what a full
// walk answers.
func TestIndexCheckpointInBackground(t *testing.T) {
	dir := t.TempDir()
	opts := fsstore.Options{IndexCheckpointBytes: 1024, CompactMinBytes: 1 << 40}
	s := openT(t, dir, opts)
	idx := filepath.Join(sessionsDir(dir), "s-a.idx")
	for i := 1; ; i++ {
		must(t, second(s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{message(i)}}, session.CommitOptions{})))
		if _, err := os.Stat(idx); err == nil {
			break
		}
		if i > 2000 {
			t.Fatal("no checkpoint was written in the background")
		}
	}
	// Commits after the checkpoint are the tail the reopen walks.
	for i := 0; i < 3; i++ {
		must(t, second(s.Commit(bg, "a", &session.Change{AppendMessages: []session.Value{message(9000 + i)}}, session.CommitOptions{})))
	}
	img := t.TempDir()
	copyTree(t, dir, img, "")
	got, want, idxAt, _ := openedBoth(t, img)
	if idxAt == 0 {
		t.Error("the reopen did not use the checkpoint written in the background")
	}
	if got != want {
		t.Errorf("with the checkpoint the store answers otherwise than without: %s", firstDiff(got, want))
	}
}
