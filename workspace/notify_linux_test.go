//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestQuietCommitsNeedNoCookie records 1,000 manifests of an unchanged
// tree and checks that no Sync took the cookie round trip; then, after a
// change has been committed (by whichever path), 1,000 more, again
// without one: a cookie's own events are applied before its Sync returns.
func TestQuietCommitsNeedNoCookie(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "src/main.go", "package main\n")
	tr := openT(t, root, Options{})
	if tr.Status().Mode != ModeWatching {
		t.Skip("inotify unavailable")
	}
	quiet := func(phase string) {
		t.Helper()
		before := tr.cookieSyncs.Load()
		for i := range 1000 {
			if _, err := tr.RecordManifest(testkit.Context(t)); err != nil {
				t.Fatalf("%s, commit %d: %v", phase, i, err)
			}
		}
		if n := tr.cookieSyncs.Load() - before; n != 0 {
			t.Fatalf("%s: %d of 1000 quiet commits needed a cookie, want 0", phase, n)
		}
	}
	quiet("after open")
	testkit.WriteFile(t, root, "src/new.go", "package main // new\n")
	if _, err := tr.RecordManifest(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Lookup("src/new.go"); !ok {
		t.Fatal("src/new.go, written before the commit, is not indexed")
	}
	// A forced cookie too, so its events are the last ones in flight.
	tr.opts.noFastSync = true
	syncT(t, tr)
	tr.opts.noFastSync = false
	quiet("after a change and a cookie")
}

// TestNotifierSettled checks the notifier's three stages directly: after a
// write returns, its event is queued, being read, or sent, and settled
// says no until the receiver reports it handled.
func TestNotifierSettled(t *testing.T) {
	dir := t.TempDir()
	nf, err := newNotifier(16)
	if err != nil {
		t.Skipf("inotify unavailable: %v", err)
	}
	t.Cleanup(func() { nf.Close() })
	if err := nf.Add(dir); err != nil {
		t.Fatal(err)
	}
	waitSettled := func(handled *uint64) {
		t.Helper()
		// The reader goes back to read(2) after sending, which briefly
		// counts as reading: wait for it, boundedly. An event of the write
		// that came later than the pause below (a loaded machine) is
		// taken and counted here: until it is, settled rightly says no.
		deadline := time.Now().Add(10 * time.Second)
		for !nf.settled(*handled) {
			if time.Now().After(deadline) {
				t.Fatalf("not settled with %d handled", *handled)
			}
			select {
			case <-nf.Events():
				*handled++
			case <-time.After(time.Millisecond):
			}
		}
	}
	var handled uint64
	waitSettled(&handled)
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		if nf.settled(handled) {
			t.Fatalf("write %d: settled right after a write returned", i)
		}
		// Take every event the write raised (create or truncate, then
		// modify), then the notifier must settle again.
		for {
			select {
			case <-nf.Events():
				handled++
				continue
			case err := <-nf.Errors():
				t.Fatalf("watcher error: %v", err)
			case <-time.After(20 * time.Millisecond):
			}
			break
		}
		if nf.settled(handled - 1) {
			t.Fatalf("write %d: settled with an event not yet handled", i)
		}
		waitSettled(&handled)
	}
}

// TestNotifierCloseReleasesInstance checks that Close stops the reader
// (its channels are closed when Close returns) and that the inotify
// instance's descriptors, the last of which Close leaves to a goroutine to
// close, are all closed soon after: opening and closing notifiers leaks no
// descriptor and no watch.
func TestNotifierCloseReleasesInstance(t *testing.T) {
	fds := func() int {
		t.Helper()
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skipf("no /proc/self/fd: %v", err)
		}
		return len(ents)
	}
	dir := t.TempDir()
	before := fds()
	for range 20 {
		n, err := newNotifier(16)
		if err != nil {
			t.Skipf("inotify unavailable: %v", err)
		}
		if err := n.Add(dir); err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if _, open := <-n.Events(); open {
			t.Fatal("events channel open after Close")
		}
		if _, open := <-n.Errors(); open {
			t.Fatal("errors channel open after Close")
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for fds() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open after 20 notifiers closed, %d before", fds(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
