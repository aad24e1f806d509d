package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/scratch"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// connIDs numbers connections for the log.
var connIDs atomic.Uint64

// wsConn is one protocol connection, shaped like a ttrpc server
// connection: the goroutine running serve reads every message, each
// request runs on a worker goroutine (see worker), or on the reader itself
// when the client waits for each answer (see runsInline), and writes its
// answer itself (send), and one writer goroutine writes the queued events
// and the answers the reader makes (refusals of what it could not start).
// Only the reader reads the socket (a relay takes over from a reader held
// up by a request it runs); writes are serialized by wmu. Writing the answer
// on the request's goroutine saves a hand-off to the writer, a thread
// wake-up per request. Neither Read nor Write ever gets a request's
// context (coder/websocket closes a connection whose Read or Write context
// ends): the connection's own context ends only when the connection is
// being closed.
//
// A message holds one of the connection's protocol.MaxInFlightPerConn
// tokens from before it is read until its answer is written (or dropped
// with the connection). Without a token the reader stops reading, and the
// answers queue, which has room for every token, never blocks the reader.
//
// Every queued answer is also charged to the daemon-wide answer budget
// (Config.AnswerBudget) until it is written or dropped; when an answer does
// not fit, the server sheds the connection holding the most unsent bytes
// (see Server.charge): its queued answers are dropped at once, it reads
// nothing more, and it is closed with CloseAnswerBudget.
type wsConn struct {
	s   *Server
	ws  *websocket.Conn
	fc  *frameConn // the socket under ws; nil when ws was made otherwise
	log hclog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	tokens     chan struct{}  // one per message read and not yet answered
	answers    chan answer    // answers for the writer; never full (see tokens)
	events     chan api.Event // queued pushes; see fanout
	dropped    atomic.Uint64  // events dropped since the last events.dropped push
	stopWrites chan struct{}  // closeGracefully: the writer writes nothing more
	requests   sync.WaitGroup // the worker goroutines
	work       chan job       // requests for an idle worker; unbuffered, closed by serve
	idle       atomic.Int32   // workers waiting on work
	done       chan struct{}  // closed when serve returns
	shed       chan struct{}  // closed when the answer budget sheds the connection
	wmu        sync.Mutex     // held across a write, and the shed check before it

	// Requests run on the reader (runInline). read counts the messages
	// read; only the goroutine reading touches it. inline is when the
	// request running on the reader started (Server.sinceStart), 0 when
	// none runs, readingHandedOff once the watchdog has given the reading
	// to a relay (Server.handOffInline). readErr takes the error the last
	// of the relays stopped reading on.
	read    uint64
	inline  atomic.Int64
	readErr chan error
	// running counts the connection's requests whose handler has not
	// returned yet.
	running atomic.Int32

	// Guarded by s.budgetMu.
	unsent   int64 // bytes of this connection's answers queued or being written
	shedding bool  // shed has been closed
}

// answer is one answer queued for the writer.
type answer struct {
	msg []byte
	// counted: the request counts as in flight (Server.startRequest) until
	// its answer is written or dropped.
	counted bool
	// charged: len(msg) is charged to the answer budget until the answer
	// is written or dropped.
	charged bool
	// buf, when set, holds msg: it goes back to answerBufs once the
	// answer is written or dropped (end).
	buf *[]byte
}

// answerBufs holds the buffers requests encode their answers into, for
// reuse (kept up to 16 MiB, a few pages of messages). A page of messages
// is megabytes: encoded into a fresh slice each time, the answers of a
// session read in pages grow and shrink the heap by that much per page,
// and the runtime's collector and scavenger (which hands the freed pages
// back to the kernel, for the next answer to fault them in again) cost
// cairnd more than the read itself.
var answerBufs = protocol.MessageBufs{Max: 16 << 20}

// readPads holds the scratch pads (*scratch.Pad) a page of messages is
// read into, for reuse: the page's bytes are copied into its answer, and
// then nothing holds them.
var readPads sync.Pool

