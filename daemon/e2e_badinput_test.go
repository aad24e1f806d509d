package daemon_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
)

// rawDial opens a WebSocket to sock with the given subprotocols and
// headers, bypassing the protocol client.
func rawDial(ctx context.Context, sock string, subprotocols []string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	return websocket.Dial(ctx, "ws://cairnd/", &websocket.DialOptions{HTTPClient: hc, Subprotocols: subprotocols, HTTPHeader: hdr})
}

// answer reads one message and decodes it as a response.
func answer(t *testing.T, ctx context.Context, ws *websocket.Conn) protocol.Response {
	t.Helper()
	typ, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	if typ != websocket.MessageBinary {
		t.Fatalf("answer is a %v message", typ)
	}
	var r protocol.Response
	if err := protocol.Unmarshal(b, &r); err != nil {
		t.Fatalf("answer is not a response: %v", err)
	}
	return r
}

// TestE2EBadInput sends hostile messages on raw connections and checks each
// documented outcome (PROTOCOL.md §9), while a well-behaved client keeps
// working without a single error.
func TestE2EBadInput(t *testing.T) {
	const limit = 64 << 10
	p := startCairnd(t, workspace(t), "--max-message-size", "65536")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The well-behaved client, running throughout.
	good := p.dial(t)
	stop := make(chan struct{})
	var goodCalls atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := good.Save(ctx, msg("good")); err != nil {
				t.Errorf("good client: %v", err)
				return
			}
			goodCalls.Add(1)
		}
	})

	ws, _, err := rawDial(ctx, p.sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	statusReq, _ := protocol.EncodeRequest(9, api.Status.Name, api.Empty{})
	// Every case below is answered with an error; the same connection then
	// still answers a good request.
	cases := []struct {
		name   string
		typ    websocket.MessageType
		msg    []byte
		code   string
		withID bool
		text   string // in the error message: what refused it
	}{
		{"garbage", websocket.MessageBinary, []byte("GET / HTTP/1.1\r\n\r\n\x00\xff"), "bad_request", false, ""},
		{"truncated CBOR", websocket.MessageBinary, statusReq[:len(statusReq)-3], "bad_request", false, "truncated"},
		{"deep nesting", websocket.MessageBinary, deepRequest(200), "bad_request", true, "nesting deeper"},
		{"unknown method", websocket.MessageBinary, mustReq(7, "dropTables", nil), "method_not_found", true, ""},
		{"wrong param types", websocket.MessageBinary, mustReq(8, api.Save.Name, map[string]any{"session_id": 12, "change": "x"}), "bad_request", true, "wrong type"},
		{"text message", websocket.MessageText, []byte(`{"id":1,"method":"status"}`), "bad_request", false, ""},
		{"empty message", websocket.MessageBinary, nil, "bad_request", false, ""},
	}
	for _, tc := range cases {
		if err := ws.Write(ctx, tc.typ, tc.msg); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		r := answer(t, ctx, ws)
		if r.Error == nil || r.Error.Code != tc.code || (r.ID != nil) != tc.withID || !strings.Contains(r.Error.Message, tc.text) {
			t.Fatalf("%s: answer %+v (error %+v), want code %s (%q), id present %v", tc.name, r, r.Error, tc.code, tc.text, tc.withID)
		}
		if err := ws.Write(ctx, websocket.MessageBinary, statusReq); err != nil {
			t.Fatalf("%s: connection unusable: %v", tc.name, err)
		}
		if r := answer(t, ctx, ws); r.Error != nil || r.ID == nil || *r.ID != 9 {
			t.Fatalf("%s: status afterwards: %+v", tc.name, r)
		}
	}

	// The deep request within the nesting limit is served: nothing else
	// in it was refused above.
	if err := ws.Write(ctx, websocket.MessageBinary, deepRequest(10)); err != nil {
		t.Fatal(err)
	}
	if r := answer(t, ctx, ws); r.Error != nil || r.ID == nil || *r.ID != 3 {
		t.Fatalf("deep request within the limit: %+v (error %+v)", r, r.Error)
	}

	// Over the limit: the connection is closed with 1009, as soon as the
	// frame header is read (TestE2EWireDeclaredSize tries more). The frame
	// goes in one write, raw: cairnd may close the socket before the
	// WebSocket library would have written all of it.
	oc, obr := rawUpgrade(t, p.sock, nil)
	over := binary.BigEndian.AppendUint64([]byte{0x82, 0x80 | 127}, limit+1024)
	over = append(append(over, 0, 0, 0, 0), make([]byte, limit+1024)...)
	_, _ = oc.Write(over)
	if code, reason := readClose(t, oc, obr); code != websocket.StatusMessageTooBig {
		t.Fatalf("over-limit message: closed with %d %q, want 1009", code, reason)
	}

	// Wrong or missing subprotocol: HTTP 400, no connection.
	for _, sp := range [][]string{nil, {"cairn.v2"}} {
		_, resp, err := rawDial(ctx, p.sock, sp, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("subprotocol %v: %v %v", sp, resp, err)
		}
	}
	// An Origin header naming the Host, which the WebSocket library would
	// let through: cairnd's own 403 (TestE2EWireOrigin tries more).
	_, resp, err := rawDial(ctx, p.sock, []string{protocol.Subprotocol}, http.Header{"Origin": {"http://cairnd"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("origin: %v %v", resp, err)
	}
	if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "cairnd: requests with an Origin header are refused") {
		t.Fatalf("origin: refused with %q, not by cairnd", body)
	}
	// Not HTTP at all: the connection is closed, the daemon goes on.
	nc, err := net.Dial("unix", p.sock)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("\x00\x01\x02garbage\r\n\r\n"))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, nc)
	nc.Close()

	// /healthz.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return net.Dial("unix", p.sock)
	}}}
	hr, err := hc.Get("http://cairnd/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]any
	json.NewDecoder(hr.Body).Decode(&health)
	hr.Body.Close()
	if hr.StatusCode != 200 || health["status"] != "ok" || health["pid"] != float64(p.cmd.Process.Pid) {
		t.Fatalf("healthz: %d %v", hr.StatusCode, health)
	}

	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if goodCalls.Load() == 0 {
		t.Fatal("the good client made no calls")
	}
	if _, err := good.Status(ctx); err != nil {
		t.Fatalf("good client after the abuse: %v", err)
	}
	if strings.Contains(p.logText(), "dropTables") {
		t.Fatalf("the log echoes message contents")
	}
}

func mustReq(id uint64, method string, params any) []byte {
	b, err := protocol.EncodeRequest(id, method, params)
	if err != nil {
		panic(err)
	}
	return b
}

// deepRequest is a status request with id 3 whose params hold, under a key
// status ignores, n nested arrays: only the nesting can refuse it.
func deepRequest(n int) []byte {
	b := []byte{0xa3, 0x62, 'i', 'd', 0x03, 0x66, 'm', 'e', 't', 'h', 'o', 'd', 0x66, 's', 't', 'a', 't', 'u', 's', 0x66, 'p', 'a', 'r', 'a', 'm', 's', 0xa1, 0x61, 'x'}
	b = append(b, bytes.Repeat([]byte{0x81}, n)...)
	return append(b, 0x00)
}
