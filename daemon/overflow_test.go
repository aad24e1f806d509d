package daemon_test

import (
	"fmt"
	"testing"

	"github.com/coder/websocket"

	"github.com/cairn-dev/cairn/daemon"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/protocol"
)

// TestEventOverflow: a subscriber that does not read loses events, the
// committing clients are never slowed or failed by it, and once it reads
// again it is told how many it lost (events.dropped).
func TestEventOverflow(t *testing.T) {
	const commits = 4000
	ip := startInproc(t, daemon.Config{})
	ctx := ctxT(t)
	ws, _, err := rawDial(ctx, ip.sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	if err := ws.Write(ctx, websocket.MessageBinary, mustReq(1, protocol.MethodSubscribe, protocol.SubscribeParams{})); err != nil {
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
		case engine.EventSessionCommitted:
			seen++
		case protocol.EventDropped:
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
