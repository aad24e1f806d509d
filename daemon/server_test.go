package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/daemon"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// fakeBackend is an engine over a MemStore whose Save misbehaves on
// request: session "block" waits for release; "slow" takes twice
// protocol.SerialLimit; "err:<code>" fails with that
// code (a *session.LockedError for locked, a plain error for internal).
type fakeBackend struct {
	*engine.Engine
	release chan struct{}
	blocked chan struct{} // receives when a blocking save started
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		Engine:  engine.New(session.NewMemStore(), engine.Options{}),
		release: make(chan struct{}),
		blocked: make(chan struct{}, 16),
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
	case req.SessionID == "slow":
		time.Sleep(2 * protocol.SerialLimit)
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

func (ip *inproc) dial(t *testing.T) *protocol.Client { return dialSocket(t, ip.sock, nil) }

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

// TestSerialRequestPassesReadingOn: on a connection whose requests arrive
// one at a time, a save runs without passing reading on; once it has run
// for long (here: blocked in the backend), reading passes on, and calls
// made meanwhile are answered before it ends. Those calls overlapped it,
// so the connection then passes reading on at once again.
func TestSerialRequestPassesReadingOn(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	for i := range 40 { // one at a time: the connection turns serial
		if _, err := c.Save(ctx, msg(fmt.Sprint("one-", i))); err != nil {
			t.Fatal(err)
		}
	}
	runs, released := daemon.SerialRuns(ip.srv)
	if runs == 0 || released != 0 {
		t.Fatalf("after 40 saves one at a time: %d serial runs, %d released", runs, released)
	}
	blocked := make(chan error, 1)
	go func() { _, err := c.Save(ctx, msg("block")); blocked <- err }()
	<-ip.be.blocked
	for i := range 3 {
		if _, err := c.Status(ctx); err != nil {
			t.Fatalf("status %d while a serial save blocks: %v", i, err)
		}
		if _, err := c.Save(ctx, msg("beside")); err != nil {
			t.Fatalf("save %d while a serial save blocks: %v", i, err)
		}
	}
	select {
	case err := <-blocked:
		t.Fatalf("the blocked save returned before its release: %v", err)
	default:
	}
	if r, rel := daemon.SerialRuns(ip.srv); r != runs+1 || rel != 1 {
		t.Fatalf("the blocked save: %d serial runs (%d before), %d released", r, runs, rel)
	}
	ip.be.release <- struct{}{}
	if err := <-blocked; err != nil {
		t.Fatalf("blocked save: %v", err)
	}
	// The next save that blocks passes reading on from the start.
	go func() { _, err := c.Save(ctx, msg("block")); blocked <- err }()
	<-ip.be.blocked
	if _, err := c.Save(ctx, msg("beside")); err != nil {
		t.Fatal(err)
	}
	close(ip.be.release)
	if err := <-blocked; err != nil {
		t.Fatalf("second blocked save: %v", err)
	}
	if r, rel := daemon.SerialRuns(ip.srv); r != runs+1 || rel != 1 {
		t.Fatalf("after requests overlapped: %d serial runs (%d before), %d released", r, runs+1, rel)
	}
}

// TestSerialReleaseRace mixes, on one connection, saves that run serially
// and end in time, saves that run past protocol.SerialLimit (reading
// passes on mid-run), and calls from a second goroutine that overlap them;
// run under -race. Every call is answered: reading is never lost between
// goroutines.
func TestSerialReleaseRace(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	side := make(chan error, 1)
	for i := range 300 {
		sid := fmt.Sprint("quick-", i%7)
		if i%10 == 9 {
			sid = "slow"
		}
		if i%50 == 25 {
			go func() { _, err := c.Status(ctx); side <- err }()
		}
		if _, err := c.Save(ctx, msg(sid)); err != nil {
			t.Fatalf("save %d (%s): %v", i, sid, err)
		}
		if i%50 == 25 {
			if err := <-side; err != nil {
				t.Fatalf("status beside save %d: %v", i, err)
			}
		}
	}
	runs, released := daemon.SerialRuns(ip.srv)
	if runs == 0 || released == 0 {
		t.Fatalf("%d serial runs, %d released: the test did not exercise serial mode", runs, released)
	}
	t.Logf("%d serial runs, %d released", runs, released)
}
