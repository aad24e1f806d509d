package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/workspace"
)

// Sentinel errors of this package.
var (
	// ErrServerClosed is returned by Serve after Shutdown or Close, and by
	// Serve on a server that was already shut down.
	ErrServerClosed = errors.New("daemon: server closed")
	// ErrBadConfig is returned by NewServer for an unusable Config.
	ErrBadConfig = errors.New("daemon: bad config")
)

// DefaultShutdownTimeout bounds a graceful shutdown started by the Serve
// context ending or by the idle timeout; after it, connections are closed
// without waiting.
const DefaultShutdownTimeout = 10 * time.Second

// Config configures a Server.
type Config struct {
	// Workspace is the canonical workspace path (protocol.Workspace).
	Workspace string
	// Backend serves the methods; usually an *engine.Engine.
	Backend Backend
	// Logger receives the server's log; nil discards it.
	Logger hclog.Logger
	// Version is reported by hello, status and /healthz.
	Version string
	// MaxMessageSize is the read limit per message; 0 means
	// protocol.DefaultMaxMessageSize.
	MaxMessageSize int64
	// IdleTimeout, when positive, makes Serve shut down once no protocol
	// connection has been open for that long.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown Serve performs when its
	// context ends or the idle timeout fires; 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Files is the workspace tracker behind the changes method and the
	// file.changed event; nil: the workspace is not tracked (changes
	// answers unavailable).
	Files *workspace.Tracker
	// WriteTimeout is how long one message may take to write before the
	// connection is closed: a client that stops reading while the daemon
	// has a message for it (up to WriteTimeout/8 longer: frameConn.Write).
	// 0 means protocol.WriteTimeout.
	WriteTimeout time.Duration
	// AnswerBudget bounds the bytes of answers queued or being written,
	// across all connections: an answer is charged when its request
	// finishes and released when it is written or dropped. When an answer
	// does not fit, the connection holding the most unsent bytes is closed
	// with CloseAnswerBudget (see Server.charge). 0 means the larger of
	// DefaultAnswerBudget and MaxMessageSize; a budget below MaxMessageSize
	// is refused (an answer of the largest size must fit). Events are not
	// charged: they have their own queue per connection.
	AnswerBudget int64
	// FrameTimeout is how long a read may wait for the next byte of a
	// WebSocket frame that has started to arrive before the connection is
	// closed with CloseFrameTimeout. Between frames there is no deadline: an
	// idle connection stays open. 0 means DefaultFrameTimeout.
	FrameTimeout time.Duration
}

// Server serves the protocol on a listener. It owns the listener and every
// connection it accepts.
type Server struct {
	cfg     Config
	log     hclog.Logger
	started time.Time
	socket  string
	events  *fanout
	unsub   func()

	httpSrv *http.Server
	baseCtx context.Context // parent of every connection's context
	kill    context.CancelFunc

	requests atomic.Uint64

	// The watchdog of requests run on their connection's reader
	// (watchInline). inlineSeen: a request started on a reader since the
	// watchdog last looked; inlineAsleep: the watchdog waits on inlineWake
	// for the next one. inlineRuns and inlineHandOffs count the requests
	// run on a reader and the readings handed to a relay (InlineStats).
	inlineSeen     atomic.Bool
	inlineAsleep   atomic.Bool
	inlineWake     chan struct{}
	inlineRuns     atomic.Uint64
	inlineHandOffs atomic.Uint64

	budgetMu sync.Mutex // guards unsent and every wsConn's unsent and shedding; taken before mu
	unsent   int64      // bytes of answers queued or being written, all connections

	mu       sync.Mutex // guards the fields below
	conns    map[*wsConn]struct{}
	upgrades int // upgrades admitted (reserveConn) and not yet added or given up
	stopping bool
	inFlight int           // requests started and not yet answered
	drained  chan struct{} // closed when stopping and inFlight == 0
	idle     *time.Timer
	served   bool
	stopped  chan struct{} // closed when shutdown completes
	stopOnce sync.Once
	connWG   sync.WaitGroup
}

