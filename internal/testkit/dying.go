package testkit

import (
	"bufio"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// DyingDaemon listens on sock as a daemon on its way out looks to a
// client: it accepts each connection, reads the upgrade request and closes
// the connection unanswered. After n connections (n < 0: never) it closes
// the listener, which removes the socket. It returns the count of
// handshakes it cut; it is stopped at cleanup.
func DyingDaemon(t testing.TB, sock string, n int) *atomic.Int32 {
	t.Helper()
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var cut atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ln.Close()
		for n < 0 || int(cut.Load()) < n {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = cn.SetReadDeadline(time.Now().Add(5 * time.Second))
			// Read the request up to its blank line, so the client is
			// waiting for the answer when the connection goes.
			r := bufio.NewReader(cn)
			for {
				line, err := r.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			cn.Close()
			cut.Add(1)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return &cut
}
