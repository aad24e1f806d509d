package daemon

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
	"github.com/coder/websocket"
	"github.com/hashicorp/go-hclog"
)

// connIDs numbers connections for the log.
var connIDs atomic.Uint64

// wsConn is one protocol connection. One readLoop goroutine at a time
// reads it (see readLoop): hello and status, which never block, are
// answered inline; any other request runs on the goroutine that read it,
// at most protocol.MaxInFlightPerConn at a time. Each request's goroutine
// writes its own answer, one writer at a time (wmu); a pusher goroutine
// writes the queued events. Neither Read nor Write ever gets a request's
// context: the connection's own context ends only when the connection is
// being closed.
type wsConn struct {
	s   *Server
	ws  *websocket.Conn
	log hclog.Logger
	act *activity // nil when the socket's reads never poll

	ctx    context.Context
	cancel context.CancelFunc

	readers sync.WaitGroup // the readLoop goroutines, reading or spare
	sem     chan struct{}  // one token per request in flight
	readErr chan error     // why reading ended; the last reader sends it
	turn    chan struct{}  // passes reading to a spare readLoop goroutine
	running atomic.Int32   // requests whose handler runs
	pace    pace           // whether requests arrive one at a time; the reading goroutine's
	serial  atomic.Int32   // serialIdle, serialRunning or serialReleased
	sw      *watch         // passes reading on from a request run serially past protocol.SerialLimit
	wmu     chan struct{}  // write turn; holds one token while a message is written
	wd      *watch         // cuts off a write that outlasts Config.WriteTimeout
	closing atomic.Bool    // set once the close frame is being sent; later writes are dropped
	done    chan struct{}  // closed when serve returns
	events  chan api.Event // queued pushes; see fanout
	dropped atomic.Uint64  // events dropped since the last events.dropped push
}

func newWSConn(s *Server, ws *websocket.Conn, act *activity, raw syscall.RawConn) *wsConn {
	ws.SetReadLimit(s.cfg.MaxMessageSize)
	ctx, cancel := context.WithCancel(s.baseCtx)
	c := &wsConn{
		s:       s,
		ws:      ws,
		act:     act,
		log:     s.log.With("conn", connIDs.Add(1)),
		ctx:     ctx,
		cancel:  cancel,
		sem:     make(chan struct{}, protocol.MaxInFlightPerConn),
		readErr: make(chan error, 1),
		turn:    make(chan struct{}),
		wmu:     make(chan struct{}, 1),
		done:    make(chan struct{}),
		events:  make(chan api.Event, protocol.EventQueueLen),
		pace:    pace{raw: raw},
	}
	c.wd = newWatch(s.cfg.WriteTimeout, func() {
		c.log.Warn("write timed out; closing connection", "timeout", s.cfg.WriteTimeout)
		c.ws.CloseNow()
	})
	c.sw = newWatch(protocol.SerialLimit, c.release)
	return c
}

// serve runs the connection until it closes. It owns the pusher goroutine
// and every request goroutine, and waits for them before returning.
func (c *wsConn) serve() {
	defer c.s.removeConn(c)
	defer close(c.done)
	c.log.Debug("connection opened")
	pusherDone := make(chan struct{})
	go func() {
		defer close(pusherDone)
		c.pushLoop()
	}()
	c.readers.Add(1)
	go c.readLoop()
	err := <-c.readErr
	// Wait for the requests still running (Close cancels their context),
	// then stop the spare readers and the pusher.
	for range cap(c.sem) {
		c.sem <- struct{}{}
	}
	c.cancel()
	c.readers.Wait()
	<-pusherDone
	c.sw.stop()
	c.wd.stop()
	c.ws.CloseNow()
	switch cs := websocket.CloseStatus(err); {
	case cs == websocket.StatusNormalClosure || cs == websocket.StatusGoingAway:
		c.log.Debug("connection closed", "status", cs)
	case errors.Is(err, context.Canceled):
		c.log.Debug("connection closed by server")
	default:
		c.log.Debug("connection lost", "error", err)
	}
}

