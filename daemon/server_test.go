package daemon_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/daemon"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// fakeBackend is an engine over a MemStore whose Save misbehaves on
// request: session "block" waits for release; "err:<code>" fails with that
// code (a *session.LockedError for locked, a plain error for internal).
type fakeBackend struct {
	engine.Served
	release    chan struct{}
	blocked    chan struct{} // receives when a blocking save started
	subscribed atomic.Int32  // subscriptions to the engine's events held
}

func (f *fakeBackend) Subscribe(fn func(api.Event)) (cancel func()) {
	f.subscribed.Add(1)
	c := f.Served.Subscribe(fn)
	var once sync.Once
	return func() { once.Do(func() { f.subscribed.Add(-1); c() }) }
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		Served:  engine.Served{Engine: engine.New(session.NewMemStore(), engine.Options{})},
		release: make(chan struct{}),
		blocked: make(chan struct{}, protocol.MaxInFlightPerConn+1),
	}
}

func (f *fakeBackend) Save(ctx context.Context, req api.SaveRequest) (api.SaveResult, error) {
	switch {
	case req.SessionID == "block":
		f.blocked <- struct{}{}
		select {
		case <-f.release:
		case <-ctx.Done():
			return api.SaveResult{}, ctx.Err()
		}
	case req.SessionID == "err:locked":
		return api.SaveResult{}, &session.LockedError{Path: "/x/.cairn/LOCK", PID: 4242}
	case req.SessionID == "err:internal":
		return api.SaveResult{}, errors.New("disk on fire")
	case strings.HasPrefix(req.SessionID, "err:"):
		return api.SaveResult{}, session.Errorf(session.Code(strings.TrimPrefix(req.SessionID, "err:")), "injected")
	}
	return f.Engine.Save(ctx, req)
}

// inproc is a Server over a fake backend on a socket in a temp dir.
type inproc struct {
	srv     *daemon.Server
	be      *fakeBackend
	sock    string
	served  chan error
	cancel  context.CancelFunc
	stopped bool
}

func startInproc(t *testing.T, cfg daemon.Config) *inproc {
	t.Helper()
	be := newFakeBackend()
	dir := t.TempDir()
	cfg.Backend, cfg.Workspace = be, dir
	srv, err := daemon.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ip := &inproc{srv: srv, be: be, sock: sock, served: make(chan error, 1), cancel: cancel}
	go func() { ip.served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		srv.Close()
		<-srv.Done()
		be.Engine.Close()
	})
	return ip
}

func (ip *inproc) dial(t *testing.T) *protocol.Client { return dialSocket(t, ip.sock) }

func msg(s string) api.SaveRequest {
	return api.SaveRequest{SessionID: s, Change: &session.Change{AppendMessages: []session.Value{session.Value(`{"m":1}`)}}}
}

// TestEveryErrorCodeOnTheWire checks that each code, with its data, reaches
// the client intact and unwraps to its sentinel.
func TestEveryErrorCodeOnTheWire(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	for _, code := range session.Codes() {
		_, err := c.Save(ctx, msg("err:"+string(code)))
		var re *protocol.RemoteError
		if !errors.As(err, &re) || re.Code != code || !errors.Is(err, session.SentinelOf(code)) {
			t.Errorf("%s: got %v", code, err)
		}
		if code == session.CodeLocked && re != nil && re.HolderPID() != 4242 {
			t.Errorf("locked: data %v, want pid 4242", re.Data)
		}
	}
	err := c.Call(ctx, "noSuchMethod", api.Empty{}, nil)
	if protocol.CodeOf(err) != api.CodeMethodNotFound || !errors.Is(err, protocol.ErrMethodNotFound) {
		t.Errorf("unknown method: %v", err)
	}
	err = c.Call(ctx, api.Save.Name, map[string]any{"session_id": 7}, nil)
	if protocol.CodeOf(err) != api.CodeBadRequest || !errors.Is(err, protocol.ErrBadRequest) {
		t.Errorf("wrong param type: %v", err)
	}
	err = c.Call(ctx, api.Subscribe.Name, api.SubscribeParams{Events: []string{"nope"}}, nil)
	if protocol.CodeOf(err) != session.CodeInvalidArgument {
		t.Errorf("unknown event: %v", err)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Errorf("connection broken after errors: %v", err)
	}
}

