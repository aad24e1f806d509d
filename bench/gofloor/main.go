//go:build linux

// Command gofloor is bench/agent/daemon_floor.c written the way a Go
// daemon is: the least such a daemon can cost on this machine, for
// bench/agent/daemon_floor.py's "gofloor" server. The protocol is the C
// floor's: a 4-byte little-endian length before each request's payload,
// an 8-byte answer (the offset reached) once it is durable. Each
// connection has one goroutine, reading through the runtime's poller (as
// every Go server does), which commits its own request: the first to
// find no commit in progress writes every request queued by then with
// one pwrite into preallocated, already synced zeros and makes them
// durable with one fdatasync (group commit), as cairnd's journal does.
// No parsing, no framing, no index: what is left is what the Go runtime
// adds to the system calls and wake-ups any client-daemon design pays.
//
// With -ws it speaks cairn's protocol instead (PROTOCOL.md): an HTTP
// upgrade to a WebSocket with subprotocol cairn.v1 (coder/websocket, as
// cairnd), each request a CBOR message decoded as cairnd decodes it
// (protocol.DecodeRequestBorrowed, then protocol.DecodeCheckpointParams
// for a checkpoint), answered with the CBOR cairnd writes
// (protocol.AppendResult). hello is answered with the limits; a
// checkpoint's params bytes are committed as above. Its client is the
// Python binding's own checkpoint path (cairn/_wire.py) unchanged, so the
// gap between -ws and cairnd is cairnd's engine and store, and the gap
// between -ws and the plain floor is the protocol's framing and encoding.
//
// With -cbor it takes the same CBOR requests and answers as -ws, each
// after a 4-byte little-endian length instead of in a WebSocket frame: the
// gap between -cbor and -ws is the WebSocket framing alone.
//
//	gofloor [-ws | -cbor] SOCKET DATAFILE
//
// It prints "ready" once listening and runs until killed.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/coder/websocket"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/bench/internal/zerofile"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/protocol"
)

const (
	maxRequest = 1 << 20
	dataBytes  = 64 << 20
)

// request is one connection's payload waiting for a commit.
type request struct {
	payload []byte
	done    bool
	at      int64 // the offset reached by the commit that made it durable
	err     error
}

// journal is the data file and its group commit.
type journal struct {
	f *os.File

	mu    sync.Mutex
	cond  *sync.Cond
	busy  bool       // a commit is writing or flushing
	queue []*request // waiting for the next commit
	at    int64      // where the next commit writes
	batch []byte
}

// commit makes r durable: it waits for a commit in progress to take it, or
// leads the next one itself.
func (j *journal) commit(r *request) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.queue = append(j.queue, r)
	for j.busy && !r.done {
		j.cond.Wait()
	}
	if r.done {
		return r.at, r.err
	}
	j.busy = true
	queued := j.queue
	j.queue = nil
	j.batch = j.batch[:0]
	for _, q := range queued {
		j.batch = append(j.batch, q.payload...)
	}
	if j.at+int64(len(j.batch)) > dataBytes {
		j.at = 0
	}
	off := j.at
	j.mu.Unlock()
	_, err := j.f.WriteAt(j.batch, off)
	if err == nil {
		err = vfs.Fdatasync(j.f)
	}
	j.mu.Lock()
	j.at = off + int64(len(j.batch))
	for _, q := range queued {
		q.done, q.at, q.err = true, j.at, err
	}
	j.busy = false
	j.cond.Broadcast()
	return r.at, r.err
}

// readRequest reads one request, a 4-byte little-endian length and that
// many bytes, into buf (a new one when it is too small); false at EOF, on
// a read error or past maxRequest.
func readRequest(br *bufio.Reader, buf []byte) ([]byte, bool) {
	var head [4]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return nil, false
	}
	n := binary.LittleEndian.Uint32(head[:])
	if n > maxRequest {
		return nil, false
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, false
	}
	return buf, true
}

