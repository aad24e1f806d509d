package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// errReadsShut is what a frameConn's reads return once shutReads was called.
var errReadsShut = errors.New("daemon: reads shut on this connection")

// errTooBig is what a frameConn's reads return once a frame header declared
// a message over the size limit.
var errTooBig = errors.New("daemon: a frame header declares a message over the size limit")

// frameConn is the socket under one protocol connection, from the upgrade
// on. It follows the WebSocket framing of the bytes it hands the WebSocket
// library (frameCursor), so it knows when a frame has started to arrive and
// not finished: a read then gets a deadline of timeout from the moment it
// starts, and a sender that stalls mid-frame for that long fails the read
// (stalled reports it). Between frames reads have no deadline: an idle
// connection stays open.
//
// It also checks each data frame's declared length as soon as the frame's
// header is complete: when the message's frames so far declare more than
// the size limit, it hands the library the header and nothing more, and
// every later read fails (tooBig reports it). The payload is never read, so
// the connection is closed with 1009 at once, not after the library's read
// limit has counted the message's bytes in.
//
// Every write gets a deadline (see Write): a client that stops reading
// fails the write that waits on it within the write timeout.
//
// The library reads under its own read lock, so Read is never called
// concurrently; mu orders Read's deadline against shutReads. It writes
// under its own write lock too, so Write is never called concurrently.
type frameConn struct {
	net.Conn
	timeout time.Duration
	cur     frameCursor

	// The write deadline: wtimeout is Config.WriteTimeout (0: none), wdl
	// the deadline set on the socket (Unix ns). See Write.
	wtimeout time.Duration
	wdl      atomic.Int64

	mu       sync.Mutex // guards the fields below
	shut     bool       // shutReads was called
	deadline bool       // a read deadline is set
	stalled  bool       // a read failed on the frame deadline
	tooBig   bool       // a frame header declared a message over the limit
}

