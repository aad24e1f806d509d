package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// watchBudgetTree writes a tree of tops*subs leaf directories (plus tops
// parents), each leaf holding f.txt, and returns its root.
func watchBudgetTree(t *testing.T, tops, subs int) string {
	t.Helper()
	ws := t.TempDir()
	for i := range tops {
		for j := range subs {
			dir := filepath.Join(ws, fmt.Sprintf("d%02d/s%02d", i, j))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ws
}

// TestE2EWatchBudget runs cairnd with a watch budget (the hidden
// --test-watch-limit) far below the tree's 3,060 directories, so it polls,
// and a second cairnd with --no-track-files over a tree of the same shape.
// Saves through the polling daemon must stay close to the untracked ones:
// before the fallback walked without the lock, each save waited for a full
// rescan held under it (measured 30-70x slower here; 16-32 s a save on a
// 200,401-directory tree). Drift stays exact, and SIGTERM during the
// polling exits well within `cairn daemon stop`'s 15 s wait.
//
// The bound on the ratio of mean save latencies is 5: a tracked save in
// polling mode adds one RecordManifest that walks only the paths changed
// since the previous manifest (none here) and may wait for one slice of
// at most 64 directories to be applied, while a save that walks the whole
// tree costs tens of times more than the commit itself.
func TestE2EWatchBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	const tops, subs = 60, 50
	tracked := watchBudgetTree(t, tops, subs)
	untracked := watchBudgetTree(t, tops, subs)
	pt := startCairnd(t, tracked, "--test-watch-limit", "16")
	pu := startCairnd(t, untracked, "--no-track-files")
	ct, cu := pt.dial(t), pu.dial(t)

	st, err := ct.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files == nil || st.Files.Mode != "polling" || !strings.Contains(st.Files.Warning, "max_user_watches") {
		t.Fatalf("tracked daemon's files status = %+v, want polling past the watch limit", st.Files)
	}
	if st.Files.Dirs < tops*subs {
		t.Fatalf("tracked daemon indexes %d directories, want the whole tree (%d+)", st.Files.Dirs, tops*subs)
	}

	save := func(c *protocol.Client, id string, i int) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: id, Change: &session.Change{AppendMessages: []session.Value{session.Value(fmt.Sprintf(`{"n":%d}`, i))}}}); err != nil {
			t.Fatalf("save %s #%d: %v", id, i, err)
		}
		return time.Since(start)
	}
	// The first save of each daemon creates the session, and the tracked
	// one hashes the whole tree for its first manifest: not measured.
	for i := range 3 {
		save(ct, "s", i)
		save(cu, "s", i)
	}
	const n = 40
	var sumT, sumU time.Duration
	for i := range n {
		// Interleaved, so both see the same machine.
		sumT += save(ct, "s", 3+i)
		sumU += save(cu, "s", 3+i)
	}
	ratio := float64(sumT) / float64(sumU)
	t.Logf("mean save: tracked (polling) %v, untracked %v, ratio %.2f", sumT/n, sumU/n, ratio)
	if ratio > 5 {
		t.Errorf("saves with a polling tracker take %.1fx as long as untracked ones, want at most 5x", ratio)
	}

	// Drift: a file edited before a save, once the poll has seen it, is
	// not drift; files changed after the save are, exactly.
	sub, err := ct.Subscribe(ctx, api.EventFileChanged)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, tracked, "d00/s00/f.txt", "edited before the save")
	for seen := false; !seen; {
		select {
		case ev := <-sub.C:
			seen = ev.Data["path"] == "d00/s00/f.txt"
		case <-ctx.Done():
			t.Fatal("the polling tracker never reported d00/s00/f.txt changed")
		}
	}
	sub.Close(ctx)
	save(ct, "s", 1000)
	writeFile(t, tracked, "d01/s01/f.txt", "edited after the save")
	writeFile(t, tracked, "d02/s02/new.txt", "added after the save")
	if err := os.Remove(filepath.Join(tracked, "d03/s03/f.txt")); err != nil {
		t.Fatal(err)
	}
	got, err := ct.ResumeSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	d := got.Drift
	if !d.Tracked || !slices.Equal(d.Added, []string{"d02/s02/new.txt"}) || !slices.Equal(d.Modified, []string{"d01/s01/f.txt"}) || !slices.Equal(d.Deleted, []string{"d03/s03/f.txt"}) {
		t.Fatalf("drift = %+v, want d02/s02/new.txt added, d01/s01/f.txt modified, d03/s03/f.txt deleted", d)
	}
	if f := got.Snapshot.Files; f == nil || !f.Inexact || d.Reason == "" {
		t.Fatalf("files = %+v, drift reason %q: a manifest taken while polling must say it is inexact", f, d.Reason)
	}

	// SIGTERM while a pass is under way (Changes asks for an exact one).
	go ct.Changes(ctx, "")
	time.Sleep(5 * time.Millisecond)
	if err := pt.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := pt.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("cairnd exited with %d after SIGTERM; log:\n%s", code, pt.logText())
	}
}

func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
