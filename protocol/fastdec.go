package protocol

import (
	"encoding/binary"
	"math"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// DecodeCheckpointParams decodes a checkpoint request's params laid out
// exactly as AppendCheckpointParams writes them (what every client of this
// package sends): the keys in that order, definite lengths, the cost as a
// float64. It reports false, leaving p unspecified, for anything else, and
// the caller then decodes with DecodeParams, which decides and words any
// error; whatever it accepts, DecodeParams decodes to the same value (the
// test holds it to that). It saves cairnd the decoder's reflection over
// the one request an agent sends every turn. The messages and the state
// are copies, as DecodeParams makes them.
func DecodeCheckpointParams(b []byte, p *api.CheckpointRequest) bool {
	d := fastDec{b: b}
	n, ok := d.head(5)
	if !ok || n < 5 || n > 7 {
		return false
	}
	*p = api.CheckpointRequest{}
	if !d.key("run_id") {
		return false
	}
	if p.RunID, ok = d.text(); !ok {
		return false
	}
	hasSession := n == 7 || (n == 6 && d.peekKey("session_id"))
	if hasSession {
		if !d.key("session_id") {
			return false
		}
		if p.SessionID, ok = d.text(); !ok {
			return false
		}
	}
	if !d.key("turn") {
		return false
	}
	if p.Turn, ok = d.int(); !ok {
		return false
	}
	if !d.key("new_messages") {
		return false
	}
	k, ok := d.head(4)
	if !ok || k == 0 || k > MaxArrayElements || k > uint64(len(d.b)) {
		return false
	}
	p.NewMessages = make([]session.Value, k)
	for i := range p.NewMessages {
		if p.NewMessages[i], ok = d.bytes(); !ok {
			return false
		}
	}
	if !d.key("usage") {
		return false
	}
	if u, ok := d.head(5); !ok || u != 4 {
		return false
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"input_tokens", &p.Usage.InputTokens}, {"output_tokens", &p.Usage.OutputTokens}, {"total_tokens", &p.Usage.TotalTokens}} {
		if !d.key(f.name) {
			return false
		}
		if *f.v, ok = d.int(); !ok {
			return false
		}
	}
	if !d.key("cost") || d.off+9 > len(d.b) || d.b[d.off] != 0xfb {
		return false
	}
	p.Usage.Cost = math.Float64frombits(binary.BigEndian.Uint64(d.b[d.off+1:]))
	d.off += 9
	if !d.key("tool_calls_count") {
		return false
	}
	if p.ToolCallsCount, ok = d.int(); !ok {
		return false
	}
	if n == 7 || (n == 6 && !hasSession) {
		if !d.key("state") {
			return false
		}
		if p.State, ok = d.bytes(); !ok || len(p.State) == 0 {
			return false
		}
	}
	return d.off == len(d.b)
}

// fastDec reads CBOR items from b at off; every method reports false on
// anything it does not expect, and b is never read past its end.
type fastDec struct {
	b   []byte
	off int
}

// head reads a head of major type major with a definite argument.
func (d *fastDec) head(major byte) (uint64, bool) {
	if d.off >= len(d.b) || d.b[d.off]>>5 != major {
		return 0, false
	}
	ai := d.b[d.off] & 0x1f
	d.off++
	var size int
	switch {
	case ai < 24:
		return uint64(ai), true
	case ai == 24:
		size = 1
	case ai == 25:
		size = 2
	case ai == 26:
		size = 4
	case ai == 27:
		size = 8
	default:
		return 0, false
	}
	if d.off+size > len(d.b) {
		return 0, false
	}
	var v uint64
	for _, c := range d.b[d.off : d.off+size] {
		v = v<<8 | uint64(c)
	}
	d.off += size
	return v, true
}