// NewServer returns a server for cfg. It subscribes to the backend's events
// while a connection is subscribed to them, and to the file tracker's at
// once; Shutdown or Close unsubscribes.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Backend == nil || cfg.Workspace == "" {
		return nil, fmt.Errorf("%w: Backend and Workspace are required", ErrBadConfig)
	}
	if cfg.MaxMessageSize <= 0 {
		cfg.MaxMessageSize = protocol.DefaultMaxMessageSize
	}
	if cfg.MaxMessageSize < protocol.MinMaxMessageSize {
		return nil, fmt.Errorf("%w: MaxMessageSize %d is below %d", ErrBadConfig, cfg.MaxMessageSize, protocol.MinMaxMessageSize)
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = protocol.WriteTimeout
	}
	if cfg.AnswerBudget <= 0 {
		cfg.AnswerBudget = max(DefaultAnswerBudget, cfg.MaxMessageSize)
	}
	if cfg.AnswerBudget < cfg.MaxMessageSize {
		return nil, fmt.Errorf("%w: AnswerBudget %d is below MaxMessageSize %d", ErrBadConfig, cfg.AnswerBudget, cfg.MaxMessageSize)
	}
	if cfg.FrameTimeout <= 0 {
		cfg.FrameTimeout = DefaultFrameTimeout
	}
	base, kill := context.WithCancel(context.Background())
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		started: time.Now(),
		events:  newFanout(cfg.Backend.Subscribe),
		baseCtx: base,
		kill:    kill,
		conns:   map[*wsConn]struct{}{},
		drained: make(chan struct{}),
		stopped: make(chan struct{}),

		inlineWake: make(chan struct{}, 1),
	}
	s.inlineAsleep.Store(true)
	s.httpSrv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: protocol.HandshakeTimeout,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	s.unsub = s.events.close
	if cfg.Files != nil {
		unsubFiles := cfg.Files.Subscribe(func(path, kind string) {
			s.events.publish(api.NewEvent(api.EventFileChanged, api.FileChangedData{Path: path, Kind: kind}))
		})
		s.unsub = func() { s.events.close(); unsubFiles() }
	}
	return s, nil
}

// Serve accepts connections on ln until Shutdown or Close, or until ctx
// ends or the idle timeout fires (both start a graceful shutdown bounded by
// ShutdownTimeout, after which Serve returns nil). It returns ErrServerClosed
// when stopped by Shutdown or Close from elsewhere. ln is closed on return.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.served || s.stopping {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.served = true
	s.socket = ln.Addr().String()
	s.resetIdleLocked()
	s.mu.Unlock()

	// The watcher turns ctx's end or the idle timeout into a shutdown; it
	// exits when the server stops either way.
	idle := s.idleC()
	watchDone := make(chan struct{})
	selfStop := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-ctx.Done():
			s.log.Info("stopping", "reason", "signal or context")
		case <-idle:
			s.log.Info("stopping", "reason", "idle timeout", "idle_timeout", s.cfg.IdleTimeout)
		case <-s.stopped:
			return
		}
		close(selfStop)
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if err := s.Shutdown(sctx); err != nil {
			s.log.Warn("graceful shutdown timed out; closing connections", "error", err)
		}
	}()

	inlineDone := make(chan struct{})
	go s.watchInline(inlineDone)

	err := s.httpSrv.Serve(&peerListener{Listener: ln, log: s.log})
	if errors.Is(err, http.ErrServerClosed) {
		<-s.stopped
		err = ErrServerClosed
	} else {
		// The listener failed: stop everything else too.
		s.Close()
		err = fmt.Errorf("daemon.Serve: %w", err)
	}
	<-watchDone
	<-inlineDone
	select {
	case <-selfStop:
		return nil
	default:
		return err
	}
}

// inlineSlice is how often the watchdog looks at the requests running on
// their connection's reader, and how long one may run there before it
// hands the reading to a relay: a request sent on a connection while
// another runs on its reader waits at most about twice this.
const inlineSlice = 20 * time.Millisecond

// watchInline is the watchdog of requests run on their connection's reader
// (wsConn.runInline). While such requests start, it looks every
// inlineSlice and hands the reading of a connection whose request has run
// that long to a relay. When it has seen none running and none started
// for a whole slice it sleeps until the next one starts (inlineStarted),
// so an idle daemon has no timer ticking, and a busy one a tick per slice,
// not a timer per request. It returns, closing done, when the server
// stops.
func (s *Server) watchInline(done chan<- struct{}) {
	defer close(done)
	t := time.NewTimer(inlineSlice)
	t.Stop()
	for {
		select {
		case <-s.inlineWake:
		case <-s.baseCtx.Done():
			return
		}
		s.inlineAsleep.Store(false)
		for {
			t.Reset(inlineSlice)
			select {
			case <-t.C:
			case <-s.baseCtx.Done():
				t.Stop()
				return
			}
			if s.handOffInline() || s.inlineSeen.Swap(false) {
				continue
			}
			// Asleep first, then a last look: a request starting now
			// either is seen here or sees the watchdog asleep and wakes it.
			s.inlineAsleep.Store(true)
			if !s.inlineSeen.Swap(false) {
				break
			}
			s.inlineAsleep.Store(false)
		}
	}
}

