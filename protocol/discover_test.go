package protocol_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/protocol"
)

func TestDiscover(t *testing.T) {
	root, err := protocol.Workspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mk := func(p ...string) string {
		d := filepath.Join(append([]string{root}, p...)...)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// root/ws/.cairn, root/ws/repo/.git (a workspace above a repository),
	// root/repo2/.git (a file, as in a git worktree), root/plain.
	ws := filepath.Dir(mk("ws", ".cairn"))
	mk("ws", "repo", ".git")
	repo2 := mk("repo2")
	os.WriteFile(filepath.Join(repo2, ".git"), []byte("gitdir: elsewhere\n"), 0o644)
	plain := mk("plain", "a")
	for _, tc := range []struct {
		name, start, want string
		found             bool
	}{
		{"the workspace itself", ws, ws, true},
		{"below a workspace, through a repository", mk("ws", "repo", "src", "x"), ws, true},
		{"below a worktree without .cairn", mk("repo2", "a", "b"), repo2, false},
		{"no workspace, no repository", plain, plain, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := protocol.Discover(tc.start)
			if err != nil || got != tc.want || found != tc.found {
				t.Fatalf("Discover(%s) = %s, %v, %v; want %s, %v", tc.start, got, found, err, tc.want, tc.found)
			}
		})
	}
}

// TestConnectDiscovers: Connect without a workspace connects to the one
// above the current directory, and makes no .cairn where it runs.
func TestConnectDiscovers(t *testing.T) {
	ws, err := protocol.Workspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(ws, "src")
	if err := os.MkdirAll(filepath.Join(ws, ".cairn"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(sub, 0o755)
	bin := cairnd(t) // built before the directory changes
	t.Chdir(sub)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := protocol.Connect(ctx, "", &protocol.Options{DaemonPath: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopDaemon(t, c.Hello().PID) })
	defer c.Close()
	if got := c.Hello().Workspace; got != ws {
		t.Fatalf("Connect(\"\") from %s served %s, want %s", sub, got, ws)
	}
	if _, err := os.Stat(filepath.Join(sub, ".cairn")); err == nil {
		t.Fatal("Connect made .cairn in the current directory")
	}
}