// str reads the payload of a text (3) or byte (2) string.
func (d *fastDec) str(major byte) ([]byte, bool) {
	n, ok := d.head(major)
	if !ok || n > uint64(len(d.b)-d.off) {
		return nil, false
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s, true
}

func (d *fastDec) text() (string, bool) {
	s, ok := d.str(3)
	if !ok || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

// bytes reads a byte string into a new slice.
func (d *fastDec) bytes() ([]byte, bool) {
	s, ok := d.str(2)
	if !ok {
		return nil, false
	}
	return append([]byte{}, s...), true
}

// key reads the text string name.
func (d *fastDec) key(name string) bool {
	s, ok := d.str(3)
	return ok && string(s) == name
}

// peekKey reports whether the text string name comes next.
func (d *fastDec) peekKey(name string) bool {
	at := d.off
	ok := d.key(name)
	d.off = at
	return ok
}

// int reads an integer that fits an int64.
func (d *fastDec) int() (int64, bool) {
	if d.off >= len(d.b) {
		return 0, false
	}
	major := d.b[d.off] >> 5
	if major != 0 && major != 1 {
		return 0, false
	}
	v, ok := d.head(major)
	if !ok || v > math.MaxInt64 {
		return 0, false
	}
	if major == 1 {
		return -1 - int64(v), true
	}
	return int64(v), true
}

// decodeAnswer decodes an answer laid out as EncodeResult writes every
// success (a map of "id", then "result"): its id, and its result as the
// bytes of msg it occupies (msg is the client's own, read for this message
// alone). The result must be one well-formed item within the decoder's
// limits, which is what the generic decode of the whole message into
// inbound checks of it. It reports false for anything else (errors,
// pushes, other layouts), which the caller decodes generically. It saves a
// client the decoder's reflection, and the copy of the result, once per
// call.
func decodeAnswer(msg []byte) (id uint64, result []byte, ok bool) {
	d := fastDec{b: msg}
	if n, ok := d.head(5); !ok || n != 2 || !d.key("id") {
		return 0, nil, false
	}
	if id, ok = d.head(0); !ok || !d.key("result") {
		return 0, nil, false
	}
	result = msg[d.off:]
	if len(result) == 0 || decMode.Wellformed(result) != nil {
		return 0, nil, false
	}
	return id, result, true
}

// decodeCheckpointResult decodes a checkpoint's result laid out as
// appendCheckpointResult writes it, and reports false, leaving r
// unspecified, for anything else: the caller then decodes it with
// DecodeParams, which decides. Whatever it accepts, DecodeParams decodes
// to the same value (the test holds it to that).
func decodeCheckpointResult(b []byte, r *api.CheckpointResult) bool {
	d := fastDec{b: b}
	if n, ok := d.head(5); !ok || n != 2 || !d.key("generation") {
		return false
	}
	g, ok := d.head(0)
	if !ok || !d.key("message_count") {
		return false
	}
	m, ok := d.int()
	if !ok || d.off != len(d.b) {
		return false
	}
	*r = api.CheckpointResult{Generation: g, MessageCount: m}
	return true
}

// decodeMessagesBorrowed decodes a page of messages laid out as cairnd
// encodes api.MessagesResult (its fields in order, definite lengths, each
// message a byte string) with the messages as slices of b, not copies. It
// reports false, leaving r unspecified, for anything else: the caller then
// decodes it with DecodeParams, which decides. Whatever it accepts,
// DecodeParams decodes to the same value (the test holds it to that).
func decodeMessagesBorrowed(b []byte, r *api.MessagesResult) bool {
	d := fastDec{b: b}
	if n, ok := d.head(5); !ok || n != 7 || !d.key("session_id") {
		return false
	}
	sid, ok := d.text()
	if !ok || !d.key("generation") {
		return false
	}
	gen, ok := d.head(0)
	if !ok {
		return false
	}
	var ints [3]int64
	for i, name := range []string{"total", "from", "next"} {
		if !d.key(name) {
			return false
		}
		if ints[i], ok = d.int(); !ok {
			return false
		}
	}
	if !d.key("more") || d.off >= len(d.b) || d.b[d.off]&^1 != 0xf4 {
		return false
	}
	more := d.b[d.off] == 0xf5
	d.off++
	if !d.key("messages") {
		return false
	}
	k, ok := d.head(4)
	if !ok || k > MaxArrayElements || k > uint64(len(d.b)-d.off) {
		return false
	}
	msgs := make([]session.Value, k)
	for i := range msgs {
		m, ok := d.str(2)
		if !ok {
			return false
		}
		msgs[i] = m
	}
	if d.off != len(d.b) {
		return false
	}
	*r = api.MessagesResult{SessionID: sid, Generation: gen, Total: ints[0], From: ints[1], Next: ints[2], More: more, Messages: msgs}
	return true
}

// decodeResult decodes a call's result into v: a checkpoint's without
// reflection when it can (decodeCheckpointResult), with borrow a page of
// messages with its messages as slices of b (decodeMessagesBorrowed),
// anything else with DecodeParams, into copies. borrowed reports that v
// holds slices of b.
func decodeResult(b []byte, v any, borrow bool) (borrowed bool, err error) {
	switch r := v.(type) {
	case *api.CheckpointResult:
		if r != nil && decodeCheckpointResult(b, r) {
			return false, nil
		}
	case *api.MessagesResult:
		if borrow && r != nil && decodeMessagesBorrowed(b, r) {
			return true, nil
		}
	}
	return false, DecodeParams(b, v)
}