// errShed ends the reader of a connection the answer budget shed.
var errShed = errors.New("daemon: connection shed: answer budget exhausted")

func newWSConn(s *Server, ws *websocket.Conn, fc *frameConn) *wsConn {
	ws.SetReadLimit(s.cfg.MaxMessageSize)
	ctx, cancel := context.WithCancel(s.baseCtx)
	return &wsConn{
		s:          s,
		ws:         ws,
		fc:         fc,
		log:        s.log.With("conn", connIDs.Add(1)),
		ctx:        ctx,
		cancel:     cancel,
		tokens:     make(chan struct{}, protocol.MaxInFlightPerConn),
		answers:    make(chan answer, protocol.MaxInFlightPerConn),
		events:     make(chan api.Event, protocol.EventQueueLen),
		stopWrites: make(chan struct{}),
		done:       make(chan struct{}),
		shed:       make(chan struct{}),
		work:       make(chan job),
		readErr:    make(chan error, 1),
	}
}

// job is one request for a worker. Its params are in buf (see
// readMessage), which the worker hands back once the handler returns.
type job struct {
	h   handler
	req *protocol.Request
	buf *[]byte
}

// maxIdleWorkers is how many workers of a connection wait for its next
// request once theirs is answered; the others end.
const maxIdleWorkers = 2

// serve runs the connection until it closes: it reads on the calling
// goroutine, and owns the writer goroutine and every request goroutine,
// which it waits for before returning.
func (c *wsConn) serve() {
	defer c.s.removeConn(c)
	defer close(c.done)
	c.log.Debug("connection opened")
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoop()
	close(c.work) // the reader was its only sender; idle workers end
	// The requests still running finish (Close cancels their context) and
	// queue their answers; the writer writes what it still can. Then the
	// writer stops, and the answers it did not write are dropped.
	c.requests.Wait()
	if code, reason := c.closeStatus(); code != 0 {
		c.closeWith(code, reason)
	}
	c.cancel()
	<-writerDone
	// Not a blocking receive: shedding (Server.shedLocked, from another
	// connection's request) may take answers from the queue meanwhile.
	for drained := false; !drained; {
		select {
		case a := <-c.answers:
			c.finish(a)
		default:
			drained = true
		}
	}
	c.ws.CloseNow()
	switch cs := websocket.CloseStatus(err); {
	case errors.Is(err, errShed):
		c.log.Debug("connection closed", "status", CloseAnswerBudget, "reason", ReasonAnswerBudget)
	case cs == websocket.StatusNormalClosure || cs == websocket.StatusGoingAway:
		c.log.Debug("connection closed", "status", cs)
	case errors.Is(err, context.Canceled):
		c.log.Debug("connection closed by server")
	default:
		c.log.Debug("connection lost", "error", err)
	}
}

// readLoop reads messages until the connection fails, closes or is shed,
// and returns why. Each request runs on a worker goroutine, or on the
// reader itself (runInline); a request that runs there too long has the
// reading taken over by a relay, and then readLoop waits for the last
// relay's reason to stop.
func (c *wsConn) readLoop() error {
	if handedOff, err := c.readMessages(); !handedOff {
		return err
	}
	return <-c.readErr
}

// relay is a reader started by the watchdog (Server.handOffInline) while
// the previous one runs a request. The relay that stops reading for
// another reason than a hand-off reports it to readLoop.
func (c *wsConn) relay() {
	if handedOff, err := c.readMessages(); !handedOff {
		c.readErr <- err
	}
}

