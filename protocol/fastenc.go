package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/cairn-dev/cairn/api"
)

// The checkpoint request is the one an agent sends every turn. The
// generic path encodes it by reflection into a fresh buffer, which the
// message then copies again; AppendCheckpointParams writes the same bytes
// straight into a pooled request buffer (see CallEncoded). Its output is
// byte for byte what Marshal gives for an api.CheckpointRequest (the test
// holds it to that), so the daemon cannot tell the two apart.

// AppendCheckpointParams appends the CBOR encoding of p, exactly as
// Marshal(p) would give it when p's cost is finite (always, for a request
// decoded from JSON).
func AppendCheckpointParams(b []byte, p *api.CheckpointRequest) []byte {
	n := 5
	if p.SessionID != "" {
		n++
	}
	if len(p.State) > 0 {
		n++
	}
	b = appendHead(b, 5, uint64(n))
	b = appendText(b, "run_id")
	b = appendText(b, p.RunID)
	if p.SessionID != "" {
		b = appendText(b, "session_id")
		b = appendText(b, p.SessionID)
	}
	b = appendText(b, "turn")
	b = appendInt(b, p.Turn)
	b = appendText(b, "new_messages")
	b = appendHead(b, 4, uint64(len(p.NewMessages)))
	for _, m := range p.NewMessages {
		b = appendHead(b, 2, uint64(len(m)))
		b = append(b, m...)
	}
	b = appendText(b, "usage")
	b = appendHead(b, 5, 4)
	b = appendText(b, "input_tokens")
	b = appendInt(b, p.Usage.InputTokens)
	b = appendText(b, "output_tokens")
	b = appendInt(b, p.Usage.OutputTokens)
	b = appendText(b, "total_tokens")
	b = appendInt(b, p.Usage.TotalTokens)
	b = appendText(b, "cost")
	b = append(b, 0xfb)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(p.Usage.Cost))
	b = appendText(b, "tool_calls_count")
	b = appendInt(b, p.ToolCallsCount)
	if len(p.State) > 0 {
		b = appendText(b, "state")
		b = appendHead(b, 2, uint64(len(p.State)))
		b = append(b, p.State...)
	}
	return b
}

// plainCost reports whether p's cost is finite: the encoder writes an
// infinity or a NaN (which JSON cannot carry) as a float16.
func plainCost(p *api.CheckpointRequest) bool {
	return !math.IsInf(p.Usage.Cost, 0) && !math.IsNaN(p.Usage.Cost)
}

// appendHead appends a CBOR head of major type major with argument n, in
// its shortest form (RFC 8949 §4.2.1).
func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= math.MaxUint8:
		return append(b, m|24, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

func appendInt(b []byte, n int64) []byte {
	if n < 0 {
		return appendHead(b, 1, uint64(-(n + 1)))
	}
	return appendHead(b, 0, uint64(n))
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, 3, uint64(len(s))), s...)
}

// appendRequest appends a request message whose params are the CBOR item
// params, as EncodeRequest encodes it.
func appendRequest(b []byte, id uint64, method string, params []byte) []byte {
	b = appendHead(b, 5, 3)
	b = appendText(b, "id")
	b = appendHead(b, 0, id)
	b = appendText(b, "method")
	b = appendText(b, method)
	b = appendText(b, "params")
	return append(b, params...)
}

// msgPool holds request buffers: a turn's request is several KiB, which
// would otherwise be garbage after every call.
var msgPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooled is the largest buffer kept in msgPool, so one huge request
// does not pin its memory.
const maxPooled = 1 << 20

func getBuf() *[]byte { return msgPool.Get().(*[]byte) }

func putBuf(p *[]byte) {
	if cap(*p) > maxPooled {
		return
	}
	*p = (*p)[:0]
	msgPool.Put(p)
}

// appendRequestMsg appends the request message EncodeRequest encodes: a
// checkpoint's params by AppendCheckpointParams, others by the encoder
// (straight into b, without the intermediate slice Marshal returns).
func appendRequestMsg(b []byte, id uint64, method string, params any) ([]byte, error) {
	b = appendRequest(b, id, method, nil)
	switch p := params.(type) {
	case api.CheckpointRequest:
		if plainCost(&p) {
			return AppendCheckpointParams(b, &p), nil
		}
	case *api.CheckpointRequest:
		if p != nil && plainCost(p) {
			return AppendCheckpointParams(b, p), nil
		}
	case nil:
		params = struct{}{}
	}
	w := sliceWriter{&b}
	if err := encMode.NewEncoder(w).Encode(params); err != nil {
		return b, fmt.Errorf("protocol.Marshal: %w", err)
	}
	return b, nil
}

// sliceWriter is an io.Writer appending to a slice.
type sliceWriter struct{ b *[]byte }

func (w sliceWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// appendCheckpointResult appends a checkpoint's result as the encoder
// writes api.CheckpointResult.
func appendCheckpointResult(b []byte, r *api.CheckpointResult) []byte {
	b = appendHead(b, 5, 2)
	b = appendText(b, "generation")
	b = appendHead(b, 0, r.Generation)
	b = appendText(b, "message_count")
	return appendInt(b, r.MessageCount)
}

// appendSuccess appends the success answer to request id whose result is
// the CBOR item result, as EncodeResult encodes it.
func appendSuccess(b []byte, id uint64) []byte {
	b = appendHead(b, 5, 2)
	b = appendText(b, "id")
	b = appendHead(b, 0, id)
	return appendText(b, "result")
}
