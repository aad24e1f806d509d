//go:build !linux

package daemon

import "net"

// socketBuffered reports false: elsewhere only the bytes the library has
// been handed tell whether more input is here.
func socketBuffered(net.Conn) bool { return false }