// readMessages is the reading loop. It returns why it stopped: handedOff
// when the reading went to a relay during a request it ran.
func (c *wsConn) readMessages() (handedOff bool, err error) {
	for {
		select {
		case c.tokens <- struct{}{}:
		case <-c.shed:
			return false, errShed
		case <-c.ctx.Done():
			return false, c.ctx.Err()
		}
		typ, buf, err := c.readMessage()
		if err == nil && c.isShed() {
			readBufs.Put(buf)
			err = errShed // what a shed connection sends no longer matters
		}
		if err != nil {
			<-c.tokens
			switch {
			case c.isShed():
				return false, errShed
			case errors.Is(err, websocket.ErrMessageTooBig), c.fc != nil && c.fc.isTooBig():
				c.log.Warn("closed connection: message over the size limit", "limit", c.s.cfg.MaxMessageSize)
			case c.fc != nil && c.fc.isStalled():
				c.log.Warn("closing connection: a frame stalled", "frame_timeout", c.s.cfg.FrameTimeout)
			}
			return false, err
		}
		c.read++
		if c.dispatch(typ, buf) {
			return true, nil
		}
	}
}

// maxKeptReadBuf is the largest read buffer kept for another message; a
// larger one, grown for a large message, is let go, so that idle
// connections do not hold what their largest messages needed.
const maxKeptReadBuf = 64 << 10

// readBufs holds read buffers for reuse, shared by connections.
var readBufs = protocol.MessageBufs{Max: maxKeptReadBuf}

// readMessage reads one message, as websocket.Conn.Read does, but into a
// reused buffer (readBufs) rather than a new one grown from 512 bytes per
// message. The message is *buf. The buffer is the caller's: a request
// decodes its params in place (protocol.DecodeRequestBorrowed, no copy of
// a checkpoint's KiBs), so its buffer goes back to readBufs (Put)
// only once its handler has returned; everything the handler decoded from
// the params is a copy (the CBOR decoder copies byte and text strings).
func (c *wsConn) readMessage() (websocket.MessageType, *[]byte, error) {
	return readBufs.Read(c.ctx, c.ws)
}

// isShed reports whether the answer budget shed the connection.
func (c *wsConn) isShed() bool {
	select {
	case <-c.shed:
		return true
	default:
		return false
	}
}

// closeStatus is the close status serve sends once the reader has ended:
// 0 (none; the connection just closes, or the library already sent one)
// unless the answer budget shed the connection, a frame stalled, or a frame
// header declared a message over the size limit.
func (c *wsConn) closeStatus() (websocket.StatusCode, string) {
	switch {
	case c.isShed():
		return CloseAnswerBudget, ReasonAnswerBudget
	case c.fc != nil && c.fc.isStalled():
		return CloseFrameTimeout, ReasonFrameTimeout
	case c.fc != nil && c.fc.isTooBig():
		return websocket.StatusMessageTooBig, fmt.Sprintf("cairnd: message over the size limit of %d bytes", c.s.cfg.MaxMessageSize)
	}
	return 0, ""
}

// closeWith closes the connection with a status: after the message being
// written, if any (its write is bounded by Config.WriteTimeout), it sends
// a close frame (bounded by the library, 5 s) and closes the socket without
// waiting for the client's close frame: the reader has ended.
func (c *wsConn) closeWith(code websocket.StatusCode, reason string) {
	select {
	case c.stopWrites <- struct{}{}:
	case <-c.ctx.Done():
	}
	if c.fc != nil {
		c.fc.shutReads()
	}
	_ = c.ws.Close(code, reason)
}

// dispatch starts the request in *buf, or queues the error answer for it.
// The request takes buf (see readMessage); dispatch hands it back when no
// request starts. It reports whether the request ran on the reader and the
// reading was handed to a relay meanwhile (runInline).
func (c *wsConn) dispatch(typ websocket.MessageType, buf *[]byte) (handedOff bool) {
	started := false
	defer func() {
		if !started {
			readBufs.Put(buf)
		}
	}()
	if typ != websocket.MessageBinary {
		c.fail(nil, "", protocol.ErrBadRequest, "text message; cairn.v1 messages are binary CBOR", false)
		return
	}
	msg := *buf
	req, err := protocol.DecodeRequestBorrowed(msg)
	if err != nil {
		var id *uint64
		if req != nil {
			id = req.ID
		}
		c.log.Debug("bad request", "error", err, "bytes", len(msg))
		c.fail(id, "", err, "", false)
		return
	}
	h, ok := handlers[req.Method]
	if !ok {
		c.fail(req.ID, req.Method, methodNotFound(req.Method), "", false)
		return
	}
	if !c.s.startRequest() {
		c.fail(req.ID, req.Method, protocol.ErrUnavailable, "cairnd is shutting down", false)
		return
	}
	started = true
	inline := c.runsInline(req.Method)
	c.running.Add(1)
	if inline {
		return c.runInline(h, req, buf)
	}
	select {
	case c.work <- job{h, req, buf}:
	default:
		c.requests.Add(1)
		go c.worker(job{h, req, buf})
	}
	return false
}

