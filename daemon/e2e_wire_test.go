package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// The tests of this file check, one by one, that the wire does what
// protocol/PROTOCOL.md says, on raw sockets to a real cairnd: nothing here
// goes through the protocol client's own checks.

// rawConn opens a protocol WebSocket to sock without the protocol client,
// closed when the test ends.
func rawConn(t *testing.T, ctx context.Context, sock string) *websocket.Conn {
	t.Helper()
	ws, _, err := rawDial(ctx, sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// roundTrip sends msg as one binary message and reads the answer.
func roundTrip(t *testing.T, ctx context.Context, ws *websocket.Conn, msg []byte) protocol.Response {
	t.Helper()
	if err := ws.Write(ctx, websocket.MessageBinary, msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	return answer(t, ctx, ws)
}

// wantError fails the test unless r is an error answer with code and id
// (nil: id null), and returns the error.
func wantError(t *testing.T, what string, r protocol.Response, code string, id *uint64) *protocol.WireError {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("%s: answered with a result (%d bytes), want error %s", what, len(r.Result), code)
	}
	if r.Error.Code != code {
		t.Fatalf("%s: code %s (%s), want %s", what, r.Error.Code, r.Error.Message, code)
	}
	switch {
	case id == nil && r.ID != nil:
		t.Fatalf("%s: answered with id %d, want null", what, *r.ID)
	case id != nil && r.ID == nil:
		t.Fatalf("%s: answered with id null (%s), want %d", what, r.Error.Message, *id)
	case id != nil && *r.ID != *id:
		t.Fatalf("%s: answered with id %d, want %d", what, *r.ID, *id)
	}
	return r.Error
}

// wantResult fails the test unless r is a success with id, and decodes its
// result into v (when not nil).
func wantResult(t *testing.T, what string, r protocol.Response, id uint64, v any) {
	t.Helper()
	if r.Error != nil || r.ID == nil || *r.ID != id {
		t.Fatalf("%s: answered %+v (error %+v), want a result for id %d", what, r, r.Error, id)
	}
	if v != nil {
		if err := protocol.Unmarshal(r.Result, v); err != nil {
			t.Fatalf("%s: result: %v", what, err)
		}
	}
}

func idp(id uint64) *uint64 { return &id }

// cborHead appends a CBOR head of major type major with argument n.
func cborHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

// cborText appends a CBOR text string holding s's bytes as they are.
func cborText(b []byte, s string) []byte { return append(cborHead(b, 3, uint64(len(s))), s...) }

// rawRequest is the request {id, method, params: {"x": x}} with x raw CBOR.
func rawRequest(id uint64, method string, x []byte) []byte {
	b := cborText([]byte{0xa3}, "id")
	b = cborHead(b, 0, id)
	b = cborText(b, "method")
	b = cborText(b, method)
	b = cborText(b, "params")
	b = cborText(append(b, 0xa1), "x")
	return append(b, x...)
}

// rawHTTP sends req, a whole HTTP/1.1 request, on a new connection to sock
// and returns the response and its body.
func rawHTTP(t *testing.T, sock, req string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("response to %q: %v", req, err)
	}
	var body []byte
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ = io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	return resp, string(body)
}

// upgradeRequest is a WebSocket upgrade request with extra header lines.
func upgradeRequest(extra string) string {
	return "GET / HTTP/1.1\r\nHost: cairnd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + protocol.Subprotocol + "\r\n" + extra + "\r\n"
}

// healthz reads /healthz over a raw connection.
func healthz(t *testing.T, sock string) (int, map[string]any) {
	t.Helper()
	resp, body := rawHTTP(t, sock, "GET /healthz HTTP/1.1\r\nHost: cairnd\r\nConnection: close\r\n\r\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("/healthz body %q: %v", body, err)
	}
	return resp.StatusCode, m
}

// TestE2EWireConnectionLimitBurst (PROTOCOL.md §1, §8): with all but a few
// connection slots taken, a burst of upgrades opens exactly the free slots
// and every other upgrade of the burst is answered 503; none is upgraded
// and then cut. Each round connects the burst's sockets and lets cairnd
// accept them, then stops cairnd (SIGSTOP) while every upgrade request is
// written and continues it, so that it finds them all ready at once. An
// upgrade checked against the limit and counted only once upgraded passes
// the limit when another one is between the two on the other core; a
// round does not always catch that, so there are several.
func TestE2EWireConnectionLimitBurst(t *testing.T) {
	const free, burst, rounds = 4, 60, 20
	p := startCairnd(t, workspace(t), "--no-track-files")
	for range protocol.MaxConnections - free {
		rawUpgrade(t, p.sock, nil)
	}
	for round := range rounds {
		opened := burstRound(t, p, burst)
		if len(opened) != free {
			t.Fatalf("round %d: the burst of %d opened %d connections, want %d (the free slots), the others refused with 503", round, burst, len(opened), free)
		}
		if code, h := healthz(t, p.sock); code != http.StatusOK || h["connections"] != float64(protocol.MaxConnections) {
			t.Fatalf("round %d: /healthz: %d %v, want %d connections", round, code, h, protocol.MaxConnections)
		}
		for _, c := range opened {
			c.Close()
		}
		waitFor(t, "the burst's connections to be counted out", func() bool {
			_, h := healthz(t, p.sock)
			return h["connections"] == float64(protocol.MaxConnections-free)
		})
	}
}

// burstRound sends a burst of n upgrades to p all at once (see
// TestE2EWireConnectionLimitBurst), checks that each is answered 101 or
// 503 and that each upgraded connection is served, and returns those.
func burstRound(t *testing.T, p *proc, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("unix", p.sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		conns[i] = c
	}
	// cairnd accepts in order: once this is answered, it has accepted
	// every socket of the burst and waits for its request.
	if code, _ := healthz(t, p.sock); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	req := []byte(upgradeRequest(""))
	resume := testkit.Stop(t, p.cmd.Process.Pid)
	for _, c := range conns {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
	}
	resume()
	statusReq := mustReq(1, api.Status.Name, nil)
	statusFrame := append([]byte{0x82, 0x80 | byte(len(statusReq)), 0, 0, 0, 0}, statusReq...)
	var opened []net.Conn
	for i, c := range conns {
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("upgrade %d of the burst: %v", i, err)
		}
		switch resp.StatusCode {
		case http.StatusServiceUnavailable:
			c.Close()
			continue
		case http.StatusSwitchingProtocols:
			opened = append(opened, c)
		default:
			t.Fatalf("upgrade %d of the burst: %s", i, resp.Status)
		}
		// Upgraded: it must be served, not closed (1013) or cut (EOF).
		if _, err := c.Write(statusFrame); err != nil {
			t.Fatalf("connection %d of the burst: %v", i, err)
		}
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("connection %d of the burst, upgraded, then: %v", i, err)
		}
		if op := h[0] & 0x0f; op != 0x2 {
			t.Fatalf("connection %d of the burst, upgraded, then answered with a frame of opcode %#x (8: close)", i, op)
		}
	}
	return opened
}

