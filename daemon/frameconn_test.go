package daemon

import (
	"encoding/binary"
	"math/rand/v2"
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
