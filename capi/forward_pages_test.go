//go:build cgo

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// pageMessage is message i of session s, as compact JSON: its letter and
// size differ from its neighbours', so that another message's bytes do not
// pass for it.
func pageMessage(s, i int) string {
	size := []int{30, 5 << 10, 70 << 10, 900}[(s+i)%4]
	return fmt.Sprintf(`{"s":%d,"i":%d,"t":%q}`, s, i, strings.Repeat(string(rune('a'+(s*5+i)%26)), size))
}

// daemonHandle opens a handle in daemon mode on a new workspace, with a
// cairnd built for the test, closed and stopped at cleanup.
func daemonHandle(t *testing.T) uint64 {
	t.Helper()
	h, _ := daemonHandleWith(t, "")
	return h
}

// daemonHandleWith is daemonHandle with more cairn_open options (extra:
// members of the options object, such as `"call_timeout_ms":100`), and
// also returns the daemon's pid.
func daemonHandleWith(t *testing.T, extra string) (uint64, int) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts cairnd")
	}
	dir := t.TempDir()
	daemon := filepath.Join(dir, "cairnd")
	run(t, "go", "build", "-o", daemon, "../cmd/cairnd")
	ws := filepath.Join(dir, "ws")
	run(t, "mkdir", ws)
	if extra != "" {
		extra = "," + extra
	}
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"daemon":%q%s}`, ws, daemon, extra))
	if err != nil {
		t.Fatal(err)
	}
	in, err := lookup(h)
	if err != nil {
		t.Fatal(err)
	}
	pid := in.client.Hello().PID
	t.Cleanup(func() { _ = closeHandle(h); stopProcess(t, pid) })
	return h, pid
}

// pagedDaemon opens a handle in daemon mode (a cairnd built for the test)
// on sessions p0..p(sessions-1) of msgs messages each (pageMessage), saved
// eight to a commit, and returns it.
func pagedDaemon(t *testing.T, sessions, msgs int) uint64 {
	t.Helper()
	h := daemonHandle(t)
	for s := range sessions {
		for i := 0; i < msgs; i += 8 {
			var batch []string
			for j := i; j < i+8; j++ {
				batch = append(batch, pageMessage(s, j))
			}
			req := fmt.Sprintf(`{"session_id":"p%d","change":{"append_messages":[%s]}}`, s, strings.Join(batch, ","))
			if _, err := call(h, "save", []byte(req)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

const pagedSessions, pagedMsgs = 4, 160

// TestForwardMessagesBorrowPages: in daemon mode a page of messages is
// decoded with its messages as slices of the answer the client read, not
// copies (protocol.Loan), and encoded into the caller's memory before the
// buffer is read into again. Several goroutines read sessions in pages
// through one handle at once, so the client's read buffers are handed from
// call to call; every message must be the one saved.
func TestForwardMessagesBorrowPages(t *testing.T) {
	const sessions, msgs = pagedSessions, pagedMsgs
	h := pagedDaemon(t, sessions, msgs)
	// readSession reads session s in pages of maxBytes into buf, checking
	// every message.
	readSession := func(s int, maxBytes int, buf []byte) error {
		for next := 0; next < msgs; {
			req := fmt.Sprintf(`{"session_id":"p%d","from":%d,"max_bytes":%d}`, s, next, maxBytes)
			_, n, err := callInto(h, "messages", []byte(req), buf)
			if err != nil {
				return err
			}
			var page struct {
				From     int               `json:"from"`
				Next     int               `json:"next"`
				Messages []json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(buf[:n], &page); err != nil {
				return fmt.Errorf("session p%d from %d: %w", s, next, err)
			}
			if page.From != next || page.Next <= next {
				return fmt.Errorf("session p%d: page from %d is %d..%d", s, next, page.From, page.Next)
			}
			for k, m := range page.Messages {
				if want := pageMessage(s, next+k); string(m) != want {
					return fmt.Errorf("session p%d message %d: %.40s..., want %.40s...", s, next+k, m, want)
				}
			}
			next = page.Next
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*sessions)
	for round := range 2 {
		for s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- readSession(s, (64<<10)<<round, make([]byte, 4<<20))
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestForwardMessagesPageAllocations: with the collector off, a session
// read in pages through cairnd allocates a small part of its bytes on the
// Go heap; a copy of each message (the generic decode) would be all of
// them. Under the race detector sync.Pool drops a quarter of what it is
// given, so the test skips there; `make test` runs it without (test-allocs).
func TestForwardMessagesPageAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops what it is given at random; make test-allocs runs this without -race")
	}
	h := pagedDaemon(t, 1, pagedMsgs)
	// pages reads session p0 in pages of maxBytes into buf and returns the
	// bytes of the pages.
	pages := func(maxBytes int, buf []byte) (read int) {
		for next := 0; next < pagedMsgs; {
			req := fmt.Sprintf(`{"session_id":"p0","from":%d,"max_bytes":%d}`, next, maxBytes)
			_, n, err := callInto(h, "messages", []byte(req), buf)
			if err != nil {
				t.Fatal(err)
			}
			read += n
			at := bytes.Index(buf[:n], []byte(`"next":`))
			if at < 0 {
				t.Fatalf("no next in %.200s", buf[:n])
			}
			v := 0
			for _, c := range buf[at+len(`"next":`) : n] {
				if c < '0' || c > '9' {
					break
				}
				v = v*10 + int(c-'0')
			}
			next = v
		}
		return read
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	buf := make([]byte, 4<<20)
	pages(256<<10, buf) // warm: the client's buffers are made
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	read := pages(256<<10, buf)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of pages read: %d bytes allocated (%.2f per byte)", read, alloc, float64(alloc)/float64(read))
	// Each page's slices and small allocations: a copy of each message
	// would take it past 1.
	if alloc > uint64(read)/2 {
		t.Fatalf("reading %d bytes of pages allocated %d, over half of them", read, alloc)
	}
}
