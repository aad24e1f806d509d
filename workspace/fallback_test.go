package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestWatchLimitFallback simulates fs.inotify.max_user_watches running out
// part-way through the initial scan: the tracker must fall back to polling,
// say which limit to raise, and still report changes, both through Changes
// (which rescans) and through subscribers (fed by the poll).
func TestWatchLimitFallback(t *testing.T) {
	root := t.TempDir()
	for i := range 10 {
		testkit.WriteFile(t, root, fmt.Sprintf("d%d/f.txt", i), "x")
	}
	tr := openT(t, root, Options{WatchLimit: 4, PollInterval: 20 * time.Millisecond})
	st := tr.Status()
	if st.Mode != ModePolling || !strings.Contains(st.Warning, "fs.inotify.max_user_watches") || st.Watches != 0 {
		t.Fatalf("status = %+v, want polling naming fs.inotify.max_user_watches", st)
	}
	sameIndex(t, tr)
	since := tr.Clock()
	var mu sync.Mutex
	var got []string
	cancel := tr.Subscribe(func(path, kind string) {
		mu.Lock()
		got = append(got, kind+" "+path)
		mu.Unlock()
	})
	defer cancel()
	testkit.WriteFile(t, root, "d3/new.txt", "n")
	testkit.WriteFile(t, root, "d4/f.txt", "changed")
	os.Remove(filepath.Join(root, "d5/f.txt"))
	// The poll alone notices, without anyone calling Sync.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscriber got %q, want 3 changes from polling", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantChanges(t, changesT(t, tr, since), []string{"d3/new.txt"}, []string{"d4/f.txt"}, []string{"d5/f.txt"})
	if st := tr.Status(); st.Rescans == 0 {
		t.Fatalf("status = %+v, want rescans", st)
	}
	sameIndex(t, tr)
}

// TestForcePolling covers inotify being unavailable altogether.
func TestForcePolling(t *testing.T) {
	root := t.TempDir()
	testkit.WriteFile(t, root, "a.txt", "a")
	tr := openT(t, root, Options{ForcePolling: true, PollInterval: time.Hour})
	if st := tr.Status(); st.Mode != ModePolling {
		t.Fatalf("mode = %s", st.Mode)
	}
	since := tr.Clock()
	testkit.WriteFile(t, root, "b/c.txt", "c")
	// Sync rescans in polling mode, so Changes is exact without waiting
	// for the (hour-long) poll.
	wantChanges(t, changesT(t, tr, since), []string{"b/c.txt"}, nil, nil)
}
