package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// Options configure a Client. The zero value is ready to use.
type Options struct {
	// MaxMessageSize is the largest message the client sends or accepts;
	// 0 means DefaultMaxMessageSize.
	MaxMessageSize int64
	// NoAutoStart makes Connect fail with ErrNoDaemon instead of starting
	// cairnd when no daemon answers.
	NoAutoStart bool
	// DaemonPath is the cairnd executable to start; empty means: the
	// CAIRN_DAEMON environment variable, then "cairnd" next to the loaded
	// libcairn, then next to the running executable, then on PATH (see
	// FindDaemon).
	DaemonPath string
	// DaemonArgs are extra arguments for a started cairnd, after the
	// default "--idle-timeout=10m" (DefaultIdleTimeout), which an
	// "--idle-timeout=D" here overrides ("--idle-timeout=0": never exit).
	DaemonArgs []string
	// StartTimeout bounds how long Connect waits for a daemon it started to
	// answer; 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// ClientName is sent in hello, for the daemon's logs.
	ClientName string
	// EventBuffer is the buffer of each Subscription's channel; 0 means
	// DefaultEventBuffer.
	EventBuffer int
	// CallTimeout bounds each Call: its turn to write, the request's write
	// and the wait for its answer. When it passes first, the call fails
	// with an error wrapping ErrNoAnswer (and ErrUnavailable); a request
	// that reached the daemon may still be carried out. A write it cuts
	// short closes the connection (the daemon drops the partial frame
	// unread); the next call reconnects. 0 means no bound beyond ctx. It
	// leaves alone the methods that Unbounded names, whose work grows with
	// the store or has a timeout of its own.
	CallTimeout time.Duration
	// HandshakeTimeout bounds each connection's upgrade and hello: a
	// daemon that takes the connection and does not answer within it (one
	// stopped, or stuck on its disk) fails the dial with a NoAnswerError,
	// which Connect returns at once. 0 means the caller's context alone.
	HandshakeTimeout time.Duration
}

// DefaultEventBuffer is the default buffer of a Subscription's channel.
const DefaultEventBuffer = 256

func (o *Options) maxMessageSize() int64 {
	if o.MaxMessageSize <= 0 {
		return DefaultMaxMessageSize
	}
	return max(o.MaxMessageSize, MinMaxMessageSize)
}

// Client is a connection to a cairnd. It is safe for concurrent use; calls
// are multiplexed over one connection.
type Client struct {
	workspace string // canonical workspace; "" for a Client made by Dial
	socket    string
	opts      Options

	mu     sync.Mutex // guards cur, closed; held while reconnecting
	cur    *conn
	closed bool
}

// Dial connects to the daemon listening at socketPath, without auto-start.
// It fails with an error wrapping ErrNoDaemon when nothing listens there,
// and with one wrapping ErrUnavailable when the daemon went away during
// the handshake (or answered 503); Dial does not retry. A Client made by
// Dial does not reconnect.
func Dial(ctx context.Context, socketPath string, opts *Options) (*Client, error) {
	c := &Client{socket: socketPath}
	if opts != nil {
		c.opts = *opts
	}
	cn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.cur = cn
	return c, nil
}

// Socket returns the socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// Hello returns what the daemon said about itself on the current
// connection (or the last one).
func (c *Client) Hello() api.HelloResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return api.HelloResult{}
	}
	return c.cur.hello
}

// Close closes the connection cleanly. Calls in progress fail with
// ErrClosed or ErrConnectionLost; later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.cur != nil {
		c.cur.close(ErrClosed)
	}
	return nil
}

// connFor returns a live connection, reconnecting (with auto-start) when
// the client was made by Connect and its connection broke.
func (c *Client) connFor(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.cur != nil && c.cur.alive() {
		return c.cur, nil
	}
	if c.cur != nil {
		lost := c.cur.failure()
		c.cur.close(lost)
		if c.workspace == "" {
			return nil, lost
		}
	}
	cn, err := c.connectLocked(ctx)
	if err != nil {
		return nil, err
	}
	c.cur = cn
	return cn, nil
}

// dialUnix connects to the Unix socket at path, its reads and writes
// raw system calls where rawSocket makes them so (Linux).
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	return rawSocket(c), nil
}