// TestCancelledCallKeepsConnection: a call whose context ends returns at
// once; the connection and other calls carry on.
func TestCancelledCallKeepsConnection(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := c.Save(cctx, msg("block")); done <- err }()
	<-ip.be.blocked
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if _, err := c.Save(ctx, msg("s1")); err != nil {
		t.Fatalf("call after cancel: %v", err)
	}
	close(ip.be.release)
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("status: %v", err)
	}
}

// TestShutdownDrainsAndRefuses: requests in flight finish and are answered;
// new ones get "unavailable"; then the connection closes with 1001.
func TestShutdownDrainsAndRefuses(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	saved := make(chan error, 1)
	go func() { _, err := c.Save(ctx, msg("block")); saved <- err }()
	<-ip.be.blocked
	shut := make(chan error, 1)
	go func() { shut <- ip.srv.Shutdown(ctx) }()
	// Wait until the server reports stopping; then a new request is refused.
	for {
		st, err := c.Status(ctx)
		if err != nil {
			if protocol.CodeOf(err) != api.CodeUnavailable {
				t.Fatalf("status during shutdown: %v", err)
			}
			break
		}
		if st.State == api.StateStopping {
			t.Fatalf("status answered while stopping")
		}
		time.Sleep(time.Millisecond)
	}
	close(ip.be.release)
	if err := <-saved; err != nil {
		t.Fatalf("in-flight save: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-ip.served; !errors.Is(err, daemon.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	if _, err := c.Status(ctx); !errors.Is(err, protocol.ErrConnectionLost) {
		t.Fatalf("after shutdown: %v", err)
	}
}

// TestShutdownCutsQuietClients (PROTOCOL.md §10): a client that reads
// only while a call of its waits for an answer (the Python and Rust
// bindings' own checkpoint connections) does not answer the daemon's close
// frame. Shutdown cuts its connection after a second instead of waiting
// out the WebSocket library's 5 s closing handshake: within a 3 s
// deadline, Shutdown succeeds, and the client finds the close frame and
// then the end of the stream.
func TestShutdownCutsQuietClients(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c, br := rawUpgrade(t, ip.sock, nil)
	ctx, cancel := context.WithTimeout(testkit.Context(t), 3*time.Second)
	defer cancel()
	if err := ip.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a client that does not answer the close frame: %v", err)
	}
	if code, _ := readClose(t, c, br); code != websocket.StatusGoingAway {
		t.Fatalf("close status %d, want %d", code, websocket.StatusGoingAway)
	}
}