// TestE2EWireIDOnDecodeLimits (PROTOCOL.md §3, §9): a request refused for
// a decode limit or rule is answered with its id when the message is
// well-formed CBOR, and with id null when the id cannot be read.
func TestE2EWireIDOnDecodeLimits(t *testing.T) {
	p := startCairnd(t, workspace(t), "--no-track-files", "--max-message-size", "4194304")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := rawConn(t, ctx, p.sock)

	nest := append(bytes.Repeat([]byte{0x81}, protocol.MaxNestedLevels+8), 0x00)
	longArray := cborHead(nil, 4, protocol.MaxArrayElements+1)
	longArray = append(longArray, make([]byte, protocol.MaxArrayElements+1)...)
	bigMap := cborHead(nil, 5, protocol.MaxMapPairs+1)
	for i := range uint64(protocol.MaxMapPairs + 1) {
		bigMap = append(cborHead(bigMap, 0, i), 0x00)
	}
	dupKey := rawRequest(31, api.Status.Name, []byte{0x00})
	dupKey[0] = 0xa4 // a fourth pair: "method" again
	dupKey = cborText(cborText(dupKey, "method"), api.Status.Name)
	// The nesting comes before the id.
	nestFirst := cborText(append(cborText([]byte{0xa3}, "params"), 0xa1), "x")
	nestFirst = append(nestFirst, nest...)
	nestFirst = cborText(cborHead(cborText(nestFirst, "id"), 0, 22), "method")
	nestFirst = cborText(nestFirst, api.Status.Name)
	dupID := []byte{0xa3, 0x62, 'i', 'd', 0x01, 0x62, 'i', 'd', 0x02, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x66, 's', 't', 'a', 't', 'u', 's'}
	good := mustReq(40, api.Status.Name, nil)

	cases := []struct {
		name string
		msg  []byte
		id   *uint64 // nil: id null
		text string  // in the error message: the rule that refused it
	}{
		{"nesting", rawRequest(21, api.Status.Name, nest), idp(21), "nesting deeper"},
		{"nesting before the id", nestFirst, idp(22), "nesting deeper"},
		{"array size", rawRequest(23, api.Status.Name, longArray), idp(23), "array longer"},
		{"map size", rawRequest(24, api.Status.Name, bigMap), idp(24), "map larger"},
		{"duplicate key", dupKey, idp(31), "duplicate map key"},
		{"indefinite length", rawRequest(25, api.Status.Name, []byte{0x9f, 0x00, 0xff}), idp(25), "indefinite-length"},
		{"tag", rawRequest(26, api.Status.Name, []byte{0xc1, 0x00}), idp(26), "tags"},
		{"text that is not UTF-8", rawRequest(27, api.Status.Name, cborText(nil, "a\xffb")), idp(27), "UTF-8"},
		{"not CBOR", []byte{0x1c, 0x00}, nil, ""},
		{"truncated", good[:len(good)-2], nil, "truncated"},
		{"trailing bytes", append(append([]byte{}, good...), 0x00), nil, "after the message"},
		{"two ids", dupID, nil, "duplicate map key"},
		{"id not a uint", []byte{0xa2, 0x62, 'i', 'd', 0x20, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x66, 's', 't', 'a', 't', 'u', 's'}, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			we := wantError(t, tc.name, roundTrip(t, ctx, ws, tc.msg), protocol.ErrorFor(protocol.ErrBadRequest).Code, tc.id)
			if !strings.Contains(we.Message, tc.text) {
				t.Fatalf("message %q does not name the rule (%q)", we.Message, tc.text)
			}
		})
	}
	// The controls: the same requests within the limits succeed.
	wantResult(t, "nesting within the limit", roundTrip(t, ctx, ws, rawRequest(41, api.Status.Name, nest[len(nest)-20:])), 41, nil)
	wantResult(t, "a definite array", roundTrip(t, ctx, ws, rawRequest(42, api.Status.Name, []byte{0x81, 0x00})), 42, nil)
}

