//go:build !linux

package daemon

import "net"

// checkPeer accepts every peer: peer credentials are only checked on Linux.
// Elsewhere the socket's 0600 mode inside a 0700 directory is the guard.
func checkPeer(c *net.UnixConn, want int) (int, error) { return -1, nil }
