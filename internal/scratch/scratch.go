// Package scratch lends a read the buffers it reads into, again and again,
// when its caller is done with what the read returned before it asks
// again: the C API and cairnd encode a page of messages into their answer
// and then have no further use for the bytes the store read them from.
//
// A fresh buffer per read is fresh Go heap, and once the heap has grown
// and shrunk (a session read whole, in pages of megabytes), the runtime's
// scavenger keeps handing pages back to the kernel that the next
// allocations take again: each read then page-faults its buffer in, about
// half of it, a fault per 4 KiB. A buffer lent again is memory already
// mapped.
package scratch

import (
	"context"
	"math/bits"
)

// Max is the largest buffer a Pad lends; a larger read allocates its own,
// so a pad holds at most Max bytes per buffer for as long as it lives.
const Max = 1 << 20

// maxBufs bounds the buffers a Pad keeps (a read of a few spans).
const maxBufs = 4

// Pad holds buffers for one read at a time. Its zero value is ready; a nil
// *Pad lends nothing (Get allocates). It is not safe for concurrent use.
type Pad struct {
	free [][]byte
	lent [][]byte
}

// Get returns a buffer of n bytes, of unspecified content. It stays the
// caller's until Reset.
func (p *Pad) Get(n int) []byte {
	if p == nil || n > Max {
		return make([]byte, n)
	}
	for i, b := range p.free {
		if cap(b) >= n {
			p.free = append(p.free[:i], p.free[i+1:]...)
			p.lent = append(p.lent, b)
			return b[:n]
		}
	}
	// Made to the next power of two (up to Max), so that reads of varying
	// sizes (a page's spans) reuse it rather than replace it.
	b := make([]byte, n, min(max(1<<bits.Len(uint(n-1)), n), Max))
	switch {
	case len(p.free) > 0:
		// The free buffers are all too small: this one takes the place of
		// one of them, so that the pad follows reads that grow.
		p.free = p.free[1:]
	case len(p.lent) >= maxBufs:
		return b // not kept: every buffer is lent
	}
	p.lent = append(p.lent, b)
	return b
}

// Reset takes back every buffer Get returned since the last Reset: the
// caller must hold no slice of them any more.
func (p *Pad) Reset() {
	if p == nil {
		return
	}
	p.free = append(p.free, p.lent...)
	clear(p.lent)
	p.lent = p.lent[:0]
}

type key struct{}

// With returns ctx carrying p, for the reads made under it to read into.
func With(ctx context.Context, p *Pad) context.Context {
	return context.WithValue(ctx, key{}, p)
}

// From returns the Pad ctx carries, or nil.
func From(ctx context.Context) *Pad {
	p, _ := ctx.Value(key{}).(*Pad)
	return p
}

// Count returns how many buffers p keeps free and how many it has lent.
func (p *Pad) Count() (free, lent int) {
	if p == nil {
		return 0, 0
	}
	return len(p.free), len(p.lent)
}