// readLoop reads messages until the connection fails or closes, then
// sends why on readErr. A request that may block is handled on the goroutine
// that read it, so its answer is on the critical path of no goroutine
// hand-off. Reading first passes to a spare readLoop goroutine (or a new
// one), so requests on one connection run concurrently; once it has
// answered, the goroutine waits as a spare until reading passes back to it
// or the connection ends (reusing it spares the next request growing a new
// stack). While the connection's requests arrive one at a time (see pace),
// a short request (serialOK) runs serially, without passing reading on:
// the hand-off wakes a second thread, and two threads trading the
// connection at every request cost a one-at-a-time client a fifth of a
// durable commit. Reading passes on after all when such a request runs
// past protocol.SerialLimit (see release).
func (c *wsConn) readLoop() {
	defer c.readers.Done()
	for {
		typ, msg, err := c.ws.Read(c.ctx)
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				c.log.Warn("closed connection: message over the size limit", "limit", c.s.cfg.MaxMessageSize)
			}
			c.readErr <- err
			return
		}
		c.act.request()
		if typ != websocket.MessageBinary {
			c.fail(nil, "", protocol.ErrBadRequest, "text message; cairn.v1 messages are binary CBOR")
			continue
		}
		req, err := protocol.DecodeRequest(msg)
		if err != nil {
			var id *uint64
			if req != nil {
				id = req.ID
			}
			c.log.Debug("bad request", "error", err, "bytes", len(msg))
			c.fail(id, "", err, "")
			continue
		}
		h, ok := handlers[req.Method]
		if !ok {
			c.fail(req.ID, req.Method, methodNotFound(req.Method), "")
			continue
		}
		if inline[req.Method] {
			if !c.s.startRequest() {
				c.fail(req.ID, req.Method, protocol.ErrUnavailable, "cairnd is shutting down")
				continue
			}
			c.handle(h, req, false)
			c.s.endRequest()
			c.act.answer()
			continue
		}
		serial := c.pace.arrived(c.running.Load() > 0) && serialOK[req.Method]
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			c.readErr <- c.ctx.Err()
			return
		}
		if !c.s.startRequest() {
			<-c.sem
			c.fail(req.ID, req.Method, protocol.ErrUnavailable, "cairnd is shutting down")
			continue
		}
		if serial {
			c.s.serialRuns.Add(1)
			c.serial.Store(serialRunning)
			c.sw.begin()
		} else {
			c.passReading()
		}
		kept := c.handle(h, req, serial)
		c.s.endRequest()
		c.act.answer()
		<-c.sem
		if kept {
			continue
		}
		select {
		case <-c.turn:
		case <-c.ctx.Done():
			return
		}
	}
}

// passReading hands reading to a spare readLoop goroutine, or a new one.
func (c *wsConn) passReading() {
	select {
	case c.turn <- struct{}{}:
	default:
		c.readers.Add(1)
		go c.readLoop()
	}
}

// States of a connection's serial request (wsConn.serial).
const (
	serialIdle     = iota // none runs
	serialRunning         // one runs, and reading waits for it
	serialReleased        // one runs, and reading has passed on (release)
)

// release passes reading on from a serial request that has run for
// protocol.SerialLimit. It runs on the watch's timer goroutine.
func (c *wsConn) release() {
	if c.serial.CompareAndSwap(serialRunning, serialReleased) {
		c.s.releases.Add(1)
		c.passReading()
	}
}

// serialDone ends a serial request's run, once it has its result and
// before its answer is written, and reports whether it still holds
// reading: false when release passed reading on meanwhile.
func (c *wsConn) serialDone() bool {
	c.sw.end()
	if !c.serial.CompareAndSwap(serialRunning, serialIdle) {
		c.serial.Store(serialIdle) // was serialReleased
		return false
	}
	c.pace.ran()
	return true
}

// pace tells whether a connection's requests arrive one at a time: whether
// any arrived while another request's handler ran. Only the goroutine that
// reads the connection uses it.
type pace struct {
	raw   syscall.RawConn // the socket, to look for unread requests; nil: unknown
	quiet int             // requests in a row that arrived alone
}

// serialAfter is how many requests in a row must arrive alone before the
// connection's short requests run without passing reading on.
const serialAfter = 16

// arrived records a request's arrival, overlapping another or not, and
// reports whether the connection's requests now arrive one at a time.
func (p *pace) arrived(overlapping bool) bool {
	switch {
	case p.raw == nil || overlapping:
		p.quiet = 0
	case p.quiet < serialAfter:
		p.quiet++
	}
	return p.quiet >= serialAfter
}

// ran is called when a request that ran without passing reading on has
// its result, before the answer is written: a request that arrived
// meanwhile waits unread in the socket, and would have run concurrently
// had reading passed on. A sequential client sends nothing before it has
// the answer.
func (p *pace) ran() {
	if pending, ok := pendingInput(p.raw); pending || !ok {
		p.quiet = 0
	}
}

// serialOK lists the methods a one-at-a-time connection runs without
// passing reading on: each is one bounded engine operation. A request
// that arrives meanwhile waits for it; the connection then passes reading
// on again until its requests arrive alone for serialAfter in a row.
// Export, import, changes, handoff and the runtime methods can take long,
// and always pass reading on.
var serialOK = map[string]bool{
	api.Save.Name: true, api.ResumeSession.Name: true,
	api.BeginRun.Name: true, api.Checkpoint.Name: true,
	api.CompleteRun.Name: true, api.ResumeRun.Name: true,
	api.BeginWorkflow.Name: true, api.CompleteStep.Name: true,
	api.FinishWorkflow.Name: true, api.List.Name: true,
	api.Delete.Name: true, api.Fork.Name: true,
}

