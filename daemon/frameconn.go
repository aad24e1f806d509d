package daemon

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// errReadsShut is what a frameConn's reads return once shutReads was called.
var errReadsShut = errors.New("daemon: reads shut on this connection")

// frameConn is the socket under one protocol connection, from the upgrade
// on. It follows the WebSocket framing of the bytes it hands the WebSocket
// library (frameCursor), so it knows when a frame has started to arrive and
// not finished: a read then gets a deadline of timeout from the moment it
// starts, and a sender that stalls mid-frame for that long fails the read
// (stalled reports it). Between frames reads have no deadline: an idle
// connection stays open.
//
// The library reads under its own read lock, so Read is never called
// concurrently; mu orders Read's deadline against shutReads.
type frameConn struct {
	net.Conn
	timeout time.Duration
	cur     frameCursor

	mu       sync.Mutex // guards the fields below
	shut     bool       // shutReads was called
	deadline bool       // a read deadline is set
	stalled  bool       // a read failed on the frame deadline
}

// Read reads from the socket with the frame deadline when a frame is
// incomplete.
func (f *frameConn) Read(p []byte) (int, error) {
	f.mu.Lock()
	if f.shut {
		f.mu.Unlock()
		return 0, errReadsShut
	}
	switch {
	case f.cur.inFrame():
		_ = f.Conn.SetReadDeadline(time.Now().Add(f.timeout))
		f.deadline = true
	case f.deadline:
		_ = f.Conn.SetReadDeadline(time.Time{})
		f.deadline = false
	}
	f.mu.Unlock()
	n, err := f.Conn.Read(p)
	f.cur.advance(p[:n])
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		f.mu.Lock()
		if f.shut {
			err = errReadsShut
		} else {
			f.stalled = true
		}
		f.mu.Unlock()
	}
	return n, err
}

// shutReads makes every read, the one blocked now included, fail at once:
// the connection is being closed, and nothing it sends matters any more.
func (f *frameConn) shutReads() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shut = true
	_ = f.Conn.SetReadDeadline(time.Unix(1, 0))
}

// isStalled reports whether a read failed because a frame stalled.
func (f *frameConn) isStalled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stalled
}

// frameCursor follows the frame boundaries of a WebSocket byte stream
// (RFC 6455 §5.2): a 2-byte header start, 0, 2 or 8 bytes of extended
// payload length, 4 bytes of mask key when the mask bit is set, then the
// payload. It reads only the header bytes; payload is skipped in bulk.
type frameCursor struct {
	have int    // header bytes of the current frame seen so far
	ext  int    // its extended payload length bytes: 0, 2 or 8
	hlen int    // its header's full length, once the second byte is seen
	plen uint64 // the payload length being read from the header
	left uint64 // payload bytes of the current frame still to come
}

// inFrame reports whether a frame has started and not ended.
func (c *frameCursor) inFrame() bool { return c.have > 0 || c.left > 0 }

// advance moves the cursor over b.
func (c *frameCursor) advance(b []byte) {
	for len(b) > 0 {
		if c.left > 0 {
			k := min(uint64(len(b)), c.left)
			c.left -= k
			b = b[k:]
			continue
		}
		x := b[0]
		b = b[1:]
		c.have++
		switch {
		case c.have == 1: // FIN, RSV and opcode: no length in it
		case c.have == 2:
			c.ext, c.plen = 0, uint64(x&0x7f)
			switch c.plen {
			case 126:
				c.ext, c.plen = 2, 0
			case 127:
				c.ext, c.plen = 8, 0
			}
			c.hlen = 2 + c.ext
			if x&0x80 != 0 {
				c.hlen += 4
			}
		case c.have <= 2+c.ext:
			c.plen = c.plen<<8 | uint64(x)
		}
		if c.have >= 2 && c.have == c.hlen {
			c.left, c.have, c.ext, c.hlen, c.plen = c.plen, 0, 0, 0, 0
		}
	}
}

// hijackTap hands the WebSocket library a frameConn in place of the
// hijacked socket. Bytes the HTTP server had already buffered past the
// upgrade request (a client that did not wait for the 101) reach the
// library from that buffer, not through the frameConn, so the cursor starts
// past them.
type hijackTap struct {
	http.ResponseWriter
	timeout time.Duration
	fc      *frameConn // set by Hijack
}

// Hijack hijacks the underlying connection and wraps it.
func (h *hijackTap) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.fc = &frameConn{Conn: conn, timeout: h.timeout}
	if n := brw.Reader.Buffered(); n > 0 {
		early, _ := brw.Reader.Peek(n)
		h.fc.cur.advance(early)
	}
	return h.fc, brw, nil
}