// Read reads from the socket with the frame deadline when a frame is
// incomplete.
func (f *frameConn) Read(p []byte) (int, error) {
	f.mu.Lock()
	if f.shut {
		f.mu.Unlock()
		return 0, errReadsShut
	}
	if f.tooBig {
		f.mu.Unlock()
		return 0, errTooBig
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
	if k := f.cur.advance(p[:n]); f.cur.over {
		// What came after the header is the refused payload: drop it.
		f.mu.Lock()
		f.tooBig = true
		f.mu.Unlock()
		return k, nil
	}
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

// Write writes p with the socket's write deadline at least wtimeout away,
// and at most wtimeout+wtimeout/8: the deadline is moved only once less
// than wtimeout is left. Setting a deadline arms a runtime timer, and
// arming one can wake a thread to watch it; a write deadline (or a context
// with a timeout) per message cost that on every answer, a timer per
// wtimeout/8 of activity does not. An expired deadline is always moved
// before the next write, so an idle spell never fails a later write.
func (f *frameConn) Write(p []byte) (int, error) {
	if f.wtimeout > 0 {
		now := time.Now()
		if f.wdl.Load()-now.UnixNano() < int64(f.wtimeout) {
			dl := now.Add(f.wtimeout + f.wtimeout/8)
			f.wdl.Store(dl.UnixNano())
			_ = f.Conn.SetWriteDeadline(dl)
		}
	}
	return f.Conn.Write(p)
}

// shutReads makes every read, the one blocked now included, fail at once:
// the connection is being closed, and nothing it sends matters any more.
func (f *frameConn) shutReads() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shut = true
	_ = f.Conn.SetReadDeadline(time.Unix(1, 0))
}

// pending reports whether the library has more of the client's bytes
// buffered than the read messages: a frame begun, or a whole message not
// read yet. Bytes still in the socket are not looked for. Only the reader
// calls it, as only the reader's reads move the cursor.
func (f *frameConn) pending(read uint64) bool {
	return f.cur.inFrame() || f.cur.msgs > read
}

// isTooBig reports whether a frame header declared a message over the limit.
func (f *frameConn) isTooBig() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tooBig
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
// payload. It reads only the header bytes; payload is skipped in bulk. With
// a limit, it adds up the declared payload of each data message's frames
// (control frames do not count) and stops at a header that takes the
// message over the limit.
type frameCursor struct {
	have  int    // header bytes of the current frame seen so far
	ext   int    // its extended payload length bytes: 0, 2 or 8
	hlen  int    // its header's full length, once the second byte is seen
	op    byte   // its opcode
	plen  uint64 // the payload length being read from the header
	left  uint64 // payload bytes of the current frame still to come
	limit uint64 // the largest message; 0: none
	msg   uint64 // payload declared by the current data message's frames
	over  bool   // a header took a message over limit; the cursor stopped
	fin   bool   // the current frame's FIN bit
	// msgs counts the data messages whose last frame has been handed on
	// whole: the reader has read all of them once it has read as many
	// messages (see frameConn.pending).
	msgs uint64
}

// inFrame reports whether a frame has started and not ended.
func (c *frameCursor) inFrame() bool { return c.have > 0 || c.left > 0 }

// advance moves the cursor over b and returns how many bytes of b it took:
// all of them, unless a header in b takes a message over the limit; then
// it stops just after that header, and over is set.
func (c *frameCursor) advance(b []byte) int {
	n := 0
	for n < len(b) && !c.over {
		if c.left > 0 {
			k := min(uint64(len(b)-n), c.left)
			c.left -= k
			n += int(k)
			if c.left == 0 {
				c.ended()
			}
			continue
		}
		x := b[n]
		n++
		c.have++
		switch {
		case c.have == 1: // FIN, RSV and opcode: no length in it
			c.op, c.fin = x&0x0f, x&0x80 != 0
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
			c.count()
			c.left, c.have, c.ext, c.hlen, c.plen = c.plen, 0, 0, 0, 0
			if c.left == 0 && !c.over {
				c.ended()
			}
		}
	}
	return n
}

// ended notes that the current frame has been handed on whole.
func (c *frameCursor) ended() {
	if c.fin && c.op <= 0x2 { // the last frame of a data message
		c.msgs++
	}
}

// count adds a complete header's payload length to its message's.
func (c *frameCursor) count() {
	switch c.op {
	case 0x1, 0x2: // text, binary: a new message
		c.msg = c.plen
	case 0x0: // continuation
		c.msg += min(c.plen, math.MaxUint64-c.msg)
	default: // control frames are not part of a message
		return
	}
	if c.limit > 0 && c.msg > c.limit {
		c.over = true
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
	limit   int64 // the message size limit
	// writeTimeout bounds each write (frameConn.Write); 0: the library's
	// context is the only bound.
	writeTimeout time.Duration
	fc           *frameConn // set by Hijack
}

// hijackReadBuf is the size of the buffered reader the WebSocket library
// reads the connection through: room for a frame header and a typical
// request (a checkpoint's ~8 KiB) in one read call, where the HTTP
// server's 4 KiB reader takes two.
const hijackReadBuf = 16 << 10

// Hijack hijacks the underlying connection and wraps it, and gives the
// library a hijackReadBuf reader over it, holding what the HTTP server's
// reader had buffered.
func (h *hijackTap) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.fc = &frameConn{Conn: conn, timeout: h.timeout, wtimeout: h.writeTimeout}
	h.fc.cur.limit = uint64(max(h.limit, 0))
	if n := brw.Reader.Buffered(); n > 0 {
		// These reach the library before anything read through h.fc: an
		// oversized header among them fails the first read of h.fc.
		early, _ := brw.Reader.Peek(n)
		h.fc.cur.advance(early)
		h.fc.tooBig = h.fc.cur.over
	}
	// The library writes through brw.Writer: make it write through h.fc,
	// for the write deadline. The HTTP server has flushed the 101 by now;
	// Flush makes sure, as Reset drops what is buffered.
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	brw.Writer.Reset(h.fc)
	return h.fc, bufio.NewReadWriter(biggerReader(brw.Reader, h.fc), brw.Writer), nil
}

// biggerReader returns a hijackReadBuf reader that yields what old has
// buffered, then reads conn. The library takes over what the reader it is
// handed has buffered (and nothing of what it has not), so the early bytes
// are in the new reader's buffer before it is returned.
func biggerReader(old *bufio.Reader, conn net.Conn) *bufio.Reader {
	n := old.Buffered()
	if n == 0 {
		return bufio.NewReaderSize(conn, hijackReadBuf)
	}
	if n > hijackReadBuf {
		return old // the HTTP server's reader is smaller: never
	}
	early, _ := old.Peek(n)
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(early)), conn), hijackReadBuf)
	// One read of the bytes.Reader fills the buffer with all of them and
	// nothing of conn.
	_, _ = br.Peek(n)
	return br
}