// runsInline reports whether a request for method, just read, runs on the
// reader: a method of an agent's turn or a framework's step (inlineMethods),
// with no other request of the connection running and nothing more of the
// client's buffered (frameConn.pending). A client that waits for each
// answer before its next request gets its answers without a hand-off to a
// worker: one thread wake-up fewer per request, the reader's thread
// running the request it has just read. A client with requests in flight
// side by side keeps them concurrent.
func (c *wsConn) runsInline(method string) bool {
	return inlineMethods[method] && c.fc != nil && c.running.Load() == 0 && !c.fc.pending(c.read)
}

// inlineMethods are the methods a request of which may run on the reader:
// those an agent or a framework adapter calls at every turn or step.
var inlineMethods = map[string]bool{
	api.Save.Name: true, api.Checkpoint.Name: true, api.BeginRun.Name: true,
	api.CompleteRun.Name: true, api.CompleteStep.Name: true, api.Summary.Name: true,
	api.Run.Name: true, api.Messages.Name: true, api.Artifact.Name: true,
	api.ArtifactsByID.Name: true,
}

// runInline runs the request on the reader. Meanwhile nothing of the
// connection is read: a request sent now waits for it, at most about two
// inlineSlice, as after that the watchdog (Server.handOffInline) hands the
// reading to a relay. It reports whether that happened; the relay reads
// on, and this goroutine stops reading once the request is answered.
func (c *wsConn) runInline(h handler, req *protocol.Request, buf *[]byte) (handedOff bool) {
	t := c.s.sinceStart()
	c.inline.Store(t)
	c.s.inlineStarted()
	c.requests.Add(1)
	c.handle(h, req, buf)
	c.requests.Done()
	return !c.inline.CompareAndSwap(t, 0)
}

// worker runs j, then, while fewer than maxIdleWorkers wait, waits for the
// connection's next request (dispatch hands it over when one waits) until
// serve closes work. A new goroutine per request would grow its stack from
// the minimum by copying, several times over an engine commit, and end; a
// worker keeps the stack it grew.
func (c *wsConn) worker(j job) {
	defer c.requests.Done()
	for {
		c.handle(j.h, j.req, j.buf)
		if c.idle.Add(1) > maxIdleWorkers {
			c.idle.Add(-1)
			return
		}
		var ok bool
		j, ok = <-c.work
		c.idle.Add(-1)
		if !ok {
			return
		}
	}
}

