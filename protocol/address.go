package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/internal/layout"
)

// MaxSocketPathLen is the longest socket path a Unix socket address holds:
// sun_path is 108 bytes including the terminating NUL. The names inside a
// workspace (PROTOCOL.md §1) are internal/layout's.
const MaxSocketPathLen = 107

// Workspace returns the canonical form of a workspace directory: absolute,
// cleaned, symlinks resolved. Client and daemon both use it, so they agree
// on the socket path.
func Workspace(dir string) (string, error) {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("protocol.Workspace: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("protocol.Workspace: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("protocol.Workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("protocol.Workspace: %s is not a directory", real)
	}
	return real, nil
}

// DefaultSocketPath returns <workspace>/.cairn/cairnd.sock.
func DefaultSocketPath(workspace string) string {
	return layout.Socket(workspace)
}

// AddrFilePath returns <workspace>/.cairn/cairnd.addr.
func AddrFilePath(workspace string) string {
	return layout.AddrFile(workspace)
}

// ShortSocketPath returns the socket path used when the default one is too
// long: <dir>/<hash>.sock, where dir is $XDG_RUNTIME_DIR/cairn when
// XDG_RUNTIME_DIR is an absolute path, else /tmp/cairn-<uid>, and hash is
// the first 16 hex digits of the SHA-256 of the workspace path.
func ShortSocketPath(workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	name := hex.EncodeToString(sum[:8]) + ".sock"
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		p := filepath.Join(x, "cairn", name)
		if len(p) <= MaxSocketPathLen {
			return p
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("cairn-%d", os.Getuid()), name)
}

// ServeSocketPath returns the path a daemon for workspace binds: the default
// path when it fits in sun_path, else ShortSocketPath. The second result
// reports whether the short path is used (and so must be recorded in the
// addr file).
func ServeSocketPath(workspace string) (string, bool) {
	p := DefaultSocketPath(workspace)
	if len(p) <= MaxSocketPathLen {
		return p, false
	}
	return ShortSocketPath(workspace), true
}

// SocketPath returns the path a client dials for workspace (canonical, see
// Workspace): the path recorded in the addr file when it exists, else the
// path a daemon would bind (ServeSocketPath). Without an addr file no
// daemon serves a workspace whose default path is too long, and dialing
// the short path says so (no daemon) where dialing the over-long default
// fails with EINVAL, which would stop Connect from starting one.
func SocketPath(workspace string) (string, error) {
	b, err := os.ReadFile(AddrFilePath(workspace))
	switch {
	case errors.Is(err, os.ErrNotExist):
		p, _ := ServeSocketPath(workspace)
		return p, nil
	case err != nil:
		return "", fmt.Errorf("protocol.SocketPath: %w", err)
	}
	p := strings.TrimSpace(string(b))
	if !filepath.IsAbs(p) || len(p) > MaxSocketPathLen {
		return "", fmt.Errorf("protocol.SocketPath: %s holds %q, not an absolute socket path", AddrFilePath(workspace), p)
	}
	return p, nil
}
