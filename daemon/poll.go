package daemon

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/internal/busypoll"
)

// DefaultPollWindow is the default Config.PollWindow. A client working in
// a loop sends its next request within tens of microseconds of reading an
// answer.
const DefaultPollWindow = 100 * time.Microsecond

// activity tells a connection's polling reads (internal/busypoll) when a
// request is expected: for the poll window after an answer, when this
// connection's client usually sends its next request within the window,
// while the server runs no request at all. Polling pays only for a client
// that calls in a tight loop; one that takes longer to turn around (after a
// pause, or through a host's threads) would only find a CPU taken, and a
// busy server has work for its CPUs.
type activity struct {
	conn     *busypoll.Conn
	busy     *atomic.Int32 // the server's requests in flight
	window   time.Duration
	pollTo   atomic.Int64 // unix nanoseconds
	answered atomic.Int64 // unix nanoseconds of the last answer; 0: none yet
	turn     atomic.Int64 // moving average of answer-to-next-request, ns; 0: unknown
}

func (a *activity) expect() bool {
	return a.busy.Load() == 0 && time.Now().UnixNano() < a.pollTo.Load()
}

// request records a request's arrival: how long the client took to turn
// around since the last answer. A nil activity (polling off) ignores it.
func (a *activity) request() {
	if a == nil {
		return
	}
	last := a.answered.Load()
	if last == 0 {
		return
	}
	d := time.Now().UnixNano() - last
	if old := a.turn.Load(); old > 0 {
		d = (3*old + d) / 4
	}
	a.turn.Store(max(d, 1))
}

// answer records an answer and, when the client usually turns around within
// the poll window, opens the window and wakes the reader to poll in it.
// Call it once the answered request no longer counts as in flight. A nil
// activity ignores it.
func (a *activity) answer() {
	if a == nil {
		return
	}
	now := time.Now().UnixNano()
	a.answered.Store(now)
	if t := a.turn.Load(); t == 0 || t >= int64(a.window) {
		return
	}
	a.pollTo.Store(now + int64(a.window))
	a.conn.Kick()
}

type activityKey struct{}

// pollListener wraps each accepted Unix connection for polling reads.
type pollListener struct {
	net.Listener
	window time.Duration
	busy   *atomic.Int32
}

// pollConn is an accepted connection with its activity, which connContext
// hands to the connection's requests.
type pollConn struct {
	*busypoll.Conn
	act *activity
}

func (l *pollListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || l.window <= 0 {
		return c, err
	}
	a := &activity{busy: l.busy, window: l.window}
	if a.conn = busypoll.Wrap(c, l.window, a.expect); a.conn == nil {
		return c, nil
	}
	return pollConn{Conn: a.conn, act: a}, nil
}

type rawConnKey struct{}

// connContext is the http.Server's ConnContext: it records in the context
// of a connection's requests the socket itself (for pace) and, when its
// reads poll, its activity.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			ctx = context.WithValue(ctx, rawConnKey{}, raw)
		}
	}
	if pc, ok := c.(pollConn); ok {
		return context.WithValue(ctx, activityKey{}, pc.act)
	}
	return ctx
}

// rawConnOf returns the socket connContext recorded, or nil.
func rawConnOf(ctx context.Context) syscall.RawConn {
	raw, _ := ctx.Value(rawConnKey{}).(syscall.RawConn)
	return raw
}

// activityOf returns the activity connContext recorded, or nil.
func activityOf(ctx context.Context) *activity {
	a, _ := ctx.Value(activityKey{}).(*activity)
	return a
}
