package protocol_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/protocol"
)

// longWorkspace returns a canonical workspace whose default socket path is
// longer than sun_path holds.
func longWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for len(protocol.DefaultSocketPath(dir)) <= protocol.MaxSocketPathLen+20 {
		dir = filepath.Join(dir, strings.Repeat("d", 30))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ws, err := protocol.Workspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// TestSocketPathLongWorkspace: with no addr file (no daemon ever ran), a
// workspace whose default socket path is too long is dialed at the short
// path a daemon would bind, never at the over-long one.
func TestSocketPathLongWorkspace(t *testing.T) {
	ws := longWorkspace(t)
	got, err := protocol.SocketPath(ws)
	if err != nil {
		t.Fatal(err)
	}
	if want := protocol.ShortSocketPath(ws); got != want {
		t.Fatalf("SocketPath = %q (%d bytes), want the short path %q", got, len(got), want)
	}
}

// TestConnectLongWorkspace: auto-start works on a deeply nested workspace
// with no daemon running. The client used to dial the over-long default
// path and fail with "connect: invalid argument" instead of starting one.
func TestConnectLongWorkspace(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	ws := longWorkspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := protocol.Connect(ctx, ws, &protocol.Options{DaemonPath: cairnd(t), StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Connect on a %d-byte socket path workspace: %v", len(protocol.DefaultSocketPath(ws)), err)
	}
	pid := c.Hello().PID
	t.Cleanup(func() { c.Close(); stopDaemon(t, pid) })
	if _, err := c.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Socket(), protocol.ShortSocketPath(ws); got != want {
		t.Fatalf("client dialed %q, want the short path %q", got, want)
	}
	if b, err := os.ReadFile(protocol.AddrFilePath(ws)); err != nil || strings.TrimSpace(string(b)) != c.Socket() {
		t.Fatalf("addr file holds %q (%v), want %q", b, err, c.Socket())
	}
}
