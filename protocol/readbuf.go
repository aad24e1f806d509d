package protocol

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/coder/websocket"
)

// MessageBufs keeps the buffers WebSocket messages are read into (or
// encoded into: a server's answers), for reuse: websocket.Conn.Read reads each message into a fresh slice grown
// from 512 bytes, so a page of megabytes costs its bytes copied several
// times over and a heap that grows and shrinks by them per message, which
// the runtime's collector and scavenger then work on. A buffer grown past
// Max is let go rather than kept. It must not be copied once used.
type MessageBufs struct {
	Max  int // the largest buffer kept for another message
	pool sync.Pool
}

// Read reads ws's next message into one of the buffers: the message is
// *bp, the caller's until it hands bp back (Put).
func (b *MessageBufs) Read(ctx context.Context, ws *websocket.Conn) (websocket.MessageType, *[]byte, error) {
	typ, r, err := ws.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	bp := b.Get()
	m := *bp
	for {
		if len(m) == cap(m) {
			m = append(m, 0)[:len(m)]
		}
		n, err := r.Read(m[len(m):cap(m)])
		m = m[:len(m)+n]
		if err != nil {
			*bp = m
			if errors.Is(err, io.EOF) {
				return typ, bp, nil
			}
			b.Put(bp)
			return 0, nil, err
		}
	}
}

// Get returns an empty buffer, the caller's until it hands it back (Put).
func (b *MessageBufs) Get() *[]byte {
	if bp, _ := b.pool.Get().(*[]byte); bp != nil {
		return bp
	}
	s := make([]byte, 0, 16<<10)
	return &s
}

// Put hands bp back for another message, once nothing holds its bytes
// (nil is ignored).
func (b *MessageBufs) Put(bp *[]byte) {
	if bp == nil || cap(*bp) > b.Max {
		return
	}
	*bp = (*bp)[:0]
	b.pool.Put(bp)
}
