package daemon

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
)

// wsFrame encodes one WebSocket frame with a payload of n bytes (RFC 6455
// §5.2), masked or not.
func wsFrame(n int, masked bool) []byte {
	b := []byte{0x82}
	var m byte
	if masked {
		m = 0x80
	}
	switch {
	case n < 126:
		b = append(b, m|byte(n))
	case n <= 0xffff:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if masked {
		b = append(b, 1, 2, 3, 4)
	}
	for i := range n {
		b = append(b, byte(i)|0x80) // payload bytes that look like headers
	}
	return b
}

// opFrame is a masked frame of n payload bytes with opcode op, final or not.
func opFrame(fin bool, op byte, n int) []byte {
	b := wsFrame(n, true)
	b[0] = op
	if fin {
		b[0] |= 0x80
	}
	return b
}

// TestFrameCursor: the cursor is outside a frame exactly at the frame
// boundaries of a stream, whatever the frame lengths (every length
// encoding, masked or not) and however the stream is split into reads.
func TestFrameCursor(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 127, 200, 0xffff, 0x10000, 70000}
	var stream []byte
	boundary := map[int]bool{0: true}
	for _, masked := range []bool{true, false} {
		for _, n := range sizes {
			stream = append(stream, wsFrame(n, masked)...)
			boundary[len(stream)] = true
		}
	}
	t.Run("byte by byte", func(t *testing.T) {
		var c frameCursor
		for i := range stream {
			c.advance(stream[i : i+1])
			if c.inFrame() == boundary[i+1] {
				t.Fatalf("after %d bytes: inFrame %v, boundary %v", i+1, c.inFrame(), boundary[i+1])
			}
		}
	})
	t.Run("random reads", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for range 200 {
			var c frameCursor
			for at := 0; at < len(stream); {
				n := min(1+r.IntN(20000), len(stream)-at)
				c.advance(stream[at : at+n])
				at += n
				if c.inFrame() == boundary[at] {
					t.Fatalf("after %d bytes: inFrame %v, boundary %v", at, c.inFrame(), boundary[at])
				}
			}
		}
	})
}

// TestFrameCursorLimit: with a limit, the cursor stops just after the
// header that takes a data message over it, wherever the reads split the
// stream: a single frame or the frames of a fragmented message, with a
// control frame between them not counted; a message of exactly the limit
// passes.
func TestFrameCursorLimit(t *testing.T) {
	const limit = 1000
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	hdr := func(b []byte, n int) int { return len(b) - n } // where a frame's header ends
	over1 := opFrame(true, 2, limit+1)
	tests := []struct {
		name   string
		stream []byte
		stop   int // bytes taken; -1: all, never over
	}{
		{"exactly the limit", opFrame(true, 2, limit), -1},
		{"one byte over", over1, hdr(over1, limit+1)},
		{"two messages of the limit", cat(opFrame(true, 2, limit), opFrame(true, 1, limit)), -1},
		{"fragments of the limit", cat(opFrame(false, 2, 600), opFrame(true, 9, 100), opFrame(true, 0, 400)), -1},
		{"fragments over the limit", cat(opFrame(false, 2, 600), opFrame(true, 9, 100), opFrame(true, 0, 401)), len(cat(opFrame(false, 2, 600), opFrame(true, 9, 100))) + hdr(opFrame(true, 0, 401), 401)},
		{"after a message of the limit", cat(opFrame(true, 2, limit), over1), len(opFrame(true, 2, limit)) + hdr(over1, limit+1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			for range 100 {
				c := frameCursor{limit: limit}
				took := 0
				for at := 0; at < len(tc.stream) && !c.over; {
					n := min(1+r.IntN(300), len(tc.stream)-at)
					took += c.advance(tc.stream[at : at+n])
					at += n
				}
				want := tc.stop
				if want < 0 {
					want = len(tc.stream)
				}
				if took != want || c.over != (tc.stop >= 0) {
					t.Fatalf("took %d bytes, over %v; want %d, over %v", took, c.over, want, tc.stop >= 0)
				}
			}
		})
	}
}

// TestFrameCursorMessages: the cursor counts a data message once its last
// frame has been handed on whole, and only then: a fragmented message at
// its final fragment, a control frame between fragments never, an empty
// message at its header; byte by byte, so every split is seen.
func TestFrameCursorMessages(t *testing.T) {
	var stream []byte
	ends := map[int]bool{} // stream lengths at which a message is complete
	for _, f := range []struct {
		b   []byte
		msg bool
	}{
		{opFrame(false, 2, 300), false},
		{opFrame(true, 9, 4), false},
		{opFrame(false, 0, 0), false},
		{opFrame(true, 0, 200), true},
		{opFrame(true, 1, 0), true},
		{opFrame(true, 10, 0), false},
		{opFrame(true, 2, 70000), true},
		{opFrame(true, 8, 2), false},
	} {
		stream = append(stream, f.b...)
		ends[len(stream)] = f.msg
	}
	var c frameCursor
	var want uint64
	for i := range stream {
		c.advance(stream[i : i+1])
		if ends[i+1] {
			want++
		}
		if c.msgs != want {
			t.Fatalf("after %d bytes: %d messages, want %d", i+1, c.msgs, want)
		}
	}
}

// TestBiggerReader: the reader the WebSocket library gets after the hijack
// has hijackReadBuf bytes of buffer and yields the bytes the HTTP server
// had buffered past the upgrade request before the connection's, also once
// the library has reset it the way it does (coder/websocket's accept takes
// over only what is buffered).
func TestBiggerReader(t *testing.T) {
	for _, early := range []string{"", "early bytes"} {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		old := bufio.NewReader(io.MultiReader(strings.NewReader(early), strings.NewReader("")))
		_, _ = old.Peek(len(early))
		br := biggerReader(old, a)
		if br.Size() != hijackReadBuf || br.Buffered() != len(early) {
			t.Fatalf("early %q: reader of %d bytes holding %d, want %d holding %d", early, br.Size(), br.Buffered(), hijackReadBuf, len(early))
		}
		held, _ := br.Peek(br.Buffered())
		br.Reset(io.MultiReader(bytes.NewReader(held), a))
		go func() { _, _ = b.Write([]byte("then the socket")); b.Close() }()
		got, err := io.ReadAll(br)
		if err != nil && !errors.Is(err, io.ErrClosedPipe) {
			t.Fatal(err)
		}
		if string(got) != early+"then the socket" {
			t.Fatalf("read %q, want %q", got, early+"then the socket")
		}
	}
}