// handle runs one request and queues its answer. The request's params are
// in buf, handed back once the handler has returned.
func (c *wsConn) handle(h handler, req *protocol.Request, buf *[]byte) {
	start := time.Now()
	ctx := c.ctx
	var pad *scratch.Pad
	if req.Method == api.Messages.Name {
		// The page's messages may be slices of the pad's buffers until
		// they are encoded into the answer, below.
		pad, _ = readPads.Get().(*scratch.Pad)
		if pad == nil {
			pad = new(scratch.Pad)
		}
		ctx = scratch.With(ctx, pad)
	}
	res, err := h(ctx, c, req.Params)
	c.running.Add(-1)
	req.Params = nil
	readBufs.Put(buf)
	if c.isShed() {
		// Nobody will read the answer: do not build it.
		releasePad(pad)
		c.finish(answer{counted: true})
		return
	}
	var msg []byte
	var ab *[]byte
	if err == nil {
		ab = answerBufs.Get()
		*ab, err = protocol.AppendResult((*ab)[:0], *req.ID, res)
		msg = *ab
		if err == nil && int64(len(msg)) > c.s.cfg.MaxMessageSize {
			err = session.Errorf(session.CodeTooLarge, "the answer is %d bytes, over the message size limit of %d", len(msg), c.s.cfg.MaxMessageSize)
		}
	}
	releasePad(pad)
	if err != nil {
		answerBufs.Put(ab)
		c.failTo(c.sendAnswer, req.ID, req.Method, err, "", true)
		c.log.Trace("request", "method", req.Method, "code", protocol.CodeOf(err), "duration", time.Since(start))
		return
	}
	// Logged once charged or refused (after any shedding the answer
	// caused) and before it is written: a write can wait on a client that
	// reads slowly.
	var traced func()
	if c.log.IsTrace() {
		traced = func() { c.log.Trace("request", "method", req.Method, "bytes", len(msg), "duration", time.Since(start)) }
	}
	c.send(answer{msg: msg, counted: true, buf: ab}, traced)
}

// releasePad takes back what pad lent and hands it back to readPads.
func releasePad(pad *scratch.Pad) {
	if pad != nil {
		pad.Reset()
		readPads.Put(pad)
	}
}

// fail queues an error answer. message, when set, replaces err's text.
// counted: see answer.
func (c *wsConn) fail(id *uint64, method string, err error, message string, counted bool) {
	c.failTo(c.queue, id, method, err, message, counted)
}

// failTo is fail handing the error answer to deliver (queue, or send).
func (c *wsConn) failTo(deliver func(answer), id *uint64, method string, err error, message string, counted bool) {
	we := protocol.ErrorFor(err)
	if message != "" {
		we.Message = message
	}
	if protocol.CodeOf(err) == api.CodeMethodNotFound {
		we.Data = map[string]any{"method": truncate(method, maxEchoedMethod)}
	}
	if we.Code == string(session.CodeInternal) {
		c.log.Error("request failed", "method", truncate(method, 64), "error", err)
	}
	msg, eerr := protocol.EncodeError(id, we)
	if eerr != nil {
		c.log.Error("cannot encode an error answer", "error", eerr)
		c.finish(answer{counted: counted})
		return
	}
	deliver(answer{msg: msg, counted: counted})
}

// queue charges an answer to the answer budget and queues it for the
// writer, or drops it when the connection is (or gets) shed.
func (c *wsConn) queue(a answer) {
	if !c.s.charge(c, int64(len(a.msg))) {
		c.finish(a)
		return
	}
	a.charged = true
	c.answers <- a
}

// send delivers a request's answer from the request's own goroutine:
// charged to the answer budget like any answer, it is written right there
// when no other write is under way, and queued for the writer otherwise.
// So at most one answer per connection is ever held by a write that waits
// on a slow client, as with the writer alone, and the rest stay in the
// queue that shedding empties at once. traced, when set, runs once the
// answer is charged or refused. Requests only run while the connection
// serves (serve waits for them before it closes the connection; Shutdown
// closes connections once no request is in flight), so send never writes
// after a close frame.
func (c *wsConn) send(a answer, traced func()) {
	charged := c.s.charge(c, int64(len(a.msg)))
	if traced != nil {
		traced()
	}
	if !charged {
		c.finish(a)
		return
	}
	a.charged = true
	if !c.wmu.TryLock() {
		c.answers <- a
		return
	}
	if !c.isShed() {
		c.write(a.msg) // on failure it closes the connection; the reader ends
	}
	c.wmu.Unlock()
	c.finish(a)
}

// sendAnswer is send without a trace.
func (c *wsConn) sendAnswer(a answer) { c.send(a, nil) }

