//go:build linux

package daemon

import (
	"fmt"
	"net"
	"syscall"
)

// checkPeer reads the peer's credentials (SO_PEERCRED) and accepts it only
// when its uid is want. It returns the peer's uid (-1 when unknown).
func checkPeer(c *net.UnixConn, want int) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("daemon: peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, fmt.Errorf("daemon: peer credentials: %w", err)
	}
	if serr != nil {
		return -1, fmt.Errorf("daemon: peer credentials: %w", serr)
	}
	if int(cred.Uid) != want {
		return int(cred.Uid), fmt.Errorf("%w: peer uid %d, daemon uid %d", errPeerRefused, cred.Uid, want)
	}
	return int(cred.Uid), nil
}