// TestE2EWireUTF8 (PROTOCOL.md §2): invalid UTF-8 is refused on the way in,
// in a JSON value (invalid_argument), in a text string (bad_request) and in
// an import envelope (invalid_argument), so nothing stored exports as
// anything but UTF-8.
func TestE2EWireUTF8(t *testing.T) {
	p := startCairnd(t, workspace(t), "--no-track-files")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := rawConn(t, ctx, p.sock)

	save := func(id uint64, sid string, c *session.Change) protocol.Response {
		return roundTrip(t, ctx, ws, mustReq(id, api.Save.Name, api.SaveRequest{SessionID: sid, Change: c}))
	}
	msgs := func(v ...string) *session.Change {
		c := &session.Change{}
		for _, s := range v {
			c.AppendMessages = append(c.AppendMessages, session.Value(s))
		}
		return c
	}
	wantResult(t, "a valid save", save(1, "utf8-ok", msgs(`{"t":"é ok"}`)), 1, nil)
	refused := []struct {
		name string
		msg  []byte
		code string
	}{
		{"a message with a byte that is not UTF-8", mustReq(2, api.Save.Name, api.SaveRequest{SessionID: "utf8-bad", Change: msgs(`{"t":"` + "\xff" + `"}`)}), string(session.CodeInvalidArgument)},
		{"a truncated character in a message", mustReq(3, api.Save.Name, api.SaveRequest{SessionID: "utf8-bad", Change: msgs(`{"t":"` + "\xc3" + `"}`)}), string(session.CodeInvalidArgument)},
		{"a metadata value", mustReq(4, api.Save.Name, api.SaveRequest{SessionID: "utf8-bad", Change: &session.Change{Metadata: map[string]session.Value{"k": session.Value("\"\xed\xa0\x80\"")}}}), string(session.CodeInvalidArgument)},
		{"a step result", mustReq(5, api.CompleteStep.Name, api.CompleteStepRequest{WorkflowID: "w", StepID: "s", Identity: "i", Result: session.Value("[\"\xfe\"]")}), string(session.CodeInvalidArgument)},
		{"a session id", mustReq(6, api.Save.Name, api.SaveRequest{SessionID: "utf8-\xff", Change: msgs(`{}`)}), protocol.ErrorFor(protocol.ErrBadRequest).Code},
		{"a metadata key", mustReq(7, api.Save.Name, api.SaveRequest{SessionID: "utf8-bad", Change: &session.Change{Metadata: map[string]session.Value{"k\xff": session.Value("1")}}}), protocol.ErrorFor(protocol.ErrBadRequest).Code},
	}
	for i, tc := range refused {
		wantError(t, tc.name, roundTrip(t, ctx, ws, tc.msg), tc.code, idp(uint64(i+2)))
	}

	var ex api.ExportResult
	wantResult(t, "export", roundTrip(t, ctx, ws, mustReq(20, api.Export.Name, api.SessionParams{SessionID: "utf8-ok"})), 20, &ex)
	if !utf8.Valid(ex.Envelope) || !bytes.Contains(ex.Envelope, []byte("utf8-ok")) {
		t.Fatalf("export envelope: UTF-8 %v, %q", utf8.Valid(ex.Envelope), ex.Envelope)
	}
	// The same envelope under another session id that is not UTF-8:
	// encoding/json would read it as U+FFFD and store that.
	bad := bytes.ReplaceAll(ex.Envelope, []byte(`"utf8-ok"`), []byte("\"utf8-\xff\xfe\""))
	we := wantError(t, "import of an envelope that is not UTF-8", roundTrip(t, ctx, ws, mustReq(21, api.Import.Name, api.ImportParams{Envelope: bad})), string(session.CodeInvalidArgument), idp(21))
	if !strings.Contains(we.Message, "UTF-8") {
		t.Fatalf("import refused for %q, not for its UTF-8", we.Message)
	}

	var list api.ListResult
	wantResult(t, "list", roundTrip(t, ctx, ws, mustReq(22, api.List.Name, nil)), 22, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != "utf8-ok" || list.Sessions[0].MessageCount != 1 {
		t.Fatalf("sessions after the refusals: %+v, want utf8-ok with its one message", list.Sessions)
	}
}

// TestE2EWireDeclaredSize (PROTOCOL.md §8): a message whose frame headers
// declare more than max_message_size is closed with 1009 as soon as the
// header that passes the limit is read; its payload is never sent here,
// and the frame deadline is far off, so only the declared size can close
// it. A message of exactly the limit is read.
func TestE2EWireDeclaredSize(t *testing.T) {
	const limit = 64 << 10
	p := startCairnd(t, workspace(t), "--no-track-files", "--max-message-size", "65536", "--frame-timeout", "10m")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mask := []byte{0, 0, 0, 0} // the payload goes as it is
	// header is a masked frame header: fin, opcode, declared length.
	header := func(fin bool, op byte, n uint64) []byte {
		b0 := op
		if fin {
			b0 |= 0x80
		}
		var h []byte
		switch {
		case n < 126:
			h = []byte{b0, 0x80 | byte(n)}
		case n <= 0xffff:
			h = binary.BigEndian.AppendUint16([]byte{b0, 0x80 | 126}, uint16(n))
		default:
			h = binary.BigEndian.AppendUint64([]byte{b0, 0x80 | 127}, n)
		}
		return append(h, mask...)
	}
	frame := func(fin bool, op byte, n int) []byte { return append(header(fin, op, uint64(n)), make([]byte, n)...) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name         string
		early, after []byte
	}{
		{"one frame declaring one byte over", nil, header(true, 2, limit+1)},
		{"one frame declaring a terabyte", nil, header(true, 2, 1<<40)},
		{"a text frame", nil, header(true, 1, limit+1)},
		{"fragments adding up past the limit", nil, cat(frame(false, 2, 40000), header(true, 0, limit-40000+1))},
		{"a ping between the fragments", nil, cat(frame(false, 2, 40000), frame(true, 9, 100), header(false, 0, limit-40000+1))},
		{"a request, then an oversized frame", nil, cat(header(true, 2, uint64(len(mustReq(1, "status", nil)))), mustReq(1, "status", nil), header(true, 2, limit+1))},
		{"the header sent before the 101", header(true, 2, limit+1), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, br := rawUpgrade(t, p.sock, tc.early)
			if len(tc.after) > 0 {
				if _, err := c.Write(tc.after); err != nil {
					t.Fatal(err)
				}
			}
			if code, reason := readClose(t, c, br); code != websocket.StatusMessageTooBig {
				t.Fatalf("closed with %d %q, want 1009", code, reason)
			}
		})
	}
	// Exactly the limit, in one frame and in two: read and answered.
	ws := rawConn(t, ctx, p.sock)
	r := roundTrip(t, ctx, ws, bytes.Repeat([]byte{0xff}, limit))
	wantError(t, "a message of exactly the limit", r, protocol.ErrorFor(protocol.ErrBadRequest).Code, nil)
	w, err := ws.Writer(ctx, websocket.MessageBinary)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte{0xff}, limit/2)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte{0xff}, limit/2)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wantError(t, "a message of exactly the limit in fragments", answer(t, ctx, ws), protocol.ErrorFor(protocol.ErrBadRequest).Code, nil)
}

