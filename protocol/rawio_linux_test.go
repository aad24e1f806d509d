package protocol

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// rawPair returns a client end wrapped by rawSocket and the server end of
// a real Unix socket.
func rawPair(t *testing.T) (*rawIO, net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); srv.Close() })
	rc, ok := rawSocket(c).(*rawIO)
	if !ok {
		t.Fatalf("rawSocket did not wrap a Unix socket: %T", rawSocket(c))
	}
	return rc, srv
}

// TestRawIOMovesEverythingInOrder: a write larger than the socket's
// buffers waits in the poller and resumes where it stopped (partial
// sends), and the reader gets every byte, in order, across reads that find
// nothing yet.
func TestRawIOMovesEverythingInOrder(t *testing.T) {
	c, srv := rawPair(t)
	msg := make([]byte, 8<<20)
	for i := range msg {
		msg[i] = byte(i*7 + i>>13)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // the writer fills the buffers first
		b, _ := io.ReadAll(io.LimitReader(srv, int64(len(msg))))
		got <- b
	}()
	if n, err := c.Write(msg); err != nil || n != len(msg) {
		t.Fatalf("write: %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, msg) {
		t.Fatalf("the peer read %d bytes, not the %d written, or not in order", len(b), len(msg))
	}
	go func() {
		time.Sleep(20 * time.Millisecond) // the reader waits first
		_, _ = srv.Write(msg[:100000])
	}()
	back := make([]byte, 0, 100000)
	buf := make([]byte, 4096)
	for len(back) < 100000 {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		back = append(back, buf[:n]...)
	}
	if !bytes.Equal(back, msg[:100000]) {
		t.Fatal("read back other bytes")
	}
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty read: %d, %v", n, err)
	}
}

// TestRawIOEndsAsTheNetPackageDoes: a read past its deadline fails with
// os.ErrDeadlineExceeded, a read after the peer closed returns io.EOF,
// and a write then fails with EPIPE or ECONNRESET (never SIGPIPE).
func TestRawIOEndsAsTheNetPackageDoes(t *testing.T) {
	c, srv := rawPair(t)
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if _, err := c.Read(make([]byte, 10)); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
	var err error
	for range 100 { // the first send after a close may still succeed
		if _, err = c.Write([]byte("x")); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("write to a closed peer: %v", err)
	}
	c.Close()
	if _, err := c.Read(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

// TestDialUnixIsRaw: the client's connections to cairnd are made by
// dialUnix, whose sockets do their reads and writes as raw system calls.
func TestDialUnixIsRaw(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := dialUnix(t.Context(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*rawIO); !ok {
		t.Fatalf("dialUnix gave a %T, not a *rawIO", c)
	}
}
