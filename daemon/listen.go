//go:build unix

package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/protocol"
)

// Errors of Listen.
var (
	// ErrUnsafePath is returned when the socket's directory is not a
	// directory owned by this user, or the socket path holds something
	// other than a socket.
	ErrUnsafePath = errors.New("daemon: unsafe socket path")
)

// Listener is the workspace's bound socket.
type Listener struct {
	*net.UnixListener
	// Path is the socket path.
	Path string
	// AddrFile is the addr file written for a short path, or "".
	AddrFile string
}

// Listen binds the socket of workspace (canonical, see protocol.Workspace):
// <workspace>/.cairn/cairnd.sock, or a short path recorded in
// <workspace>/.cairn/cairnd.addr when that one is too long for sun_path.
//
// The caller must hold the workspace store's lock: Listen removes a socket
// left at the path, which is stale only because no other daemon can hold the
// lock. The socket is created 0600 in a 0700 directory owned by this user.
func Listen(workspace string) (*Listener, error) {
	path, short := protocol.ServeSocketPath(workspace)
	if err := ensurePrivateDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("daemon.Listen: %w", err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, fmt.Errorf("daemon.Listen: %w", err)
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("daemon.Listen: %w", err)
	}
	l := &Listener{UnixListener: ul, Path: path}
	// The directory is already 0700; the chmod narrows the socket itself.
	if err := os.Chmod(path, 0o600); err != nil {
		ul.Close()
		return nil, fmt.Errorf("daemon.Listen: %w", err)
	}
	addr := protocol.AddrFilePath(workspace)
	if short {
		if err := atomicfile.WriteFile(addr, []byte(path+"\n"), 0o600); err != nil {
			ul.Close()
			return nil, fmt.Errorf("daemon.Listen: record short socket path: %w", err)
		}
		l.AddrFile = addr
	} else if err := os.Remove(addr); err != nil && !errors.Is(err, os.ErrNotExist) {
		ul.Close()
		return nil, fmt.Errorf("daemon.Listen: remove stale addr file: %w", err)
	}
	return l, nil
}

// Close closes the listener, which removes the socket file, and removes
// the addr file it wrote.
func (l *Listener) Close() error {
	err := l.UnixListener.Close()
	if l.AddrFile != "" {
		_ = os.Remove(l.AddrFile)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("daemon.Listener.Close: %w", err)
	}
	return nil
}

// ensurePrivateDir creates dir (0700) if needed and checks that it is a
// real directory owned by this user, narrowing its mode to 0700.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafePath, dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%w: %s is owned by uid %d, not %d", ErrUnsafePath, dir, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// removeStaleSocket removes a socket file at path; anything else there is
// an error.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&os.ModeSocket == 0:
		return fmt.Errorf("%w: %s exists and is not a socket", ErrUnsafePath, path)
	}
	return os.Remove(path)
}