// TestE2EWireHelloEvents (PROTOCOL.md §5, §6): hello's capabilities.events
// lists every event the daemon pushes, events.dropped included.
func TestE2EWireHelloEvents(t *testing.T) {
	p := startCairnd(t, workspace(t), "--no-track-files")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := rawConn(t, ctx, p.sock)
	var h api.HelloResult
	wantResult(t, "hello", roundTrip(t, ctx, ws, mustReq(1, api.Hello.Name, api.HelloParams{ProtocolVersion: api.ProtocolVersion})), 1, &h)
	have := map[string]bool{}
	for _, e := range h.Capabilities.Events {
		have[e] = true
	}
	for _, e := range api.Events {
		if !have[e.Name] {
			t.Errorf("capabilities.events %v lacks %s", h.Capabilities.Events, e.Name)
		}
	}
	if len(h.Capabilities.Events) != len(api.Events) {
		t.Errorf("capabilities.events %v, want the %d events of section 6", h.Capabilities.Events, len(api.Events))
	}
}

// TestE2EWireOrigin (PROTOCOL.md §1): any Origin header is refused with
// cairnd's own 403, on the upgrade and on /healthz: an empty one and one
// naming the Host, which the WebSocket library lets through by itself,
// included.
func TestE2EWireOrigin(t *testing.T) {
	p := startCairnd(t, workspace(t), "--no-track-files")
	const refusal = "cairnd: requests with an Origin header are refused"
	for _, origin := range []string{"", "http://cairnd", "null", "http://evil.example"} {
		for _, target := range []string{"upgrade", "healthz"} {
			t.Run(target+" "+origin, func(t *testing.T) {
				req := upgradeRequest("Origin: " + origin + "\r\n")
				if target == "healthz" {
					req = "GET /healthz HTTP/1.1\r\nHost: cairnd\r\nOrigin: " + origin + "\r\nConnection: close\r\n\r\n"
				}
				resp, body := rawHTTP(t, p.sock, req)
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, refusal) {
					t.Fatalf("Origin %q on %s: %d %q, want cairnd's 403 (%q)", origin, target, resp.StatusCode, body, refusal)
				}
			})
		}
	}
	// The controls, without an Origin header: 101 and 200.
	if resp, _ := rawHTTP(t, p.sock, upgradeRequest("")); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade without Origin: %d", resp.StatusCode)
	}
	if code, _ := healthz(t, p.sock); code != http.StatusOK {
		t.Fatalf("/healthz without Origin: %d", code)
	}
}

