package daemon

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
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

	readers sync.WaitGroup    // the readLoop goroutines, reading or spare
	turn    chan struct{}     // passes reading to a spare readLoop goroutine
	wmu     chan struct{}     // write turn; holds one token while a message is written
	wd      *writeWatch       // cuts off a write that outlasts Config.WriteTimeout
	closing atomic.Bool       // set once the close frame is being sent; later writes are dropped
	done    chan struct{}     // closed when serve returns
	events  chan engine.Event // queued pushes; see fanout
	dropped atomic.Uint64     // events dropped since the last events.dropped push
}

func newWSConn(s *Server, ws *websocket.Conn, act *activity) *wsConn {
	ws.SetReadLimit(s.cfg.MaxMessageSize)
	ctx, cancel := context.WithCancel(s.baseCtx)
	c := &wsConn{
		s:      s,
		ws:     ws,
		act:    act,
		log:    s.log.With("conn", connIDs.Add(1)),
		ctx:    ctx,
		cancel: cancel,
		turn:   make(chan struct{}),
		wmu:    make(chan struct{}, 1),
		done:   make(chan struct{}),
		events: make(chan engine.Event, protocol.EventQueueLen),
	}
	c.wd = newWriteWatch(s.cfg.WriteTimeout, func() {
		c.log.Warn("write timed out; closing connection", "timeout", s.cfg.WriteTimeout)
		c.ws.CloseNow()
	})
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
	sem := make(chan struct{}, protocol.MaxInFlightPerConn)
	readErr := make(chan error, 1)
	c.readers.Add(1)
	go c.readLoop(sem, readErr)
	err := <-readErr
	// Wait for the requests still running (Close cancels their context),
	// then stop the spare readers and the pusher.
	for range cap(sem) {
		sem <- struct{}{}
	}
	c.cancel()
	c.readers.Wait()
	<-pusherDone
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
// sends why on done. A request that may block is handled on the goroutine
// that read it: reading passes first to a spare readLoop goroutine, or a
// new one. The request's answer is then on the critical path of no
// goroutine hand-off, and reading goes on meanwhile, so requests on one
// connection still run concurrently. Once it has answered, the goroutine
// waits as a spare until reading passes back to it or the connection
// ends: reusing it spares the next request growing a new stack.
func (c *wsConn) readLoop(sem chan struct{}, done chan<- error) {
	defer c.readers.Done()
	for {
		typ, msg, err := c.ws.Read(c.ctx)
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				c.log.Warn("closed connection: message over the size limit", "limit", c.s.cfg.MaxMessageSize)
			}
			done <- err
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
			c.handle(h, req)
			c.s.endRequest()
			c.act.answer()
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-c.ctx.Done():
			done <- c.ctx.Err()
			return
		}
		if !c.s.startRequest() {
			<-sem
			c.fail(req.ID, req.Method, protocol.ErrUnavailable, "cairnd is shutting down")
			continue
		}
		select {
		case c.turn <- struct{}{}:
		default:
			c.readers.Add(1)
			go c.readLoop(sem, done)
		}
		c.handle(h, req)
		c.s.endRequest()
		c.act.answer()
		<-sem
		select {
		case <-c.turn:
		case <-c.ctx.Done():
			return
		}
	}
}

// handle runs one request and queues its answer.
func (c *wsConn) handle(h handler, req *protocol.Request) {
	start := time.Now()
	res, err := h(c.ctx, c, req.Params)
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
		return
	}
	c.log.Trace("request", "method", req.Method, "bytes", len(msg), "duration", time.Since(start))
	c.write(msg)
}

// inline lists the methods answered on the reader goroutine: they never
// block, so a goroutine would only add latency.
var inline = map[string]bool{protocol.MethodHello: true, protocol.MethodStatus: true}

// fail queues an error answer. message, when set, replaces err's text.
func (c *wsConn) fail(id *uint64, method string, err error, message string) {
	we := protocol.ErrorFor(err)
	if message != "" {
		we.Message = message
	}
	if protocol.CodeOf(err) == protocol.CodeMethodNotFound {
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
				msg, _ := protocol.EncodePush(protocol.EventDropped, map[string]any{"dropped": n})
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
