package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestE2EPipelinedMessagesKeepTheirBytes: a client sends many saves on one
// connection without waiting for any answer, their sizes alternating
// between a few bytes, kilobytes and over a mebibyte, so that the daemon
// reads each message while the requests before it still run. cairnd reads
// messages into reused buffers (it lets go of one grown past 64 KiB), and a
// request's params stay in its buffer, not copied, until its handler
// returns; a buffer reused for the next message while a request still used
// it would make that request save the next message's bytes (or fail to
// decode). Every session must hold exactly the bytes its own save sent.
func TestE2EPipelinedMessagesKeepTheirBytes(t *testing.T) {
	const n = 40
	sizes := []int{10, 40 << 10, 100, 3 << 10, 1<<20 + 1000, 7}
	p := startCairnd(t, workspace(t), "--log-level", "warn", "--no-track-files")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, _, err := rawDial(ctx, p.sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(protocol.DefaultMaxMessageSize)
	want := make([]string, n)
	for i := range n {
		// Each payload differs from its neighbours in its letter and size.
		want[i] = `"` + strings.Repeat(string(rune('a'+i%26)), sizes[i%len(sizes)]) + fmt.Sprintf("%d", i) + `"`
		req := mustReq(uint64(i+1), api.Save.Name, api.SaveRequest{
			SessionID: fmt.Sprintf("s%02d", i),
			Change:    &session.Change{AppendMessages: []session.Value{session.Value(want[i])}},
		})
		if err := ws.Write(ctx, websocket.MessageBinary, req); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	for range n {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var r protocol.Response
		if err := protocol.Unmarshal(msg, &r); err != nil {
			t.Fatal(err)
		}
		if r.Error != nil {
			t.Fatalf("save %v: %s: %s", *r.ID, r.Error.Code, r.Error.Message)
		}
	}
	c := p.dial(t)
	for i := range n {
		got, err := c.Messages(ctx, api.MessagesRequest{SessionID: fmt.Sprintf("s%02d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) != 1 || string(got.Messages[0]) != want[i] {
			t.Fatalf("session s%02d holds %d messages, the first %.60q...; want only %.60q...", i, len(got.Messages), first(got.Messages), want[i])
		}
	}
}

func first(vs []session.Value) string {
	if len(vs) == 0 {
		return ""
	}
	return string(vs[0])
}