// writeUnlessShed writes msg for the writer goroutine unless the
// connection is shed, and reports false when the write failed. The shed
// check and the write are one step under wmu, which a request writing its
// own answer holds too.
func (c *wsConn) writeUnlessShed(msg []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.isShed() || c.write(msg)
}

// finish ends a message's life once its answer is written or dropped: its
// bytes leave the answer budget, the request no longer counts as in
// flight, and its token is returned.
func (c *wsConn) finish(a answer) {
	if a.charged {
		c.s.release(c, int64(len(a.msg)))
	}
	c.end(a)
}

// end is finish without the budget (Server.shedLocked releases it itself).
func (c *wsConn) end(a answer) {
	answerBufs.Put(a.buf)
	if a.counted {
		c.s.endRequest()
	}
	<-c.tokens
}

// writeLoop writes the queued answers and events until the connection's
// context ends or a write fails. After closeGracefully stopped writes, it
// drops what it is given.
func (c *wsConn) writeLoop() {
	stopped := false
	for {
		select {
		case a := <-c.answers:
			ok := stopped || c.writeUnlessShed(a.msg)
			c.finish(a)
			if !ok {
				return
			}
		case ev := <-c.events:
			if stopped || c.isShed() {
				continue
			}
			msg, err := protocol.EncodePush(ev.Type, ev.Data)
			if err != nil {
				c.log.Error("cannot encode an event", "event", ev.Type, "error", err)
				continue
			}
			if !c.writeUnlessShed(msg) {
				return
			}
			if n := c.dropped.Swap(0); n > 0 {
				c.log.Warn("events dropped: subscriber too slow", "dropped", n)
				ev := api.NewEvent(api.EventDropped, api.DroppedData{Dropped: n})
				msg, _ := protocol.EncodePush(ev.Type, ev.Data)
				if !c.writeUnlessShed(msg) {
					return
				}
			}
		case <-c.stopWrites:
			stopped = true
		case <-c.ctx.Done():
			return
		}
	}
}

// write writes one message within Config.WriteTimeout (the socket's write
// deadline, frameConn.Write; a context with the timeout when there is no
// frameConn). On failure it closes the connection (coder/websocket closes
// it when a write fails or its context ends; cancelling the connection's
// context ends the reader) and reports false.
func (c *wsConn) write(msg []byte) bool {
	var err error
	var timedOut bool
	if c.fc != nil && c.fc.wtimeout > 0 {
		err = c.ws.Write(c.ctx, websocket.MessageBinary, msg)
		timedOut = errors.Is(err, os.ErrDeadlineExceeded)
	} else {
		ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.WriteTimeout)
		err = c.ws.Write(ctx, websocket.MessageBinary, msg)
		timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
	}
	if err == nil {
		return true
	}
	switch {
	case c.ctx.Err() != nil:
	case timedOut:
		c.log.Warn("write timed out; closing connection", "timeout", c.s.cfg.WriteTimeout)
	default:
		c.log.Debug("write failed; closing connection", "error", err)
	}
	c.cancel()
	return false
}

// closeGrace is how long closeGracefully waits for a client's close frame
// in reply to the daemon's before it cuts the connection. A client with a
// reader of its own (the Go client, the Node.js binding) answers at once;
// the Python and Rust bindings' own checkpoint connections read only while
// a call waits for its answer, so without the cut every shutdown with such
// a client idle would wait out the library's 5 s.
const closeGrace = time.Second

// closeGracefully sends a close frame (1001, going away) after the message
// being written, if any, and waits for the connection to end. Shutdown
// calls it once no request is in flight, so every answer is already
// written. The closing handshake is bounded by closeGrace: then the
// connection's context is cancelled, which makes the library close it;
// Close cuts it short at once. The reader keeps reading meanwhile, as the
// handshake needs; a request it reads is refused, and the refusal dropped.
func (c *wsConn) closeGracefully() {
	select {
	case c.stopWrites <- struct{}{}:
	case <-c.ctx.Done():
	}
	cut := time.AfterFunc(closeGrace, c.cancel)
	defer cut.Stop()
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
