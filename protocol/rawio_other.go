//go:build !linux

package protocol

import "net"

// rawSocket returns c: the raw reads and writes are Linux's (rawio_linux.go).
func rawSocket(c net.Conn) net.Conn { return c }