// dial opens one connection to c.socket and says hello.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	if d := c.opts.HandshakeTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	path := c.socket
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialUnix(ctx, path)
		},
		DisableKeepAlives: true,
	}}
	start := time.Now()
	ws, resp, err := websocket.Dial(ctx, "ws://cairnd/", &websocket.DialOptions{
		HTTPClient:   hc,
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("%w at %s: %w", ErrNoDaemon, path, err)
		case errors.Is(err, syscall.EAGAIN):
			// A Unix socket's connect fails so when the listener's
			// backlog is full: a daemon not accepting (stopped, or swamped).
			return nil, fmt.Errorf("protocol.Dial %s: the daemon's listen backlog is full (it is not accepting connections): %w: %w", path, ErrUnavailable, err)
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, c.noAnswer(start)
		case ctx.Err() != nil:
		case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
			return nil, fmt.Errorf("protocol.Dial %s: the daemon refused the connection (503: stopping, or at its connection limit): %w: %w", path, ErrUnavailable, err)
		case goingAway(err):
			return nil, fmt.Errorf("protocol.Dial %s: the daemon went away during the handshake: %w: %w", path, ErrUnavailable, err)
		}
		return nil, fmt.Errorf("protocol.Dial %s: %w", path, err)
	}
	if ws.Subprotocol() != Subprotocol {
		ws.CloseNow()
		return nil, fmt.Errorf("protocol.Dial %s: daemon did not accept subprotocol %s", path, Subprotocol)
	}
	cn := newConn(ws, c.opts)
	var h api.HelloResult
	if err := cn.call(ctx, api.Hello.Name, api.HelloParams{ProtocolVersion: api.ProtocolVersion, Client: c.opts.ClientName}, &h); err != nil {
		cn.close(ErrClosed)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, c.noAnswer(start)
		}
		if errors.Is(err, ErrConnectionLost) {
			return nil, fmt.Errorf("protocol.Dial %s: hello: the daemon went away: %w: %w", path, ErrUnavailable, err)
		}
		return nil, fmt.Errorf("protocol.Dial %s: hello: %w", path, err)
	}
	cn.hello = h
	// Never send what the daemon would refuse (it would close the
	// connection): adopt its limit when it is lower than ours.
	if l := h.Limits.MaxMessageSize; l > 0 && l < cn.maxSize {
		cn.maxSize = l
	}
	return cn, nil
}

// noAnswer is the error of a handshake (upgrade or hello) that a deadline
// (the caller's, or HandshakeTimeout) ended after start: the socket took the connection and
// nothing answered. It names the cairnd holding the workspace, and its
// state, when they can be told.
func (c *Client) noAnswer(start time.Time) error {
	after := time.Since(start)
	if after >= time.Second {
		after = after.Round(time.Second) // the caller's bound, nearly: 5s, not 4.998s
	} else {
		after = after.Round(10 * time.Millisecond)
	}
	e := &NoAnswerError{Socket: c.socket, After: after}
	if c.workspace != "" {
		e.FindHolder(c.workspace)
	}
	return e
}

// goingAway reports whether a handshake error is what a daemon that is
// exiting causes: the connection was made, then closed or reset before the
// answer (SIGKILL, or a shutdown racing the upgrade). A live daemon always
// answers the upgrade, so such a failure is worth another try.
func goingAway(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// Call sends one request and decodes its result into result (which may be
// nil). A *RemoteError reports the daemon's answer; context errors, ErrClosed
// and ErrConnectionLost report that no answer arrived.
//
// A call whose request never left (the connection was found dead, or
// writing the request failed: a daemon that died after this client's last
// call and before its reader saw it) is sent again, once, on a new
// connection when the client reconnects (Connect); no daemon saw the first
// attempt, so nothing is done twice.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	d := c.opts.CallTimeout
	if d <= 0 || Unbounded(method) {
		return c.call(ctx, method, params, result)
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := c.call(tctx, method, params, result)
	// The bound may have ended a redial too (a handshake's NoAnswerError):
	// the call is worded the same.
	if err != nil && ctx.Err() == nil && tctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrNoAnswer)) {
		return &NoAnswerError{Method: method, After: d}
	}
	return err
}

// Unbounded reports whether Options.CallTimeout leaves method alone: the
// methods whose work grows with the store or a session (verify, repair,
// export, exportFile, import, importFile, fork) and those with a timeout of
// their own, up to 5 minutes (runtime.check, runtime.restart). They wait
// as long as the caller's context allows.
func Unbounded(method string) bool {
	switch method {
	case api.Verify.Name, api.Repair.Name, api.Export.Name, api.ExportFile.Name, api.Import.Name, api.ImportFile.Name, api.Fork.Name,
		api.RuntimeCheck.Name, api.RuntimeRestart.Name:
		return true
	}
	return false
}

func (c *Client) call(ctx context.Context, method string, params, result any) error {
	cn, err := c.connFor(ctx)
	if err != nil {
		return err
	}
	err = cn.call(ctx, method, params, result)
	var u *unsentError
	if !errors.As(err, &u) {
		return err
	}
	if c.workspace == "" {
		return u.err
	}
	cn, err = c.connFor(ctx)
	if err != nil {
		return err
	}
	err = cn.call(ctx, method, params, result)
	if errors.As(err, &u) {
		return u.err
	}
	return err
}

