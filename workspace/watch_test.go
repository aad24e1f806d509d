package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestEditorSavePatterns saves a file the ways editors do and checks that
// Changes names exactly the saved file and that the index matches a fresh
// scan afterwards.
func TestEditorSavePatterns(t *testing.T) {
	cases := []struct {
		name                     string
		save                     func(t *testing.T, root string)
		added, modified, deleted []string
	}{
		{
			name: "write in place",
			save: func(t *testing.T, root string) {
				f, err := os.OpenFile(filepath.Join(root, "src/main.go"), os.O_WRONLY|os.O_TRUNC, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString("package main // edited in place\n")
				f.Close()
			},
			modified: []string{"src/main.go"},
		},
		{
			name: "write temp and rename over",
			save: func(t *testing.T, root string) {
				testkit.WriteFile(t, root, "src/.main.go.swp.tmp", "package main // via temp\n")
				if err := os.Rename(filepath.Join(root, "src/.main.go.swp.tmp"), filepath.Join(root, "src/main.go")); err != nil {
					t.Fatal(err)
				}
			},
			modified: []string{"src/main.go"},
		},
		{
			name: "delete and create",
			save: func(t *testing.T, root string) {
				if err := os.Remove(filepath.Join(root, "src/main.go")); err != nil {
					t.Fatal(err)
				}
				testkit.WriteFile(t, root, "src/main.go", "package main // recreated\n")
			},
			modified: []string{"src/main.go"},
		},
		{
			name: "vim backup and rename",
			save: func(t *testing.T, root string) {
				p := filepath.Join(root, "src/main.go")
				if err := os.Rename(p, p+"~"); err != nil {
					t.Fatal(err)
				}
				testkit.WriteFile(t, root, "src/main.go", "package main // written by vim\n")
				if err := os.Remove(p + "~"); err != nil {
					t.Fatal(err)
				}
			},
			modified: []string{"src/main.go"},
		},
		{
			name: "directory renamed with files inside",
			save: func(t *testing.T, root string) {
				if err := os.Rename(filepath.Join(root, "src"), filepath.Join(root, "lib")); err != nil {
					t.Fatal(err)
				}
			},
			added:   []string{"lib/deep/x.txt", "lib/main.go", "lib/util.go"},
			deleted: []string{"src/deep/x.txt", "src/main.go", "src/util.go"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			testkit.WriteFile(t, root, "src/main.go", "package main\n")
			testkit.WriteFile(t, root, "src/util.go", "package main // util\n")
			testkit.WriteFile(t, root, "src/deep/x.txt", "x\n")
			testkit.WriteFile(t, root, "README", "readme\n")
			tr := openT(t, root, Options{})
			ref, err := tr.RecordManifest(testkit.Context(t))
			if err != nil {
				t.Fatal(err)
			}
			since := changesT(t, tr, "").Clock
			tc.save(t, root)
			wantChanges(t, changesT(t, tr, since), tc.added, tc.modified, tc.deleted)
			sameIndex(t, tr)
			d, err := tr.Diff(testkit.Context(t), ref, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantDiff(t, d, tc.added, tc.modified, tc.deleted)
		})
	}
}

// TestRenamedDirectoryKeepsWatching checks that after a directory (with a
// subdirectory) is renamed, changes inside it are reported under the new
// name and never under the old one (fsnotify keeps old paths on the
// subdirectory's watch, issue #694).
func TestRenamedDirectoryKeepsWatching(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "old/sub/a.txt", "a")
	tr := openT(t, root, Options{})
	if err := os.Rename(filepath.Join(root, "old"), filepath.Join(root, "new")); err != nil {
		t.Fatal(err)
	}
	since := changesT(t, tr, "").Clock
	testkit.WriteFile(t, root, "new/sub/b.txt", "b")
	testkit.WriteFile(t, root, "new/sub/a.txt", "a2")
	wantChanges(t, changesT(t, tr, since), []string{"new/sub/b.txt"}, []string{"new/sub/a.txt"}, nil)
	// The old name, recreated, is a new directory with its own watch.
	testkit.WriteFile(t, root, "old/sub/c.txt", "c")
	since2 := changesT(t, tr, since).Clock
	testkit.WriteFile(t, root, "old/sub/c.txt", "c2")
	wantChanges(t, changesT(t, tr, since2), nil, []string{"old/sub/c.txt"}, nil)
	sameIndex(t, tr)
}

// TestMkdirPBurst creates nested directories and a file in one burst, as
// `mkdir -p a/b/c && touch a/b/c/f` does, before any watch on the new
// directories can exist.
func TestMkdirPBurst(t *testing.T) {
	root := t.TempDir()
	tr := openT(t, root, Options{})
	since := tr.Clock()
	var want []string
	for i := range 20 {
		dir := filepath.Join(root, fmt.Sprintf("a%d/b/c/d/e", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("a%d/b/c/d/e/f", i))
	}
	cs := changesT(t, tr, since)
	// Sorted like Changes sorts.
	wantSorted := append([]string(nil), want...)
	sortStrings(wantSorted)
	wantChanges(t, cs, wantSorted, nil, nil)
	sameIndex(t, tr)
	if st := tr.Status(); st.Mode != ModeWatching || st.Watches != 1+1+20*5 {
		t.Fatalf("status = %+v, want watching with %d watches", st, 2+20*5)
	}
}

// TestManyFilesIndexMatchesScan creates 20,000 files as fast as possible
// (with the default fs.inotify.max_queued_events of 16384 the queue may
// overflow) and checks the index, not the events: it must equal a fresh
// scan whether or not an overflow happened.
func TestManyFilesIndexMatchesScan(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "seed.txt", "seed")
	tr := openT(t, root, Options{})
	const n = 20000
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				dir := filepath.Join(root, fmt.Sprintf("d%02d", i%40), fmt.Sprintf("e%d", i%7))
				os.MkdirAll(dir, 0o755)
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.txt", i)), []byte("x"), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	syncT(t, tr)
	sameIndex(t, tr)
	st := tr.Status()
	if st.Files != n+1 {
		t.Fatalf("status files = %d, want %d", st.Files, n+1)
	}
	t.Logf("after %d files: events=%d overflows=%d rescans=%d", n, st.Events, st.Overflows, st.Rescans)
}

// TestForcedOverflow stalls the tracker while far more events than the
// kernel queue holds (fs.inotify.max_queued_events, 16384 by default) plus
// the fsnotify buffer are generated, so the queue really overflows; the
// tracker must count the overflow, rescan, and end with a correct index.
func TestForcedOverflow(t *testing.T) {
	root := t.TempDir()
	tr := openT(t, root, Options{EventBuffer: 64})
	if tr.Status().Mode != ModeWatching {
		t.Skip("inotify unavailable")
	}
	limit := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		fmt.Sscan(string(b), &limit)
	}
	if limit > 1<<16 {
		t.Skipf("max_queued_events = %d is too large to overflow quickly", limit)
	}
	since := tr.Clock()
	tr.mu.Lock() // the loop blocks on its next batch; the kernel queue fills
	n := limit + 2000
	for i := range n {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%06d", i)), nil, 0o644); err != nil {
			tr.mu.Unlock()
			t.Fatal(err)
		}
	}
	tr.mu.Unlock()
	syncT(t, tr)
	sameIndex(t, tr)
	st := tr.Status()
	if st.Overflows == 0 || st.Rescans == 0 {
		t.Fatalf("status = %+v, want an overflow and a rescan", st)
	}
	if cs := changesT(t, tr, since); len(cs.Added) != n || cs.FreshInstance {
		t.Fatalf("changes: fresh=%v added=%d, want %d", cs.FreshInstance, len(cs.Added), n)
	}
}

// TestSubscribe checks file.changed delivery and cancellation.
func TestSubscribe(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "gone.txt", "x")
	tr := openT(t, root, Options{})
	var mu sync.Mutex
	got := map[string]bool{}
	seen := make(chan struct{}, 100)
	cancel := tr.Subscribe(func(path, kind string) {
		mu.Lock()
		got[path+" "+kind] = true
		mu.Unlock()
		seen <- struct{}{}
	})
	defer cancel()
	testkit.WriteFile(t, root, "new.txt", "n")
	os.Remove(filepath.Join(root, "gone.txt"))
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		done := got["new.txt "+KindAdded] && got["gone.txt "+KindDeleted]
		mu.Unlock()
		if done {
			break
		}
		select {
		case <-seen:
		case <-deadline:
			t.Fatalf("events = %v", got)
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