func serve(c net.Conn, j *journal) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	var answer [8]byte
	for {
		payload, ok := readRequest(br, nil)
		if !ok {
			return
		}
		at, err := j.commit(&request{payload: payload})
		if err != nil {
			fail("commit", err)
		}
		binary.LittleEndian.PutUint64(answer[:], uint64(at))
		if _, err := c.Write(answer[:]); err != nil {
			return
		}
	}
}

// readBufs holds read buffers for reuse, as cairnd's do.
var readBufs = protocol.MessageBufs{Max: 64 << 10}

// answer handles one CBOR request of cairn's protocol (hello, or a
// checkpoint committed with j) as cairnd decodes it, and appends its
// answer, as cairnd encodes it, to out.
func answer(msg []byte, j *journal, out []byte) []byte {
	req, err := protocol.DecodeRequestBorrowed(msg)
	if err != nil || req.ID == nil {
		fail("bad request", err)
	}
	var result any
	switch req.Method {
	case "hello":
		result = api.HelloResult{ProtocolVersion: api.ProtocolVersion, Limits: api.Limits{MaxMessageSize: 64 << 20}}
	case "checkpoint":
		var p api.CheckpointRequest
		if !protocol.DecodeCheckpointParams(req.Params, &p) {
			if err := protocol.DecodeParams(req.Params, &p); err != nil {
				fail("bad checkpoint", err)
			}
		}
		at, err := j.commit(&request{payload: req.Params})
		if err != nil {
			fail("commit", err)
		}
		result = api.CheckpointResult{Generation: uint64(at), MessageCount: int64(len(p.NewMessages))}
	default:
		fail("method not served", fmt.Errorf("%q", req.Method))
	}
	out, err = protocol.AppendResult(out, *req.ID, result)
	if err != nil {
		fail("encode", err)
	}
	return out
}

// fail ends the floor: a benchmark's server has no one to answer an error to.
func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "gofloor: %s: %v\n", what, err)
	os.Exit(1)
}

// serveWS is serve for cairn's protocol: one WebSocket connection, each
// request handled on its reader goroutine, as cairnd runs a turn's.
func serveWS(w http.ResponseWriter, r *http.Request, j *journal) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(64 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var out []byte
	for {
		_, buf, err := readBufs.Read(ctx, ws)
		if err != nil {
			return
		}
		out = answer(*buf, j, out[:0])
		readBufs.Put(buf)
		if ws.Write(ctx, websocket.MessageBinary, out) != nil {
			return
		}
	}
}

// serveCBOR is serveWS with a 4-byte little-endian length before each
// request and answer instead of a WebSocket frame.
func serveCBOR(c net.Conn, j *journal) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	var msg []byte
	out := make([]byte, 4, 64)
	for {
		var ok bool
		if msg, ok = readRequest(br, msg); !ok {
			return
		}
		out = answer(msg, j, out[:4])
		binary.LittleEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func main() {
	mode := ""
	if len(os.Args) == 4 && (os.Args[1] == "-ws" || os.Args[1] == "-cbor") {
		mode = os.Args[1]
		os.Args = append(os.Args[:1], os.Args[2:]...)
	}
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gofloor [-ws | -cbor] SOCKET DATAFILE")
		os.Exit(2)
	}
	f, err := zerofile.Create(os.Args[2], dataBytes)
	if err != nil {
		fail("data file", err)
	}
	j := &journal{f: f}
	j.cond = sync.NewCond(&j.mu)

	os.Remove(os.Args[1])
	ln, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fail("listen", err)
	}
	fmt.Println("ready")
	if mode == "-ws" {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveWS(w, r, j) })
		fail("serve", http.Serve(ln, h))
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fail("accept", err)
		}
		if mode == "-cbor" {
			go serveCBOR(c, j)
		} else {
			go serve(c, j)
		}
	}
}
