package protocol

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/busypoll"
	"github.com/cairn-dev/cairn/session"
	"github.com/coder/websocket"
	"github.com/fxamacker/cbor/v2"
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
	// CAIRN_DAEMON environment variable, then "cairnd" next to the running
	// executable, then "cairnd" on PATH.
	DaemonPath string
	// DaemonArgs are extra arguments for a started cairnd (for example
	// "--idle-timeout=10m").
	DaemonArgs []string
	// StartTimeout bounds how long Connect waits for a daemon it started to
	// answer; 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// ClientName is sent in hello, for the daemon's logs.
	ClientName string
	// PollBudget bounds how long the connection's reader polls the socket
	// for an answer before it parks in the runtime's network poller (see
	// internal/busypoll): polling saves the wake-up of an idle CPU, tens
	// of microseconds on a virtual machine, at the price of CPU time. It
	// polls only while this is the process's one call waiting and the call
	// follows the previous answer within a millisecond, for twice the
	// method's recent latency; a method that takes longer than half the
	// budget is not polled for. 0 means DefaultPollBudget; negative means
	// never poll.
	PollBudget time.Duration
	// EventBuffer is the buffer of each Subscription's channel; 0 means
	// DefaultEventBuffer.
	EventBuffer int
}

// DefaultPollBudget is the default Options.PollBudget: calls that answer
// within 100 µs (status, reads the daemon serves from memory) are polled
// for. A durable commit is not: it waits on the disk for longer, and a
// client polling through it holds a CPU that the daemon's wake-up from
// fdatasync then waits for (BenchmarkCommitOverhead measured +89–105%
// polled against +70–83% unpolled on a 2-vCPU machine).
const DefaultPollBudget = 200 * time.Microsecond

// DefaultEventBuffer is the default buffer of a Subscription's channel.
const DefaultEventBuffer = 256

func (o *Options) pollBudget() time.Duration {
	if o.PollBudget == 0 {
		return DefaultPollBudget
	}
	return o.PollBudget
}

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
// It fails with an error wrapping ErrNoDaemon when nothing listens there.
// A Client made by Dial does not reconnect.
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

// dial opens one connection to c.socket and says hello.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	path := c.socket
	ps := new(pollState)
	var poller *busypoll.Conn
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, "unix", path)
			if err != nil {
				return nil, err
			}
			if poller = busypoll.Wrap(nc, c.opts.pollBudget(), ps.expect); poller != nil {
				return poller, nil
			}
			return nc, nil
		},
		DisableKeepAlives: true,
	}}
	ws, _, err := websocket.Dial(ctx, "ws://cairnd/", &websocket.DialOptions{
		HTTPClient:   hc,
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w at %s: %w", ErrNoDaemon, path, err)
		}
		return nil, fmt.Errorf("protocol.Dial %s: %w", path, err)
	}
	if ws.Subprotocol() != Subprotocol {
		ws.CloseNow()
		return nil, fmt.Errorf("protocol.Dial %s: daemon did not accept subprotocol %s", path, Subprotocol)
	}
	cn := newConn(ws, c.opts, ps, poller)
	var h api.HelloResult
	if err := cn.call(ctx, api.Hello.Name, api.HelloParams{ProtocolVersion: api.ProtocolVersion, Client: c.opts.ClientName}, &h); err != nil {
		cn.close(ErrClosed)
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

// Call sends one request and decodes its result into result (which may be
// nil). A *RemoteError reports the daemon's answer; context errors, ErrClosed
// and ErrConnectionLost report that no answer arrived.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	cn, err := c.connFor(ctx)
	if err != nil {
		return err
	}
	return cn.call(ctx, method, params, result)
}

// reply is what a call waits for.
type reply struct {
	result cbor.RawMessage
	err    *WireError
	lost   error
}

// conn is one WebSocket connection with its reader goroutine. Callers write
// their own requests, one at a time (wmu). Neither Read nor Write ever gets
// a caller's context, because coder/websocket closes the connection when
// such a context ends: a caller whose context ends while waiting for the
// write turn or for the answer just stops waiting. (A write already under
// way is not interrupted; writes to the local socket finish unless the
// daemon stops reading, and then the connection is lost anyway.)
type conn struct {
	ws      *websocket.Conn
	maxSize int64
	evBuf   int
	hello   api.HelloResult

	ctx    context.Context // connection lifetime
	cancel context.CancelFunc
	wmu    chan struct{} // write turn: holds one token while a request is written
	dead   chan struct{} // closed when the connection fails
	wg     sync.WaitGroup
	nextID atomic.Uint64

	poll   *pollState     // when the socket's reads poll
	poller *busypoll.Conn // the socket, or nil when its reads never poll
	budget time.Duration  // Options.PollBudget

	mu      sync.Mutex // guards pending, subs, err, latency
	pending map[uint64]chan reply
	latency map[string]time.Duration // recent answer latency per method
	subs    map[*Subscription]struct{}
	err     error // why the connection is dead
}