// TestE2EWireMethodNotFound (PROTOCOL.md §7): an empty method is
// method_not_found, a missing one bad_request; the echoed name is the
// method as sent, cut past 64 bytes at a character boundary and followed
// by "…".
func TestE2EWireMethodNotFound(t *testing.T) {
	p := startCairnd(t, workspace(t), "--no-track-files")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := rawConn(t, ctx, p.sock)
	cases := []struct {
		name, method, echo string
	}{
		{"empty", "", ""},
		{"64 bytes", strings.Repeat("m", 64), strings.Repeat("m", 64)},
		{"65 bytes", strings.Repeat("m", 65), strings.Repeat("m", 64) + "…"},
		{"a character across byte 64", strings.Repeat("m", 63) + "é", strings.Repeat("m", 63) + "…"},
		{"two-byte characters", strings.Repeat("é", 100), strings.Repeat("é", 32) + "…"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// answer decodes strictly: an echo that is not UTF-8 fails there.
			we := wantError(t, tc.name, roundTrip(t, ctx, ws, mustReq(uint64(i), tc.method, nil)), string(api.CodeMethodNotFound), idp(uint64(i)))
			if got, _ := we.Data["method"].(string); got != tc.echo || we.Data["method"] == nil {
				t.Fatalf("data.method = %q, want %q", we.Data["method"], tc.echo)
			}
		})
	}
	noMethod := []byte{0xa1, 0x62, 'i', 'd', 0x09}
	wantError(t, "no method", roundTrip(t, ctx, ws, noMethod), protocol.ErrorFor(protocol.ErrBadRequest).Code, idp(9))
	spec := specText(t)
	if !strings.Contains(specRow(spec, "| `method_not_found`"), "64 bytes") {
		t.Fatalf("PROTOCOL.md §7 does not document the cut of the echoed method name")
	}
}

