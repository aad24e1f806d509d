package daemon_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/daemon"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// procMemKiB reads a field of /proc/<pid>/status (VmRSS, VmHWM) in KiB.
func procMemKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", field, line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// logCount counts the lines of the daemon's log that contain want.
func logCount(p *proc, want string) int { return strings.Count(p.logText(), want) }

// waitLog waits (at most a minute) until the daemon's log holds want at
// least n times.
func waitLog(t *testing.T, p *proc, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for logCount(p, want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q not logged %d times within a minute; log:\n%s", want, n, p.logText())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// logConns returns the connection ids named by the log lines holding want
// (the daemon logs conn=<id>), in order.
func logConns(p *proc, want string) []string {
	var ids []string
	for _, line := range strings.Split(p.logText(), "\n") {
		if !strings.Contains(line, want) {
			continue
		}
		if _, rest, ok := strings.Cut(line, " conn="); ok {
			id, _, _ := strings.Cut(rest, " ")
			ids = append(ids, id)
		}
	}
	return ids
}

// TestE2EAnswerBudget: four clients ask for large answers and never read
// them. The daemon holds no more than its answer budget for them (its peak
// RSS rises by at most the budget plus a slack), closes each of them with
// the documented status once the budget is exhausted, and another client
// goes on unharmed.
//
// Without the budget each client would hold 64 answers of 1 MiB (the
// in-flight limit per connection), 256 MiB in all, until the write
// timeout cut it off without a status. The requests go one at a time, each
// sent once the previous answer is queued (the daemon's trace log says so),
// so that answers being built, which the budget does not cover, stay few.
func TestE2EAnswerBudget(t *testing.T) {
	const (
		budget   = 16 << 20
		size     = 1 << 20
		clients  = 4
		requests = protocol.MaxInFlightPerConn
		// slack: the Go heap grows to about twice what is live before it
		// collects (GOGC=100), so the budget may be paid twice; plus room
		// for the answer being built and the runtime.
		slack = 2*budget + 32<<20
	)
	p := startCairnd(t, workspace(t), "--log-level", "trace", "--answer-budget", fmt.Sprint(budget), "--max-message-size", fmt.Sprint(4<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	good := p.dial(t)
	big := session.Value(`"` + strings.Repeat("x", size) + `"`)
	if _, err := good.Save(ctx, api.SaveRequest{SessionID: "big", Change: &session.Change{AppendMessages: []session.Value{big}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := good.ResumeSession(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	base := procMemKiB(t, pid, "VmHWM") << 10

	// The clients, and the daemon's id for each.
	conns := make([]*websocket.Conn, clients)
	ids := make([]string, clients)
	for i := range conns {
		opened := len(logConns(p, "connection opened"))
		ws, _, err := rawDial(ctx, p.sock, []string{protocol.Subprotocol}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		ws.SetReadLimit(8 << 20)
		conns[i] = ws
		waitLog(t, p, "connection opened", opened+1)
		ids[i] = logConns(p, "connection opened")[opened]
	}
	const queued, shedMsg = "method=resumeSession bytes=", "closing connection: answer budget exhausted"
	done := logCount(p, queued)
	shed := func(i int) bool { return slices.Contains(logConns(p, shedMsg), ids[i]) }
	for id := range requests {
		for i, ws := range conns {
			if shed(i) {
				continue
			}
			req := mustReq(uint64(id+1), api.ResumeSession.Name, map[string]any{"session_id": "big"})
			if err := ws.Write(ctx, websocket.MessageBinary, req); err != nil {
				t.Fatalf("client %d, request %d: %v", i, id+1, err)
			}
			done++
			waitLog(t, p, queued, done)
		}
	}
	peak := procMemKiB(t, pid, "VmHWM") << 10
	rise := peak - base
	t.Logf("peak RSS %d MiB, %d MiB over the %d MiB before (budget %d MiB, slack %d MiB)", peak>>20, rise>>20, base>>20, budget>>20, slack>>20)
	if rise > budget+slack {
		t.Fatalf("peak RSS rose by %d MiB, over the budget of %d MiB plus a slack of %d MiB", rise>>20, budget>>20, slack>>20)
	}

	// Each client now reads: the answers written before it was shed, then
	// the close status.
	for i, ws := range conns {
		if !shed(i) {
			t.Fatalf("client %d (conn %s) was never shed; log:\n%s", i, ids[i], p.logText())
		}
		got := 0
		for {
			_, _, err := ws.Read(ctx)
			if err == nil {
				got++
				continue
			}
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != daemon.CloseAnswerBudget || ce.Reason != daemon.ReasonAnswerBudget {
				t.Fatalf("client %d, after %d answers: %v; want close %d %q", i, got, err, daemon.CloseAnswerBudget, daemon.ReasonAnswerBudget)
			}
			t.Logf("client %d: %d answers, then closed: %v", i, got, ce)
			break
		}
	}
	if _, err := good.Status(ctx); err != nil {
		t.Fatalf("the reading client: %v", err)
	}
	waitStatus(t, good, "the shed clients gone", func(st *api.StatusResult) bool { return st.Connections == 1 })
}

// TestAnswerBudgetConfig: a budget below the message size limit is
// refused (an answer of the largest size must fit), and the default grows
// with a larger message size limit.
func TestAnswerBudgetConfig(t *testing.T) {
	tests := []struct {
		name         string
		budget, size int64
		ok           bool
	}{
		{"default", 0, 0, true},
		{"default with a large message size", 0, 512 << 20, true},
		{"equal", 8 << 20, 8 << 20, true},
		{"below the message size", 4 << 20, 8 << 20, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := daemon.NewServer(daemon.Config{Backend: newFakeBackend(), Workspace: t.TempDir(), AnswerBudget: tc.budget, MaxMessageSize: tc.size})
			if (err == nil) != tc.ok {
				t.Fatalf("NewServer: %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, daemon.ErrBadConfig) {
					t.Fatalf("NewServer: %v, want ErrBadConfig", err)
				}
				return
			}
			srv.Close()
		})
	}
}

// rawUpgrade connects to sock and upgrades by hand, sending first (with
// the upgrade request, before the 101) the bytes early. It returns the
// socket and a reader positioned after the 101's headers.
func rawUpgrade(t *testing.T, sock string, early []byte) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req := "GET / HTTP/1.1\r\nHost: cairnd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + protocol.Subprotocol + "\r\n\r\n"
	if _, err := c.Write(append([]byte(req), early...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 101") {
		t.Fatalf("upgrade: %q %v", status, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			return c, br
		}
	}
}

// readClose reads server frames from br until a close frame, and returns
// its status and reason; then it expects the end of the stream.
func readClose(t *testing.T, c net.Conn, br *bufio.Reader) (websocket.StatusCode, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("no close frame: %v", err)
		}
		n := int(h[1] & 0x7f)
		switch n {
		case 126:
			var x [2]byte
			if _, err := io.ReadFull(br, x[:]); err != nil {
				t.Fatal(err)
			}
			n = int(binary.BigEndian.Uint16(x[:]))
		case 127:
			var x [8]byte
			if _, err := io.ReadFull(br, x[:]); err != nil {
				t.Fatal(err)
			}
			n = int(binary.BigEndian.Uint64(x[:]))
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			t.Fatal(err)
		}
		if h[0]&0x0f != 0x8 || n < 2 {
			continue
		}
		if _, err := br.ReadByte(); err != io.EOF && !errors.Is(err, net.ErrClosed) && !strings.Contains(fmt.Sprint(err), "reset") {
			t.Fatalf("after the close frame: %v, want the end of the stream", err)
		}
		return websocket.StatusCode(binary.BigEndian.Uint16(payload)), string(payload[2:])
	}
}

// TestE2EFrameDeadline: a client that sends part of a frame and stalls is
// closed with the documented status once the frame deadline passes, wherever
// in the frame it stalls; clients idle between frames, for longer than the
// deadline, stay connected.
func TestE2EFrameDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := startCairnd(t, workspace(t), "--frame-timeout", timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Idle clients: one that never sent a frame, one that stops after a
	// complete request.
	rawUpgrade(t, p.sock, nil)
	talked, _, err := rawDial(ctx, p.sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer talked.CloseNow()
	if err := talked.Write(ctx, websocket.MessageBinary, mustReq(1, api.Status.Name, nil)); err != nil {
		t.Fatal(err)
	}
	if r := answer(t, ctx, talked); r.Error != nil {
		t.Fatalf("status: %+v", r.Error)
	}

	// A masked binary frame announcing 100 bytes of payload.
	header := []byte{0x82, 0x80 | 100, 1, 2, 3, 4}
	stalls := []struct {
		name         string
		early, after []byte
	}{
		{"one header byte", nil, header[:1]},
		{"header without mask key", nil, header[:3]},
		{"header and part of the payload", nil, append(append([]byte{}, header...), make([]byte, 40)...)},
		{"a complete frame, then one byte", nil, append(append(append([]byte{}, header...), make([]byte, 100)...), 0x82)},
		{"half a header sent before the 101", header[:1], nil},
	}
	for _, tc := range stalls {
		t.Run(tc.name, func(t *testing.T) {
			c, br := rawUpgrade(t, p.sock, tc.early)
			if len(tc.after) > 0 {
				if _, err := c.Write(tc.after); err != nil {
					t.Fatal(err)
				}
			}
			code, reason := readClose(t, c, br)
			if code != daemon.CloseFrameTimeout || reason != daemon.ReasonFrameTimeout {
				t.Fatalf("closed with %d %q, want %d %q", code, reason, daemon.CloseFrameTimeout, daemon.ReasonFrameTimeout)
			}
		})
	}
	if n := strings.Count(p.logText(), "closing connection: a frame stalled"); n != len(stalls) {
		t.Fatalf("%d stalls logged, want %d; log:\n%s", n, len(stalls), p.logText())
	}

	// The idle clients have now been idle for longer than the deadline
	// (each stall above lasted that long); both still work.
	time.Sleep(2 * timeout)
	if err := talked.Write(ctx, websocket.MessageBinary, mustReq(2, api.Status.Name, nil)); err != nil {
		t.Fatal(err)
	}
	if r := answer(t, ctx, talked); r.Error != nil {
		t.Fatalf("status after idling: %+v", r.Error)
	}
	st := p.dial(t)
	waitStatus(t, st, "the idle clients still connected", func(s *api.StatusResult) bool { return s.Connections == 3 })
}