func newConn(ws *websocket.Conn, opts Options, ps *pollState, poller *busypoll.Conn) *conn {
	ws.SetReadLimit(opts.maxMessageSize())
	ctx, cancel := context.WithCancel(context.Background())
	cn := &conn{
		ws:      ws,
		maxSize: opts.maxMessageSize(),
		evBuf:   opts.EventBuffer,
		ctx:     ctx,
		cancel:  cancel,
		wmu:     make(chan struct{}, 1),
		dead:    make(chan struct{}),
		pending: make(map[uint64]chan reply),
		subs:    make(map[*Subscription]struct{}),
		poll:    ps,
		poller:  poller,
		budget:  opts.pollBudget(),
		latency: make(map[string]time.Duration),
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
	cn.pendingChangedLocked()
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

func (cn *conn) readLoop() {
	defer cn.wg.Done()
	defer cn.cancel()
	for {
		typ, msg, err := cn.ws.Read(cn.ctx)
		if err != nil {
			cn.fail(err)
			return
		}
		if typ != websocket.MessageBinary {
			continue
		}
		var in inbound
		if err := Unmarshal(msg, &in); err != nil {
			continue // a daemon bug; nothing to route it to
		}
		switch {
		case in.Event != "":
			cn.deliver(in.Event, in.Data)
		case in.ID != nil:
			cn.poll.answered.Store(time.Now().UnixNano())
			cn.mu.Lock()
			ch, ok := cn.pending[*in.ID]
			delete(cn.pending, *in.ID)
			cn.pendingChangedLocked()
			cn.mu.Unlock()
			if ok {
				ch <- reply{result: in.Result, err: in.Error}
				// The caller is now next to run on this thread; let it run
				// before this goroutine reads again (a read that finds
				// nothing and parks is on the answer's critical path).
				runtime.Gosched()
			}
		}
	}
}

// callsWaiting counts the calls of this process waiting for an answer, on
// every connection. A socket polls for its answer only while it is the one
// call waiting: with more, the process has other work for its CPUs, and
// polling would take CPU from it rather than save a wake-up.
var callsWaiting atomic.Int32

// pollState tells a connection's polling reads (internal/busypoll) when an
// answer is expected: while its one call waits, up to a deadline set from
// the method's recent latency, when the call follows the previous answer
// closely (see pollWarm).
type pollState struct {
	waiting  atomic.Int32 // len(pending)
	until    atomic.Int64 // unix nanoseconds
	answered atomic.Int64 // unix nanoseconds of the last answer
}

func (ps *pollState) expect() bool {
	return ps.waiting.Load() > 0 && callsWaiting.Load() == 1 && time.Now().UnixNano() < ps.until.Load()
}

// pendingChangedLocked publishes len(cn.pending) to the socket's polling
// reads and to callsWaiting. cn.mu is held.
func (cn *conn) pendingChangedLocked() {
	n := int32(len(cn.pending))
	callsWaiting.Add(n - cn.poll.waiting.Swap(n))
}

// minPoll is the least a call polls for its answer.
const minPoll = 20 * time.Microsecond

// pollWarm is how soon after the previous answer a call must start for its
// answer to be polled for. Polling pays while both processes are busy in a
// loop of calls, their CPUs awake; after a pause the wake-ups are paid
// anyway, and a polling CPU only delays a daemon the kernel wakes on it.
const pollWarm = time.Millisecond

// pollForLocked is how long the socket polls for the answer to method:
// twice its recent latency, at least minPoll; the whole budget while the
// latency is unknown; not at all when twice the latency exceeds the budget.
// Polling longer than an answer usually takes only burns CPU, and delays a
// daemon that the kernel woke on the polling CPU. cn.mu is held.
func (cn *conn) pollForLocked(method string) time.Duration {
	l, ok := cn.latency[method]
	if !ok {
		return cn.budget
	}
	if 2*l > cn.budget {
		return 0
	}
	return max(2*l, minPoll)
}

// maxLatencies bounds the methods whose latency a connection remembers:
// Call accepts any method name.
const maxLatencies = 64

// observe folds one answer's latency into method's recent latency.
func (cn *conn) observe(method string, d time.Duration) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	l, ok := cn.latency[method]
	switch {
	case ok:
		d = (3*l + d) / 4
	case len(cn.latency) >= maxLatencies:
		return
	}
	cn.latency[method] = d
}

func (cn *conn) forget(id uint64) {
	cn.mu.Lock()
	delete(cn.pending, id)
	cn.pendingChangedLocked()
	cn.mu.Unlock()
}

func (cn *conn) call(ctx context.Context, method string, params, result any) error {
	id := cn.nextID.Add(1)
	msg, err := EncodeRequest(id, method, params)
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
		return err
	}
	cn.pending[id] = ch
	cn.pendingChangedLocked()
	start := time.Now()
	var until int64
	if start.UnixNano()-cn.poll.answered.Load() < int64(pollWarm) {
		if d := cn.pollForLocked(method); d > 0 {
			until = start.Add(d).UnixNano()
		}
	}
	cn.poll.until.Store(until)
	cn.mu.Unlock()
	if until != 0 {
		cn.poller.Kick()
	}

	select {
	case cn.wmu <- struct{}{}:
	case <-ctx.Done():
		cn.forget(id)
		return ctx.Err()
	case <-cn.dead:
		return cn.failure()
	}
	werr := cn.ws.Write(cn.ctx, websocket.MessageBinary, msg)
	<-cn.wmu
	if werr != nil {
		cn.fail(werr)
		return cn.failure()
	}
	select {
	case r := <-ch:
		if r.lost == nil {
			cn.observe(method, time.Since(start))
		}
		switch {
		case r.lost != nil:
			return r.lost
		case r.err != nil:
			return &RemoteError{Method: method, Code: session.Code(r.err.Code), Message: r.err.Message, Data: r.err.Data}
		case result != nil:
			if err := DecodeParams(r.result, result); err != nil {
				return fmt.Errorf("protocol.Call %s: decode result: %w", method, err)
			}
		}
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