// inlineStarted tells the watchdog that a request started on a reader.
func (s *Server) inlineStarted() {
	s.inlineRuns.Add(1)
	s.inlineSeen.Store(true)
	if s.inlineAsleep.Load() {
		select {
		case s.inlineWake <- struct{}{}:
		default:
		}
	}
}

// handOffInline hands the reading of every connection whose request has
// run on its reader for inlineSlice or longer to a relay (wsConn.relay),
// and reports whether any request runs on a reader.
func (s *Server) handOffInline() (running bool) {
	now := s.sinceStart()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		t := c.inline.Load()
		if t <= 0 {
			continue
		}
		running = true
		if now-t >= int64(inlineSlice) && c.inline.CompareAndSwap(t, readingHandedOff) {
			s.inlineHandOffs.Add(1)
			go c.relay()
		}
	}
	return running
}

// readingHandedOff marks, in wsConn.inline, a connection whose reading
// went to a relay while the reader ran a request.
const readingHandedOff = -1

// sinceStart is the time since the server was made, in ns on the monotonic
// clock: 1 or more.
func (s *Server) sinceStart() int64 { return int64(time.Since(s.started)) + 1 }

// idleC returns the idle timer's channel, or nil without an idle timeout.
func (s *Server) idleC() <-chan time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle == nil {
		return nil
	}
	return s.idle.C
}

// resetIdleLocked (re)arms the idle timer when no connection is open.
func (s *Server) resetIdleLocked() {
	if s.cfg.IdleTimeout <= 0 || s.stopping {
		return
	}
	if s.idle == nil {
		s.idle = time.NewTimer(s.cfg.IdleTimeout)
		return
	}
	s.idle.Reset(s.cfg.IdleTimeout)
}

// Shutdown stops the server gracefully: it answers new requests with
// "unavailable" and waits for the requests in flight, then closes the
// listener and every connection with status 1001 (going away). While the
// requests drain the listener stays open, so /healthz answers 503
// "stopping" and upgrades are refused with 503. When ctx ends first, it
// closes whatever is left at once and returns ctx's error. It is safe to
// call more than once and concurrently with Close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginStop()
	select {
	case <-s.drained:
	case <-ctx.Done():
		s.Close()
		return fmt.Errorf("daemon.Shutdown: waiting for requests in flight: %w", ctx.Err())
	}
	// No new connections; hijacked WebSocket connections are ours to close.
	herr := s.httpSrv.Shutdown(ctx)
	s.mu.Lock()
	conns := make([]*wsConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.closeGracefully() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.Close()
		<-done
		return fmt.Errorf("daemon.Shutdown: closing connections: %w", ctx.Err())
	}
	s.finish()
	if herr != nil && !errors.Is(herr, context.Canceled) {
		return fmt.Errorf("daemon.Shutdown: %w", herr)
	}
	return nil
}

// Close stops the server at once: it closes the listener and every
// connection without a closing handshake. Requests in flight see their
// context cancelled. It waits for the connections' goroutines to exit.
func (s *Server) Close() error {
	s.beginStop()
	err := s.httpSrv.Close()
	s.kill()
	s.finish()
	if err != nil {
		return fmt.Errorf("daemon.Close: %w", err)
	}
	return nil
}

// beginStop marks the server stopping (once).
func (s *Server) beginStop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return
	}
	s.stopping = true
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.inFlight == 0 {
		close(s.drained)
	}
}

// finish waits for every connection goroutine and marks the server stopped.
func (s *Server) finish() {
	s.connWG.Wait()
	s.stopOnce.Do(func() {
		s.unsub()
		s.kill()
		close(s.stopped)
	})
}

// Done returns a channel closed when the server has stopped.
func (s *Server) Done() <-chan struct{} { return s.stopped }

