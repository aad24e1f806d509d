// Package busypoll lets a Unix socket's reads poll for a short while before
// they park the goroutine in the runtime's network poller.
//
// On a virtual machine an idle vCPU halts, and waking it, then the thread
// parked in the network poller, then the goroutine, costs tens of
// microseconds per message: more than the rest of a local round trip. A
// reader that expects data within microseconds keeps its CPU awake by
// polling the socket without blocking, yielding the processor between
// polls, and parks only when its budget runs out or its owner stops
// expecting data. The price is CPU time: at most the budget per Read, and
// at most one polling Read per process at a time.
package busypoll

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// pollers is 1 while a Read of this process polls: polling never takes
// more than one CPU from the process's real work.
var pollers atomic.Int32

// longAgo is the read deadline Kick sets to wake a parked Read.
var longAgo = time.Unix(1, 0)

// Conn is a *net.UnixConn whose Read polls before it parks. Kick wakes a
// parked Read through the read deadline, so nothing else may set a read
// deadline on a Conn that is kicked.
type Conn struct {
	*net.UnixConn
	raw    syscall.RawConn
	budget time.Duration
	expect func() bool

	woken  atomic.Bool // Kick was called since the reader last asked expect
	parked atomic.Bool // a Read is about to wait, or waits, in the network poller
	closed atomic.Bool // Close was called: stop polling

	mu     sync.Mutex
	kicked bool // Kick set the read deadline; the next deadline error is its
}

// Wrap returns c with polling reads: a Read that finds no data polls for up
// to budget while expect reports true, then parks. expect is called from
// the reading goroutine before each poll and must be cheap. Wrap returns
// nil when c is not a *net.UnixConn or budget is not positive.
func Wrap(c net.Conn, budget time.Duration, expect func() bool) *Conn {
	uc, ok := c.(*net.UnixConn)
	if !ok || budget <= 0 {
		return nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil
	}
	return &Conn{UnixConn: uc, raw: raw, budget: budget, expect: expect}
}

// Kick tells the reader that data may now be expected: a Read parked in
// the network poller wakes and asks expect again, and a Read about to park
// asks again instead. Safe from any goroutine; a nil Conn ignores it.
func (c *Conn) Kick() {
	if c == nil {
		return
	}
	// Kick stores woken, then loads parked; read stores parked, then
	// loads woken. Either Kick sees the parked Read or the Read sees the
	// Kick: none is lost.
	c.woken.Store(true)
	if !c.parked.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kicked = true
	_ = c.UnixConn.SetReadDeadline(longAgo)
}

// Close closes the socket; a Read polling stops at once and fails.
func (c *Conn) Close() error {
	c.closed.Store(true)
	return c.UnixConn.Close()
}

// unkick reports whether err is the deadline Kick set, clearing it if so.
func (c *Conn) unkick(err error) (bool, error) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.kicked {
		return false, nil
	}
	c.kicked = false
	return true, c.UnixConn.SetReadDeadline(time.Time{})
}

// Read reads like (*net.UnixConn).Read, polling first when data is expected.
func (c *Conn) Read(p []byte) (int, error) {
	for {
		n, err := c.read(p)
		if err == nil {
			return n, nil
		}
		kicked, kerr := c.unkick(err)
		switch {
		case kerr != nil:
			return 0, kerr
		case !kicked:
			return n, err
		}
	}
}

func (c *Conn) read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var (
		n       int
		rerr    error
		polling bool
		start   time.Time
	)
	// poll starts polling when data is expected and no other Read polls.
	poll := func() bool {
		c.woken.Store(false)
		if !c.expect() || !pollers.CompareAndSwap(0, 1) {
			return false
		}
		polling, start = true, time.Now()
		return true
	}
	stop := func() {
		if polling {
			polling = false
			pollers.Store(0)
		}
	}
	defer stop()
	poll()
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), p)
			switch {
			case rerr == syscall.EINTR:
				continue
			case rerr != syscall.EAGAIN:
				return true
			case polling && time.Since(start) < c.budget && !c.closed.Load() && c.expect():
				runtime.Gosched()
				continue
			}
			stop()
			c.parked.Store(true)
			if c.woken.Load() && poll() {
				c.parked.Store(false) // kicked while deciding to park
				continue
			}
			return false
		}
	})
	c.parked.Store(false)
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "unix", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}