// unsentError is a call's failure before its request left: the connection
// was already dead, or the write failed. A request not written whole is
// dropped unread by the daemon (a frame is only acted on once complete),
// so the call was not made.
type unsentError struct{ err error }

func (e *unsentError) Error() string { return e.err.Error() }
func (e *unsentError) Unwrap() error { return e.err }

// reply is what a call waits for.
type reply struct {
	result cbor.RawMessage
	err    *WireError
	lost   error
	// buf, when set, holds result (a slice of the message read into it):
	// the call hands it back to readBufs once result is decoded.
	buf *[]byte
}

// readBufs holds the buffers the reader reads messages into (kept up to
// 16 MiB, a few pages of messages).
var readBufs = MessageBufs{Max: 16 << 20}

// Loan keeps the read buffers that results decoded under it borrow from:
// a page of messages (api.MessagesResult) decoded with its messages as
// slices of the answer's bytes rather than copies of them. A caller that
// is done with such a result before it calls again (the C API encodes the
// page into the memory it answers in) makes the call with a context from
// WithLoan and releases the loan once done; other results, and every
// call made without a loan, are decoded into copies. A Loan is for one
// goroutine's calls; its zero value is ready.
type Loan struct{ bufs []*[]byte }

type loanKey struct{}

// WithLoan returns ctx carrying l: results decoded under it may borrow
// from buffers l keeps until l.Release.
func WithLoan(ctx context.Context, l *Loan) context.Context {
	return context.WithValue(ctx, loanKey{}, l)
}

// Release hands back the buffers l kept: no result decoded under l may be
// used after it.
func (l *Loan) Release() {
	for _, bp := range l.bufs {
		readBufs.Put(bp)
	}
	clear(l.bufs)
	l.bufs = l.bufs[:0]
}

// conn is one WebSocket connection with its reader goroutine. Callers write
// their own requests, one at a time (wmu). Read never gets a caller's
// context, nor does Write unless Options.CallTimeout is set, because
// coder/websocket closes the connection when such a context ends: a caller
// whose context ends while waiting for the write turn or for the answer
// just stops waiting. (A write already under way is not interrupted,
// unless CallTimeout bounds it; writes to the local socket finish unless
// the daemon stops reading: it died, and the connection is lost anyway, or
// it is stopped or stuck, which only CallTimeout bounds.)
type conn struct {
	ws      *websocket.Conn
	maxSize int64
	evBuf   int
	hello   api.HelloResult
	// boundWrites: the call's context bounds the request's write
	// (Options.CallTimeout); otherwise writes run under the connection's.
	boundWrites bool

	ctx    context.Context // connection lifetime
	cancel context.CancelFunc
	wmu    chan struct{} // write turn: holds one token while a request is written
	dead   chan struct{} // closed when the connection fails
	wg     sync.WaitGroup
	nextID atomic.Uint64

	mu      sync.Mutex // guards pending, subs, err
	pending map[uint64]chan reply
	subs    map[*Subscription]struct{}
	err     error // why the connection is dead
}

func newConn(ws *websocket.Conn, opts Options) *conn {
	ws.SetReadLimit(opts.maxMessageSize())
	ctx, cancel := context.WithCancel(context.Background())
	cn := &conn{
		ws:          ws,
		maxSize:     opts.maxMessageSize(),
		evBuf:       opts.EventBuffer,
		boundWrites: opts.CallTimeout > 0,
		ctx:         ctx,
		cancel:      cancel,
		wmu:         make(chan struct{}, 1),
		dead:        make(chan struct{}),
		pending:     make(map[uint64]chan reply),
		subs:        make(map[*Subscription]struct{}),
	}
	if cn.evBuf <= 0 {
		cn.evBuf = DefaultEventBuffer
	}
	cn.wg.Add(1)
	go cn.readLoop()
	return cn
}

func (cn *conn) alive() bool {
	select {
	case <-cn.dead:
		return false
	default:
		return true
	}
}

// failure returns why the connection died, wrapping ErrConnectionLost.
func (cn *conn) failure() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err == nil {
		return ErrConnectionLost
	}
	return cn.err
}

// fail marks the connection dead (once), fails every pending call and ends
// every subscription.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return
	}
	if errors.Is(err, ErrClosed) {
		cn.err = ErrClosed
	} else {
		cn.err = fmt.Errorf("%w: %w", ErrConnectionLost, err)
	}
	pending, subs := cn.pending, cn.subs
	cn.pending, cn.subs = map[uint64]chan reply{}, map[*Subscription]struct{}{}
	close(cn.dead)
	lost := cn.err
	cn.mu.Unlock()
	for _, ch := range pending {
		ch <- reply{lost: lost}
	}
	for s := range subs {
		s.end(lost)
	}
}

