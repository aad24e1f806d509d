package daemon_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/daemon"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestEventOverflow: a subscriber that does not read loses events, the
// committing clients are never slowed or failed by it, and once it reads
// again it is told how many it lost (events.dropped).
func TestEventOverflow(t *testing.T) {
	const commits = 4000
	ip := startInproc(t, daemon.Config{})
	ctx := testkit.Context(t)
	ws, _, err := rawDial(ctx, ip.sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	if err := ws.Write(ctx, websocket.MessageBinary, mustReq(1, api.Subscribe.Name, api.SubscribeParams{})); err != nil {
		t.Fatal(err)
	}
	if r := answer(t, ctx, ws); r.Error != nil {
		t.Fatalf("subscribe: %+v", r.Error)
	}
	w := ip.dial(t)
	for i := range commits {
		if _, err := w.Save(ctx, msg(fmt.Sprint("busy", i%200))); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	// Now read: the generations seen, then an events.dropped.
	var seen, dropped uint64
	for seen+dropped < commits {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("after %d events, %d dropped: %v", seen, dropped, err)
		}
		var p protocol.Push
		if err := protocol.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		switch p.Event {
		case api.EventSessionCommitted:
			seen++
		case api.EventDropped:
			dropped += p.Data["dropped"].(uint64)
		default:
			t.Fatalf("unexpected push %+v", p)
		}
	}
	if dropped == 0 {
		t.Fatalf("no events dropped for a subscriber that did not read (%d seen)", seen)
	}
	st, err := w.Status(ctx)
	if err != nil || st.EventsDropped != dropped {
		t.Fatalf("status events_dropped %d, pushes said %d (%v)", st.EventsDropped, dropped, err)
	}
	t.Logf("%d delivered, %d dropped", seen, dropped)
}

// TestStalledReaderIsCutOff: a client that sends requests but stops
// reading their answers is disconnected once an answer has waited
// Config.WriteTimeout to be written; its requests stop holding the
// daemon, and another client sees nothing of it.
func TestStalledReaderIsCutOff(t *testing.T) {
	const timeout = 300 * time.Millisecond
	var logs syncBuffer
	ip := startInproc(t, daemon.Config{WriteTimeout: timeout, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	ctx := testkit.Context(t)
	w := ip.dial(t)
	big := session.Value(`"` + strings.Repeat("x", 256<<10) + `"`)
	if _, err := w.Save(ctx, api.SaveRequest{SessionID: "big", Change: &session.Change{AppendMessages: []session.Value{big}}}); err != nil {
		t.Fatal(err)
	}
	ws, _, err := rawDial(ctx, ip.sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	// 64 answers of 256 KiB each: far more than the socket buffers hold.
	const requests = 64
	for i := range requests {
		if err := ws.Write(ctx, websocket.MessageBinary, mustReq(uint64(i+1), api.ResumeSession.Name, api.SessionParams{SessionID: "big"})); err != nil {
			t.Fatal(err)
		}
	}
	// The daemon registers the connection, has answers it cannot write,
	// and cuts the connection off: its requests stop holding the daemon.
	waitStatus(t, w, "the stalled reader connected, its requests in flight", func(st *api.StatusResult) bool {
		return st.Connections == 2 && st.InFlight > 1
	})
	waitStatus(t, w, "the stalled reader cut off", func(st *api.StatusResult) bool {
		return st.Connections == 1 && st.InFlight == 1 // w, and this status call
	})
	// Reading now yields what was written before the cut, then an error.
	answers := 0
	for {
		_, _, err := ws.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatal("the stalled reader's connection was never closed")
			}
			break
		}
		answers++
	}
	if answers >= requests {
		t.Fatalf("all %d answers arrived; the daemon never had to wait", answers)
	}
	if _, err := w.Save(ctx, msg("after")); err != nil {
		t.Fatalf("the other client: %v", err)
	}
	t.Logf("%d of %d answers delivered before the cut", answers, requests)
	if !strings.Contains(logs.String(), "write timed out") {
		t.Errorf("no \"write timed out\" in the log:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use, for a log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitStatus polls c's status until ok holds, for at most 20 s.
func waitStatus(t *testing.T, c *protocol.Client, what string, ok func(*api.StatusResult) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := c.Status(testkit.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		if ok(&st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s: %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIdleLongerThanWriteTimeout: the socket's write deadline (set once per
// stretch of Config.WriteTimeout, not per message) has passed while the
// connection sat idle; the next answers are written all the same, and so
// is the close frame at shutdown.
func TestIdleLongerThanWriteTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	ip := startInproc(t, daemon.Config{WriteTimeout: timeout})
	ctx := testkit.Context(t)
	c := ip.dial(t)
	for i := range 3 {
		if _, err := c.Save(ctx, msg("idle")); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		time.Sleep(3 * timeout)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("status after an idle spell: %v", err)
	}
}