// TestIdleTimeout: Serve returns nil once no client has been connected for
// the idle timeout, and not while one is.
func TestIdleTimeout(t *testing.T) {
	ip := startInproc(t, daemon.Config{IdleTimeout: 200 * time.Millisecond})
	c := ip.dial(t)
	time.Sleep(400 * time.Millisecond)
	if _, err := c.Status(testkit.Context(t)); err != nil {
		t.Fatalf("daemon went idle with a client connected: %v", err)
	}
	c.Close()
	select {
	case err := <-ip.served:
		if err != nil {
			t.Fatalf("Serve after idle timeout: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no idle exit")
	}
}

// TestNoLeaksAfterShutdown runs clients with subscriptions and concurrent
// calls, shuts down, and checks every goroutine is gone.
func TestNoLeaksAfterShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	be := newFakeBackend()
	defer be.Engine.Close()
	dir := t.TempDir()
	srv, err := daemon.NewServer(daemon.Config{Backend: be, Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), ln) }()
	ctx := testkit.Context(t)
	var clients []*protocol.Client
	for range 4 {
		c, err := protocol.Dial(ctx, filepath.Join(dir, "s.sock"), nil)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		if _, err := c.Subscribe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for range 20 {
				if _, err := c.Save(ctx, msg("s"+string(rune('a'+i)))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	clients[0].Close() // one leaves on its own; the others are closed by the server
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, daemon.ErrServerClosed) {
		t.Fatal(err)
	}
	for _, c := range clients {
		c.Close()
	}
}

// TestRequestsRunConcurrently: on one connection, a save blocked in the
// backend holds up neither status nor other saves; it is answered once it
// is released.
func TestRequestsRunConcurrently(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	blocked := make(chan error, 1)
	go func() { _, err := c.Save(ctx, msg("block")); blocked <- err }()
	<-ip.be.blocked
	for i := range 3 {
		start := time.Now()
		if _, err := c.Status(ctx); err != nil {
			t.Fatalf("status %d while a save blocks: %v", i, err)
		}
		if i == 0 {
			// Measured, not asserted: PROTOCOL.md says about 20-40 ms.
			t.Logf("the first call behind the blocked save was answered after %v", time.Since(start))
		}
		if _, err := c.Save(ctx, msg("beside")); err != nil {
			t.Fatalf("save %d while a save blocks: %v", i, err)
		}
	}
	select {
	case err := <-blocked:
		t.Fatalf("the blocked save returned before its release: %v", err)
	default:
	}
	// The save, alone in flight when it was read, ran on the reader; the
	// watchdog gave the reading to a relay, which read the calls above.
	if _, handOffs := daemon.InlineStats(ip.srv); handOffs != 1 {
		t.Errorf("%d readings handed to a relay, want 1", handOffs)
	}
	close(ip.be.release)
	if err := <-blocked; err != nil {
		t.Fatalf("blocked save: %v", err)
	}
}

// TestEngineEventsOnlyWhileSubscribed: the server holds a subscription to
// the engine's events only while a connection is subscribed (with none, the
// engine makes no events for its commits), and the subscribers get the
// events of the commits made while they are.
func TestEngineEventsOnlyWhileSubscribed(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	ctx := testkit.Context(t)
	c1, c2 := ip.dial(t), ip.dial(t)
	held := func(want int32) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ip.be.subscribed.Load() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d engine subscriptions held, want %d", ip.be.subscribed.Load(), want)
			}
		}
	}
	if _, err := c1.Save(ctx, msg("s")); err != nil {
		t.Fatal(err)
	}
	held(0)
	sub1, err := c1.Subscribe(ctx, api.EventSessionCommitted)
	if err != nil {
		t.Fatal(err)
	}
	held(1)
	sub2, err := c2.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held(1)
	res, err := c1.Save(ctx, msg("s"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []*protocol.Subscription{sub1, sub2} {
		select {
		case ev := <-sub.C:
			if ev.Type != api.EventSessionCommitted || ev.Data["generation"] != res.Generation {
				t.Fatalf("event %+v, want session.committed of generation %d", ev, res.Generation)
			}
		case <-ctx.Done():
			t.Fatal("no event for the save")
		}
	}
	if err := sub1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	held(1)
	c2.Close()
	held(0)
}

// TestLockstepRequestsRunOnTheReader: a client that waits for each answer
// has its requests run on the connection's reader, with no hand-off to a
// relay; the answers are those of requests run on workers.
func TestLockstepRequestsRunOnTheReader(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	runs0, _ := daemon.InlineStats(ip.srv)
	const n = 20
	for i := range n {
		res, err := c.Save(ctx, msg("lockstep"))
		if err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		if res.Generation != uint64(i+1) {
			t.Fatalf("save %d: generation %d, want %d", i, res.Generation, i+1)
		}
	}
	runs, handOffs := daemon.InlineStats(ip.srv)
	if runs-runs0 < n || handOffs != 0 {
		t.Fatalf("%d requests ran on the reader, %d readings handed off; want %d and 0", runs-runs0, handOffs, n)
	}
}

// TestPipelinedRequestsRunOnWorkers: two requests that arrive together
// (one socket write) run side by side: the first, which blocks, does not
// hold up the second, and no reading is handed to a relay, since the
// reader saw the second one buffered and ran the first on a worker.
func TestPipelinedRequestsRunOnWorkers(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	conn, br := rawUpgrade(t, ip.sock, nil)
	both := append(maskedFrame(mustReq(1, api.Save.Name, msg("block"))), maskedFrame(mustReq(2, api.Status.Name, api.Empty{}))...)
	if _, err := conn.Write(both); err != nil {
		t.Fatal(err)
	}
	<-ip.be.blocked
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var r protocol.Response
	if err := protocol.Unmarshal(readFrame(t, br), &r); err != nil || r.ID == nil || *r.ID != 2 || r.Error != nil {
		t.Fatalf("first answer: %+v (%v); want the status's", r, err)
	}
	if runs, handOffs := daemon.InlineStats(ip.srv); handOffs != 0 || runs != 0 {
		t.Errorf("%d requests ran on the reader, %d readings handed off; want none", runs, handOffs)
	}
	close(ip.be.release)
	r = protocol.Response{}
	if err := protocol.Unmarshal(readFrame(t, br), &r); err != nil || r.ID == nil || *r.ID != 1 || r.Error != nil {
		t.Fatalf("second answer: %+v (%v); want the save's", r, err)
	}
}

// maskedFrame is payload as a client's binary frame: masked, with a key
// that is not zero.
func maskedFrame(payload []byte) []byte {
	b := []byte{0x82}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0x80|126), uint16(n))
	default:
		b = binary.BigEndian.AppendUint64(append(b, 0x80|127), uint64(n))
	}
	key := [4]byte{0x1f, 0x2e, 0x3d, 0x4c}
	b = append(b, key[:]...)
	for i, x := range payload {
		b = append(b, x^key[i%4])
	}
	return b
}