// close closes the WebSocket cleanly and waits for the reader goroutine.
func (cn *conn) close(why error) {
	cn.fail(why)
	// Close does the closing handshake (bounded inside the library); the
	// reader goroutine receives the peer's close frame and exits.
	_ = cn.ws.Close(websocket.StatusNormalClosure, "")
	cn.cancel()
	cn.wg.Wait()
}

// testHookReadFailed, when set (by a test), runs in the reader goroutine
// when its read fails, before the reader marks the connection dead; it is
// given the channel closed once the connection is dead.
var testHookReadFailed atomic.Pointer[func(dead <-chan struct{})]

func (cn *conn) readLoop() {
	defer cn.wg.Done()
	defer cn.cancel()
	for {
		typ, bp, err := readBufs.Read(cn.ctx, cn.ws)
		if err != nil {
			if h := testHookReadFailed.Load(); h != nil {
				(*h)(cn.dead)
			}
			cn.fail(err)
			return
		}
		if typ != websocket.MessageBinary {
			readBufs.Put(bp)
			continue
		}
		msg := *bp
		if id, result, ok := decodeAnswer(msg); ok {
			cn.answer(id, reply{result: result, buf: bp})
			continue
		}
		// Unmarshal copies what it decodes: msg is not needed after it.
		var in inbound
		err = Unmarshal(msg, &in)
		readBufs.Put(bp)
		if err != nil {
			continue // a daemon bug; nothing to route it to
		}
		switch {
		case in.Event != "":
			cn.deliver(in.Event, in.Data)
		case in.ID != nil:
			cn.answer(*in.ID, reply{result: in.Result, err: in.Error})
		}
	}
}

// answer hands r to the call waiting for answer id, if any.
func (cn *conn) answer(id uint64, r reply) {
	cn.mu.Lock()
	ch, ok := cn.pending[id]
	delete(cn.pending, id)
	cn.mu.Unlock()
	if !ok {
		readBufs.Put(r.buf) // nobody waits for it any more
		return
	}
	ch <- r
	// The caller is now next to run on this thread; let it run before
	// this goroutine reads again (a read that finds nothing and parks is
	// on the answer's critical path).
	runtime.Gosched()
}

func (cn *conn) forget(id uint64) {
	cn.mu.Lock()
	delete(cn.pending, id)
	cn.mu.Unlock()
}

func (cn *conn) call(ctx context.Context, method string, params, result any) error {
	id := cn.nextID.Add(1)
	// The request is encoded into a pooled buffer, which Write is done
	// with when it returns (it copies or sends it before).
	bp := getBuf()
	defer putBuf(bp)
	msg, err := appendRequestMsg(*bp, id, method, params)
	*bp = msg
	if err != nil {
		return fmt.Errorf("protocol.Call %s: %w", method, err)
	}
	if int64(len(msg)) > cn.maxSize {
		return fmt.Errorf("protocol.Call %s: request is %d bytes, limit %d: %w", method, len(msg), cn.maxSize, ErrTooLarge)
	}
	ch := make(chan reply, 1)
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		return &unsentError{err}
	}
	cn.pending[id] = ch
	cn.mu.Unlock()

	select {
	case cn.wmu <- struct{}{}:
	case <-ctx.Done():
		cn.forget(id)
		return ctx.Err()
	case <-cn.dead:
		return &unsentError{cn.failure()}
	}
	wctx := cn.ctx
	if cn.boundWrites {
		// The call's deadline cuts a write that the daemon does not take
		// (stopped, or its socket buffer full): the library then closes
		// the connection.
		wctx = ctx
	}
	werr := cn.ws.Write(wctx, websocket.MessageBinary, msg)
	<-cn.wmu
	if werr != nil {
		cn.fail(werr)
		return &unsentError{cn.failure()}
	}
	select {
	case r := <-ch:
		switch {
		case r.lost != nil:
			return r.lost
		case r.err != nil:
			return &RemoteError{Method: method, Code: session.Code(r.err.Code), Message: r.err.Message, Data: r.err.Data}
		case result != nil:
			loan, _ := ctx.Value(loanKey{}).(*Loan)
			borrowed, err := decodeResult(r.result, result, loan != nil && r.buf != nil)
			if borrowed {
				loan.bufs = append(loan.bufs, r.buf)
				return nil
			}
			readBufs.Put(r.buf)
			if err != nil {
				return fmt.Errorf("protocol.Call %s: decode result: %w", method, err)
			}
			return nil
		}
		readBufs.Put(r.buf)
		return nil
	case <-ctx.Done():
		cn.forget(id)
		return ctx.Err()
	}
}

// deliver hands an event to the matching subscriptions without blocking.
func (cn *conn) deliver(event string, raw cbor.RawMessage) {
	var data map[string]any
	if len(raw) > 0 {
		if err := Unmarshal(raw, &data); err != nil {
			return
		}
	}
	ev := api.Event{Type: event, Data: data}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for s := range cn.subs {
		s.offer(ev)
	}
}
