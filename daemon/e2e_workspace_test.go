package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// TestE2EDriftAcrossDaemonKill saves a session through a real cairnd, kills
// the daemon with SIGKILL, changes files while nothing watches, starts a
// new daemon, and checks that resume names exactly those changes.
func TestE2EDriftAcrossDaemonKill(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	testkit.WriteFile(t, ws, "main.go", "package main")
	testkit.WriteFile(t, ws, "doc/old.md", "old")
	testkit.WriteFile(t, ws, "node_modules/dep/index.js", "ignored")
	p := startCairnd(t, ws)
	c := p.dial(t)
	if _, err := c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{session.Value(`1`)}}}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done

	testkit.WriteFile(t, ws, "main.go", "package main // edited while the daemon was down")
	if err := os.Remove(filepath.Join(ws, "doc/old.md")); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, ws, "doc/new.md", "new")
	testkit.WriteFile(t, ws, "node_modules/dep/index.js", "ignored, changed")

	p2 := startCairnd(t, ws)
	c2 := p2.dial(t)
	defer c2.Close()
	got, err := c2.ResumeSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	d := got.Drift
	if !d.Tracked || !slices.Equal(d.Added, []string{"doc/new.md"}) || !slices.Equal(d.Modified, []string{"main.go"}) || !slices.Equal(d.Deleted, []string{"doc/old.md"}) {
		t.Fatalf("drift after the daemon was down = %+v", d)
	}
}

// TestE2EChangesAndFileEvents checks the changes method and the
// file.changed push over the socket.
func TestE2EChangesAndFileEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws := t.TempDir()
	p := startCairnd(t, ws)
	c := p.dial(t)
	defer c.Close()
	first, err := c.Changes(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !first.FreshInstance || first.Clock == "" {
		t.Fatalf("first changes = %+v", first)
	}
	sub, err := c.Subscribe(ctx, api.EventFileChanged)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(ctx)
	testkit.WriteFile(t, ws, "a/b/c/f.txt", "burst")
	select {
	case ev := <-sub.C:
		if ev.Type != api.EventFileChanged || ev.Data["path"] != "a/b/c/f.txt" || ev.Data["kind"] != "added" {
			t.Fatalf("event = %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("no file.changed event")
	}
	next, err := c.Changes(ctx, first.Clock)
	if err != nil {
		t.Fatal(err)
	}
	if next.FreshInstance || !slices.Equal(next.Added, []string{"a/b/c/f.txt"}) {
		t.Fatalf("changes since %s = %+v", first.Clock, next)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Files == nil || st.Files.Mode == "" {
		t.Fatalf("status files = %+v, %v", st.Files, err)
	}
	if _, err := c.Changes(ctx, "not-a-clock"); session.CodeOf(err) != session.CodeInvalidArgument {
		t.Fatalf("bad clock: %v", err)
	}
}