// specText returns protocol/PROTOCOL.md.
func specText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "protocol", "PROTOCOL.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// specRow returns the line of spec that starts with prefix.
func specRow(spec, prefix string) string {
	for line := range strings.SplitSeq(spec, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// TestE2EWireMethodErrors: runtime.restart with an empty name is
// invalid_argument, whether or not the session exists, and resumeRun onto
// a new_run_id another run holds is conflict, which PROTOCOL.md §5 lists.
func TestE2EWireMethodErrors(t *testing.T) {
	p := startCairnd(t, workspace(t), "--no-track-files")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws := rawConn(t, ctx, p.sock)
	invalid := string(session.CodeInvalidArgument)

	rt := &session.Runtime{Processes: []session.Process{{Name: "web", Command: []string{"true"}}}}
	wantResult(t, "save", roundTrip(t, ctx, ws, mustReq(1, api.Save.Name, api.SaveRequest{SessionID: "s", Change: &session.Change{Runtime: rt}})), 1, nil)
	wantError(t, "runtime.restart with an empty name", roundTrip(t, ctx, ws, mustReq(2, api.RuntimeRestart.Name, api.RuntimeRestartRequest{SessionID: "s"})), invalid, idp(2))
	wantError(t, "runtime.restart with an empty name, no such session", roundTrip(t, ctx, ws, mustReq(3, api.RuntimeRestart.Name, api.RuntimeRestartRequest{SessionID: "nope"})), invalid, idp(3))
	wantError(t, "runtime.restart of an unknown process", roundTrip(t, ctx, ws, mustReq(4, api.RuntimeRestart.Name, api.RuntimeRestartRequest{SessionID: "s", Name: "db"})), string(session.CodeNotFound), idp(4))

	wantResult(t, "beginRun r1", roundTrip(t, ctx, ws, mustReq(5, api.BeginRun.Name, api.BeginRunRequest{SessionID: "s", RunID: "r1"})), 5, nil)
	wantResult(t, "checkpoint r1", roundTrip(t, ctx, ws, mustReq(6, api.Checkpoint.Name, api.CheckpointRequest{RunID: "r1", Turn: 1, NewMessages: []session.Value{session.Value(`{"m":1}`)}})), 6, nil)
	wantResult(t, "beginRun r2", roundTrip(t, ctx, ws, mustReq(7, api.BeginRun.Name, api.BeginRunRequest{SessionID: "s", RunID: "r2"})), 7, nil)
	wantError(t, "resumeRun onto a taken id", roundTrip(t, ctx, ws, mustReq(8, api.ResumeRun.Name, api.ResumeRunRequest{RunID: "r1", NewRunID: "r2"})), string(session.CodeConflict), idp(8))
	if row := specRow(specText(t), "| `resumeRun`"); !strings.Contains(row, "`conflict`") {
		t.Fatalf("PROTOCOL.md §5 does not list conflict for resumeRun: %s", row)
	}
	if row := specRow(specText(t), "| `runtime.restart`"); !strings.Contains(row, "`name` empty") {
		t.Fatalf("PROTOCOL.md §5 does not say an empty name is invalid_argument: %s", row)
	}
}

// TestE2EWireHealthzStopping (PROTOCOL.md §1, §10): while a shutting-down
// daemon waits for a request in flight, its socket stays open: /healthz
// answers 503 "stopping", an upgrade 503, a new request unavailable; then
// the request is answered, the socket goes and cairnd exits 0. The request
// is a health check that waits for the test (within the daemon's 10 s
// shutdown bound).
func TestE2EWireHealthzStopping(t *testing.T) {
	p := startCairnd(t, workspace(t), "--no-track-files")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	hc := &session.HealthCheck{Command: []string{"sh", "-c", `touch "$0"; while [ ! -e "$1" ]; do sleep 0.01; done`, started, release}}
	rt := &session.Runtime{Processes: []session.Process{{Name: "slow", Command: []string{"true"}, HealthCheck: hc}}}
	ws := rawConn(t, ctx, p.sock)
	wantResult(t, "save", roundTrip(t, ctx, ws, mustReq(1, api.Save.Name, api.SaveRequest{SessionID: "s", Change: &session.Change{Runtime: rt}})), 1, nil)
	if err := ws.Write(ctx, websocket.MessageBinary, mustReq(2, api.RuntimeCheck.Name, api.RuntimeCheckRequest{SessionID: "s", TimeoutMS: 120000})); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(release, nil, 0o600) // whatever happens, let it finish
	waitFor(t, "the health check to start", func() bool { _, err := os.Stat(started); return err == nil })

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	waitFor(t, "/healthz to answer 503", func() bool {
		var code int
		code, h = healthz(t, p.sock)
		return code == http.StatusServiceUnavailable
	})
	if h["status"] != "stopping" || h["pid"] != float64(p.cmd.Process.Pid) {
		t.Fatalf("/healthz while stopping: %v", h)
	}
	if resp, body := rawHTTP(t, p.sock, upgradeRequest("")); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("upgrade while stopping: %d %q, want 503", resp.StatusCode, body)
	}
	wantError(t, "a request while stopping", roundTrip(t, ctx, ws, mustReq(3, api.Status.Name, nil)), string(api.CodeUnavailable), idp(3))

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var res api.RuntimeCheckResult
	wantResult(t, "the request in flight", answer(t, ctx, ws), 2, &res)
	if len(res.Processes) != 1 || res.Processes[0].State != "healthy" {
		t.Fatalf("runtime.check: %+v", res)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("cairnd exited %d; log:\n%s", code, p.logText())
	}
	if _, err := os.Stat(p.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after exit: %v", err)
	}
}

// waitFor polls ok for up to 20 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