// handle runs one request and queues its answer. serial: it runs on the
// connection's reading goroutine without passing reading on; handle then
// reports whether that goroutine still holds reading (see serialDone).
func (c *wsConn) handle(h handler, req *protocol.Request, serial bool) (kept bool) {
	start := time.Now()
	c.running.Add(1)
	res, err := h(c.ctx, c, req.Params)
	if serial {
		// Before running drops: a request read meanwhile may run serially
		// only once this one has left the serial state and its watch.
		kept = c.serialDone()
	}
	c.running.Add(-1)
	var msg []byte
	if err == nil {
		msg, err = protocol.EncodeResult(*req.ID, res)
		if err == nil && int64(len(msg)) > c.s.cfg.MaxMessageSize {
			err = session.Errorf(session.CodeTooLarge, "the answer is %d bytes, over the message size limit of %d", len(msg), c.s.cfg.MaxMessageSize)
		}
	}
	if err != nil {
		c.fail(req.ID, req.Method, err, "")
		c.log.Trace("request", "method", req.Method, "code", protocol.CodeOf(err), "duration", time.Since(start))
		return kept
	}
	c.log.Trace("request", "method", req.Method, "bytes", len(msg), "duration", time.Since(start))
	c.write(msg)
	return kept
}

// inline lists the methods answered on the reader goroutine: they never
// block, so a goroutine would only add latency.
var inline = map[string]bool{api.Hello.Name: true, api.Status.Name: true}

// fail queues an error answer. message, when set, replaces err's text.
func (c *wsConn) fail(id *uint64, method string, err error, message string) {
	we := protocol.ErrorFor(err)
	if message != "" {
		we.Message = message
	}
	if protocol.CodeOf(err) == api.CodeMethodNotFound {
		we.Data = map[string]any{"method": truncate(method, 64)}
	}
	if we.Code == string(session.CodeInternal) {
		c.log.Error("request failed", "method", truncate(method, 64), "error", err)
	}
	msg, eerr := protocol.EncodeError(id, we)
	if eerr != nil {
		c.log.Error("cannot encode an error answer", "error", eerr)
		return
	}
	c.write(msg)
}

// pushLoop writes queued events until the connection's context ends.
func (c *wsConn) pushLoop() {
	for {
		select {
		case ev := <-c.events:
			msg, err := protocol.EncodePush(ev.Type, ev.Data)
			if err != nil {
				c.log.Error("cannot encode an event", "event", ev.Type, "error", err)
				continue
			}
			if !c.write(msg) {
				return
			}
			if n := c.dropped.Swap(0); n > 0 {
				c.log.Warn("events dropped: subscriber too slow", "dropped", n)
				msg, _ := protocol.EncodePush(api.EventDropped, map[string]any{"dropped": n})
				if !c.write(msg) {
					return
				}
			}
		case <-c.ctx.Done():
			return
		}
	}
}

// write writes one message within Config.WriteTimeout, waiting for its
// turn; on failure it closes the connection (the reader then ends) and
// reports false. After closeGracefully began, messages are dropped.
func (c *wsConn) write(msg []byte) bool {
	select {
	case c.wmu <- struct{}{}:
	case <-c.ctx.Done():
		return false
	}
	defer func() { <-c.wmu }()
	if c.closing.Load() {
		return false
	}
	c.wd.begin()
	err := c.ws.Write(c.ctx, websocket.MessageBinary, msg)
	c.wd.end()
	if err != nil {
		if c.ctx.Err() == nil {
			c.log.Debug("write failed; closing connection", "error", err)
		}
		c.cancel()
		return false
	}
	return true
}

// closeGracefully sends a close frame (1001, going away) after the message
// being written, if any, and waits for the connection to end. Shutdown
// calls it once no request is in flight, so every answer is already
// written. The closing handshake is bounded by the library (5 s); Close
// cuts it short. The write turn is not held across ws.Close: the reader may
// need it to answer a message that arrives meanwhile, and must keep reading
// for the handshake to complete.
func (c *wsConn) closeGracefully() {
	select {
	case c.wmu <- struct{}{}:
		c.closing.Store(true)
		<-c.wmu
	case <-c.ctx.Done():
	}
	_ = c.ws.Close(websocket.StatusGoingAway, "cairnd shutting down")
	<-c.done
}

// splitTokens splits a comma-separated header value.
func splitTokens(v string) []string {
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}