// readFrame reads one unfragmented server frame from br and returns its
// payload.
func readFrame(t *testing.T, br *bufio.Reader) []byte {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		t.Fatalf("read a frame header: %v", err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126, 127:
		x := make([]byte, 2+6*(n-126))
		if _, err := io.ReadFull(br, x); err != nil {
			t.Fatal(err)
		}
		n = 0
		for _, b := range x {
			n = n<<8 | uint64(b)
		}
	}
	if h[0] != 0x82 || h[1]&0x80 != 0 || n > 1<<20 {
		t.Fatalf("frame header %x, length %d: want an unmasked final binary frame", h, n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInFlightLimitPerConnection: with protocol.MaxInFlightPerConn
// requests of one connection running, the daemon reads nothing more from
// it: a status sent then is answered only after one of them is.
func TestInFlightLimitPerConnection(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	ctx := testkit.Context(t)
	ws, _, err := rawDial(ctx, ip.sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	const limit = protocol.MaxInFlightPerConn
	for i := range limit {
		if err := ws.Write(ctx, websocket.MessageBinary, mustReq(uint64(i+1), api.Save.Name, msg("block"))); err != nil {
			t.Fatal(err)
		}
	}
	for range limit {
		<-ip.be.blocked
	}
	const statusID = limit + 1
	if err := ws.Write(ctx, websocket.MessageBinary, mustReq(statusID, api.Status.Name, api.Empty{})); err != nil {
		t.Fatal(err)
	}
	// A round trip on another connection: had the status been read, it
	// would have been answered by now.
	st, err := ip.dial(t).Status(ctx)
	if err != nil || st.InFlight < limit+1 {
		t.Fatalf("status from another connection: %d in flight, want at least %d (%v)", st.InFlight, limit+1, err)
	}
	ip.be.release <- struct{}{}
	if r := answer(t, ctx, ws); r.ID == nil || *r.ID == statusID || r.Error != nil {
		t.Fatalf("first answer: id %v, error %+v; want a save's, before the status's", idOf(r), r.Error)
	}
	if r := answer(t, ctx, ws); r.ID == nil || *r.ID != statusID || r.Error != nil {
		t.Fatalf("second answer: id %v, error %+v; want the status's", idOf(r), r.Error)
	}
	close(ip.be.release)
	for range limit - 1 {
		if r := answer(t, ctx, ws); r.Error != nil {
			t.Fatalf("save answer %+v", r)
		}
	}
}

// idOf is a response's id for a message: a number, or nil.
func idOf(r protocol.Response) any {
	if r.ID == nil {
		return nil
	}
	return *r.ID
}

// TestOneConnectionManyCallers: goroutines sharing one connection, which
// is also subscribed, call concurrently while the writer interleaves their
// answers with the events; run under -race. Every call is answered and
// every event delivered or counted as dropped.
func TestOneConnectionManyCallers(t *testing.T) {
	const callers, saves = 8, 40
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	sub, err := c.Subscribe(ctx, api.EventSessionCommitted)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(ctx)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for j := range saves {
				if _, err := c.Save(ctx, msg(fmt.Sprint("c", i))); err != nil {
					t.Errorf("caller %d save %d: %v", i, j, err)
					return
				}
				if _, err := c.Status(ctx); err != nil {
					t.Errorf("caller %d status %d: %v", i, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	var seen, dropped uint64 // dropped by the daemon, reported by events.dropped
	for seen+dropped+sub.Dropped() < callers*saves {
		select {
		case ev := <-sub.C:
			if ev.Type == api.EventDropped {
				n, _ := ev.Data["dropped"].(uint64)
				dropped += n
				continue
			}
			seen++
		case <-ctx.Done():
			t.Fatalf("%d events seen, %d dropped by the daemon, %d by the client, of %d commits", seen, dropped, sub.Dropped(), callers*saves)
		}
	}
}