// startRequest counts a request in flight; false when stopping.
func (s *Server) startRequest() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.inFlight++
	return true
}

func (s *Server) endRequest() {
	s.requests.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if s.inFlight == 0 && s.stopping {
		close(s.drained)
	}
}

// reserveConn admits an upgrade before its 101 is written: the upgrade
// counts against MaxConnections from now until addConn or unreserveConn,
// so a burst of upgrades cannot pass the limit. False when stopping or
// full.
func (s *Server) reserveConn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || len(s.conns)+s.upgrades >= protocol.MaxConnections {
		return false
	}
	s.upgrades++
	return true
}

// unreserveConn gives up an upgrade reserveConn admitted.
func (s *Server) unreserveConn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upgrades--
}

// addConn registers the connection of an upgrade reserveConn admitted;
// false when the server started stopping meanwhile.
func (s *Server) addConn(c *wsConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upgrades--
	if s.stopping {
		return false
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	if s.idle != nil {
		s.idle.Stop()
	}
	return true
}

func (s *Server) removeConn(c *wsConn) {
	s.events.remove(c)
	s.mu.Lock()
	delete(s.conns, c)
	if len(s.conns) == 0 {
		s.resetIdleLocked()
	}
	s.mu.Unlock()
	s.connWG.Done()
}

func (s *Server) status() api.StatusResult {
	s.mu.Lock()
	conns, inFlight, stopping := len(s.conns), s.inFlight, s.stopping
	s.mu.Unlock()
	st := api.StateServing
	if stopping {
		st = api.StateStopping
	}
	return api.StatusResult{
		ServerVersion:   s.cfg.Version,
		ProtocolVersion: api.ProtocolVersion,
		Workspace:       s.cfg.Workspace,
		Socket:          s.socket,
		PID:             os.Getpid(),
		StartedAt:       s.started.UTC(),
		UptimeMS:        uptime(s.started),
		Connections:     conns,
		Subscribers:     s.events.count(),
		InFlight:        inFlight,
		Requests:        s.requests.Load(),
		EventsDropped:   s.events.dropped.Load(),
		State:           st,
		Files:           s.filesStatus(),
	}
}

func (s *Server) filesStatus() *api.FilesStatus {
	if s.cfg.Files == nil {
		return nil
	}
	st := s.cfg.Files.Status()
	return &st
}

// ServeHTTP serves /healthz and the WebSocket upgrade.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, origin := r.Header["Origin"]
	switch {
	case origin:
		// Any Origin, an empty one included: only a browser sends one, and
		// coder/websocket's own check lets an empty or same-host one pass.
		s.log.Warn("refused request with an Origin header", "path", truncate(r.URL.Path, 64))
		http.Error(w, "cairnd: requests with an Origin header are refused", http.StatusForbidden)
	case r.URL.Path == "/healthz" && r.Method == http.MethodGet:
		s.health(w)
	case r.URL.Path == "/":
		s.upgrade(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter) {
	st := s.status()
	code := http.StatusOK
	body := map[string]any{"status": "ok", "pid": st.PID, "version": st.ServerVersion, "workspace": st.Workspace, "connections": st.Connections}
	if st.State == api.StateStopping {
		code, body["status"] = http.StatusServiceUnavailable, "stopping"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

func offersSubprotocol(r *http.Request) bool {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range splitTokens(v) {
			if p == protocol.Subprotocol {
				return true
			}
		}
	}
	return false
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	if !offersSubprotocol(r) {
		s.log.Warn("refused upgrade without subprotocol " + protocol.Subprotocol)
		http.Error(w, "cairnd: the WebSocket subprotocol "+protocol.Subprotocol+" is required", http.StatusBadRequest)
		return
	}
	if !s.reserveConn() {
		http.Error(w, "cairnd: not accepting connections", http.StatusServiceUnavailable)
		return
	}
	tap := &hijackTap{ResponseWriter: w, timeout: s.cfg.FrameTimeout, limit: s.cfg.MaxMessageSize, writeTimeout: s.cfg.WriteTimeout}
	ws, err := websocket.Accept(tap, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		s.unreserveConn()
		s.log.Warn("websocket upgrade failed", "error", err)
		return
	}
	c := newWSConn(s, ws, tap.fc)
	if !s.addConn(c) {
		ws.Close(websocket.StatusGoingAway, "cairnd shutting down")
		return
	}
	c.serve()
}
