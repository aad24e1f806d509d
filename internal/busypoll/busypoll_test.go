package busypoll

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pair returns two connected Unix sockets, closed when the test ends.
func pair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := ln.Accept(); ch <- res{c, err} }()
	a, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { a.Close(); r.c.Close() })
	return a.(*net.UnixConn), r.c.(*net.UnixConn)
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

type readResult struct {
	n   int
	err error
}

func readAsync(c *Conn, buf []byte) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() { n, err := c.Read(buf); ch <- readResult{n, err} }()
	return ch
}

func always() bool { return true }

func TestWrapRefuses(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a, time.Millisecond, always) != nil {
		t.Error("Wrap accepted a net.Pipe")
	}
	u, _ := pair(t)
	if Wrap(u, 0, always) != nil {
		t.Error("Wrap accepted a zero budget")
	}
}

// TestStreamUnderKicks reads a numbered stream while another goroutine
// kicks without pause: every byte arrives, in order, and no kick surfaces
// as an error.
func TestStreamUnderKicks(t *testing.T) {
	w, r := pair(t)
	var expecting atomic.Bool
	c := Wrap(r, 200*time.Microsecond, expecting.Load)
	const n = 4000
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				expecting.Store(!expecting.Load())
				c.Kick()
			}
		}
	})
	wg.Go(func() {
		var b [8]byte
		for i := range uint64(n) {
			binary.BigEndian.PutUint64(b[:], i)
			if _, err := w.Write(b[:]); err != nil {
				t.Error(err)
				return
			}
			if i%16 == 0 {
				time.Sleep(time.Millisecond) // past the budget: the reader parks
			}
		}
	})
	var b [8]byte
	for i := range uint64(n) {
		if _, err := io.ReadFull(c, b[:]); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if got := binary.BigEndian.Uint64(b[:]); got != i {
			t.Fatalf("message %d: got %d", i, got)
		}
	}
}

// TestKickWakesParkedRead: a Read parked because no data was expected
// polls once Kick says data is expected, and returns the data.
func TestKickWakesParkedRead(t *testing.T) {
	w, r := pair(t)
	var expecting atomic.Bool
	c := Wrap(r, time.Hour, expecting.Load)
	buf := make([]byte, 16)
	done := readAsync(c, buf)
	eventually(t, "the read to park", c.parked.Load)
	if pollers.Load() != 0 {
		t.Fatal("a read polls while no data is expected")
	}
	expecting.Store(true)
	c.Kick()
	eventually(t, "the kicked read to poll", func() bool { return pollers.Load() == 1 && !c.parked.Load() })
	if _, err := w.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || string(buf[:res.n]) != "answer" {
		t.Fatalf("Read = %d, %v (%q)", res.n, res.err, buf[:res.n])
	}
	if pollers.Load() != 0 {
		t.Error("the poller slot was not released")
	}
}

// TestBudgetBoundsPolling: a Read that expects data stops polling after
// its budget, parks, and still returns the data when it comes.
func TestBudgetBoundsPolling(t *testing.T) {
	w, r := pair(t)
	c := Wrap(r, 5*time.Millisecond, always)
	buf := make([]byte, 16)
	start := time.Now()
	done := readAsync(c, buf)
	eventually(t, "the read to park after its budget", func() bool { return c.parked.Load() && pollers.Load() == 0 })
	if d := time.Since(start); d < 5*time.Millisecond {
		t.Errorf("parked after %v, before the 5ms budget", d)
	}
	if _, err := w.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || string(buf[:res.n]) != "late" {
		t.Fatalf("Read = %d, %v", res.n, res.err)
	}
}

// TestOnePollerPerProcess: of two reads expecting data, one polls and the
// other parks.
func TestOnePollerPerProcess(t *testing.T) {
	w1, r1 := pair(t)
	w2, r2 := pair(t)
	c1, c2 := Wrap(r1, time.Hour, always), Wrap(r2, time.Hour, always)
	d1, d2 := readAsync(c1, make([]byte, 4)), readAsync(c2, make([]byte, 4))
	eventually(t, "one read polling and one parked", func() bool {
		return pollers.Load() == 1 && c1.parked.Load() != c2.parked.Load()
	})
	w1.Write([]byte("x"))
	w2.Write([]byte("y"))
	for _, d := range []<-chan readResult{d1, d2} {
		if res := <-d; res.err != nil {
			t.Fatal(res.err)
		}
	}
}

// TestCloseEndsRead: Close ends a polling Read and a parked one at once.
func TestCloseEndsRead(t *testing.T) {
	for _, expect := range []func() bool{always, func() bool { return false }} {
		_, r := pair(t)
		c := Wrap(r, time.Hour, expect)
		done := readAsync(c, make([]byte, 4))
		eventually(t, "the read to start", func() bool { return pollers.Load() == 1 || c.parked.Load() })
		c.Close()
		select {
		case res := <-done:
			if !errors.Is(res.err, net.ErrClosed) {
				t.Errorf("Read after Close: %v, want net.ErrClosed", res.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end the Read")
		}
	}
}

// TestPeerCloseIsEOF: the peer's close reads as io.EOF, polling or not.
func TestPeerCloseIsEOF(t *testing.T) {
	for _, expect := range []func() bool{always, func() bool { return false }} {
		w, r := pair(t)
		c := Wrap(r, time.Hour, expect)
		done := readAsync(c, make([]byte, 4))
		w.Close()
		if res := <-done; res.err != io.EOF {
			t.Errorf("Read after the peer closed: %d, %v, want io.EOF", res.n, res.err)
		}
	}
}
