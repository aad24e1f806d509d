//go:build cgo

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestOpenHandshakeCutIsUnavailable: a daemon-mode cairn_open whose daemon
// cuts every handshake (as one being killed does) fails with unavailable,
// CAIRN_E_UNAVAILABLE, after the client's retries, not with internal.
func TestOpenHandshakeCutIsUnavailable(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(layout.StateDir(ws), 0o700); err != nil {
		t.Fatal(err)
	}
	testkit.DyingDaemon(t, layout.Socket(ws), -1)
	_, err := openHandle(fmt.Sprintf(`{"workspace":%q,"auto_start":false}`, ws))
	if codeOf(err) != "unavailable" || setError(err, nil) != codes["unavailable"] {
		t.Fatalf("cairn_open against a daemon that cuts every handshake: %v (code %s, rc %d), want unavailable", err, codeOf(err), setError(err, nil))
	}
}

// TestOpenDaemonModeEmbeddedHolder: a daemon-mode cairn_open of a workspace
// this process holds in embedded mode fails at once with locked,
// CAIRN_E_LOCKED, naming the holder's pid, and starts no daemon.
func TestOpenDaemonModeEmbeddedHolder(t *testing.T) {
	ws := t.TempDir()
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, ws))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeHandle(h) })
	_, err = openHandle(fmt.Sprintf(`{"workspace":%q,"daemon":"/nonexistent/cairnd"}`, ws))
	if codeOf(err) != "locked" || setError(err, nil) != codes["locked"] || !strings.Contains(messageOf(err), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("daemon-mode cairn_open of a workspace held embedded: %v (code %s), want locked naming pid %d", err, codeOf(err), os.Getpid())
	}
}

// TestOpenDiscoversWorkspace: cairn_open without a workspace opens the one
// above the current directory, not a new one where it runs.
func TestOpenDiscoversWorkspace(t *testing.T) {
	ws := t.TempDir()
	sub := filepath.Join(ws, "src", "pkg")
	if err := os.MkdirAll(layout.StateDir(ws), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	h, err := openHandle(`{"embedded":true}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeHandle(h) })
	if _, err := os.Stat(layout.Lock(ws)); err != nil {
		t.Fatalf("cairn_open from %s did not open %s: %v", sub, ws, err)
	}
	if _, err := os.Stat(layout.StateDir(sub)); err == nil {
		t.Fatalf("cairn_open made %s", layout.StateDir(sub))
	}
}
