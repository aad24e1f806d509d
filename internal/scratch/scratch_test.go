package scratch

import (
	"context"
	"testing"
	"unsafe"
)

func same(a, b []byte) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }

func TestPadLendsAgainAfterReset(t *testing.T) {
	var p Pad
	a := p.Get(100)
	b := p.Get(100)
	if len(a) != 100 || len(b) != 100 || same(a, b) {
		t.Fatalf("two lent buffers must be distinct, of the asked length")
	}
	p.Reset()
	c := p.Get(80)
	d := p.Get(100)
	if !(same(c, a) || same(c, b)) || !(same(d, a) || same(d, b)) || same(c, d) {
		t.Fatalf("after Reset the pad lends its buffers again")
	}
	if len(c) != 80 {
		t.Fatalf("len %d, want 80", len(c))
	}
}

func TestPadNeverLendsOneBufferTwice(t *testing.T) {
	var p Pad
	a := p.Get(10)
	b := p.Get(10) // a is lent: never handed out again before Reset
	if same(a, b) {
		t.Fatal("a lent buffer was lent again")
	}
}

func TestPadFollowsGrowingReads(t *testing.T) {
	var p Pad
	p.Get(10)
	p.Reset()
	big := p.Get(1000)
	p.Reset()
	if again := p.Get(1000); !same(again, big) {
		t.Fatal("the larger buffer should have replaced the small one")
	}
}

func TestPadRoundsUpSoVaryingReadsReuse(t *testing.T) {
	var p Pad
	a := p.Get(600 << 10)
	p.Reset()
	if b := p.Get(900 << 10); !same(a, b) || len(b) != 900<<10 {
		t.Fatal("a read a little larger than the last should reuse its buffer")
	}
	p.Reset()
	if c := p.Get(Max); !same(a, c) {
		t.Fatal("a buffer is made to the next power of two, up to Max")
	}
	p.Reset()
	if d := p.Get(3); len(d) != 3 || cap(d) < 3 {
		t.Fatal("a small read gets what it asked for")
	}
}

func TestPadBounds(t *testing.T) {
	var p Pad
	for range maxBufs + 2 {
		p.Get(16)
	}
	if n := len(p.lent) + len(p.free); n != maxBufs {
		t.Fatalf("pad keeps %d buffers, want %d", n, maxBufs)
	}
	p.Reset()
	huge := p.Get(Max + 1)
	p.Reset()
	if again := p.Get(Max + 1); same(again, huge) {
		t.Fatal("a buffer over Max must not be kept")
	}
}

func TestNilPadAndContext(t *testing.T) {
	var p *Pad
	if b := p.Get(5); len(b) != 5 {
		t.Fatal("a nil pad allocates")
	}
	p.Reset()
	if From(context.Background()) != nil {
		t.Fatal("no pad in a bare context")
	}
	q := new(Pad)
	if From(With(context.Background(), q)) != q {
		t.Fatal("With/From lost the pad")
	}
}
