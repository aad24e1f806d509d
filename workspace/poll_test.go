package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
)

// pollTree writes n directories d000..d<n-1>, each holding f.txt.
func pollTree(t *testing.T, n int) string {
	t.Helper()
	root := t.TempDir()
	for i := range n {
		testkit.WriteFile(t, root, fmt.Sprintf("d%03d/f.txt", i), "x")
	}
	return root
}

// parkAt returns a poll hook that stops the walk before it reads dir, until
// release is closed; entered is closed when it gets there.
func parkAt(dir string) (hook func(string), entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	return func(rel string) {
		if rel == dir && once.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
	}, entered, release
}

// within fails the test if fn does not return within a generous bound: it
// detects a deadlock (a commit waiting for a walk), it does not time one.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s is blocked by a polling pass parked mid-walk", what)
	}
}

// TestPollingWalksWithoutTheLock parks a polling pass in the middle of the
// tree and checks that a commit's manifest, a lookup and Status go through
// meanwhile: the walk holds no lock. The manifest says it is inexact.
func TestPollingWalksWithoutTheLock(t *testing.T) {
	root := pollTree(t, 40)
	hook, entered, release := parkAt("d020")
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	tr := openT(t, root, Options{WatchLimit: 4, PollInterval: 10 * time.Millisecond, pollHook: hook})
	if st := tr.Status(); st.Mode != ModePolling {
		t.Fatalf("mode = %s, want polling", st.Mode)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no polling pass reached d020")
	}
	within(t, "RecordManifest", func() {
		ref, err := tr.RecordManifest(testkit.Context(t))
		if err != nil {
			t.Errorf("RecordManifest: %v", err)
		}
		if !ref.Inexact || ref.ID == "" || ref.Entries != 40 {
			t.Errorf("ref = %+v, want an inexact manifest of 40 files", ref)
		}
	})
	within(t, "Lookup", func() {
		if _, ok := tr.Lookup("d000/f.txt"); !ok {
			t.Error("d000/f.txt not indexed")
		}
	})
	within(t, "Status", func() { tr.Status() })
	close(release)
}

// TestPollingSyncIsExact checks that Sync in polling mode sees a change in a
// directory that the pass under way had already read when the change was
// made: Sync waits for a pass that starts after it was called, and that
// pass is not throttled.
func TestPollingSyncIsExact(t *testing.T) {
	// More directories than one slice reads, so the pass is still under
	// way when Changes asks.
	root := pollTree(t, 2*pollSliceDirs)
	hook, entered, release := parkAt("d010")
	tr := openT(t, root, Options{ForcePolling: true, PollInterval: 10 * time.Millisecond, PollDuty: 0.01, pollHook: hook})
	since := tr.Clock()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("no polling pass reached d010")
	}
	testkit.WriteFile(t, root, "d001/new.txt", "read before this change")
	got := make(chan api.ChangeSet, 1)
	go func() {
		cs, err := tr.Changes(testkit.Context(t), since)
		if err != nil {
			t.Error(err)
		}
		got <- cs
	}()
	close(release)
	wantChanges(t, <-got, []string{"d001/new.txt"}, nil, nil)
	sameIndex(t, tr)
}

// TestPollingDriftIsExact records inexact manifests in polling mode (the
// poll never runs: its interval is an hour) and checks that Diff against
// the tree still names exactly what changed since.
func TestPollingDriftIsExact(t *testing.T) {
	root := pollTree(t, 5)
	tr := openT(t, root, Options{ForcePolling: true, PollInterval: time.Hour})
	ctx := testkit.Context(t)
	ref, err := tr.RecordManifest(ctx)
	if err != nil || !ref.Inexact {
		t.Fatalf("RecordManifest = %+v, %v; want an inexact manifest", ref, err)
	}
	testkit.WriteFile(t, root, "d001/f.txt", "edited")
	testkit.WriteFile(t, root, "d009/g.txt", "added")
	if err := os.Remove(filepath.Join(root, "d002/f.txt")); err != nil {
		t.Fatal(err)
	}
	d, err := tr.Diff(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !eqList(d.Added, []string{"d009/g.txt"}) || !eqList(d.Modified, []string{"d001/f.txt"}) || !eqList(d.Deleted, []string{"d002/f.txt"}) {
		t.Fatalf("diff = %+v", d)
	}
}

// TestCloseStopsAPollingPass closes the tracker while a pass is part-way
// through a tree: the walk checks the stop signal before each directory,
// so it reads no more once Close has begun, and Close returns.
func TestCloseStopsAPollingPass(t *testing.T) {
	const dirs = 2 * pollSliceDirs
	root := pollTree(t, dirs)
	var read atomic.Int64
	parked, entered, release := parkAt("d010")
	hook := func(rel string) {
		read.Add(1)
		parked(rel)
	}
	tr, err := Open(root, Options{ForcePolling: true, PollInterval: 10 * time.Millisecond, pollHook: hook})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(release)
		tr.Close()
		t.Fatal("no polling pass reached d010")
	}
	closed := make(chan error, 1)
	go func() { closed <- tr.Close() }()
	<-tr.closing
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a polling pass was under way")
	}
	// The hook had seen the root and d000..d010 when the pass parked; a
	// walk that checked the stop signal only between slices would go on to
	// read the rest of its slice.
	if n := read.Load(); n != 12 {
		t.Fatalf("the pass reached %d directories, want 12: it went on after Close began", n)
	}
}
