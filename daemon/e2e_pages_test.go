package daemon_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/daemon"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// pageMsg is message i of session s: its letter, size and text differ from
// its neighbours', so that bytes of another message, page or session in
// an answer do not pass for these.
func pageMsg(s, i int) session.Value {
	size := []int{40, 3 << 10, 200 << 10, 9 << 10, 700}[(s+i)%5]
	return session.Value(fmt.Sprintf(`{"s":%d,"i":%d,"t":%q}`, s, i, strings.Repeat(string(rune('a'+(s*7+i)%26)), size)))
}

// savePages saves sessions p0..p(n-1), each of msgs messages (pageMsg) in
// commits of 10.
func savePages(t *testing.T, ctx context.Context, c *protocol.Client, sessions, msgs int) {
	t.Helper()
	for s := range sessions {
		for i := 0; i < msgs; i += 10 {
			var batch []session.Value
			for j := i; j < min(i+10, msgs); j++ {
				batch = append(batch, pageMsg(s, j))
			}
			if _, err := c.Save(ctx, api.SaveRequest{SessionID: fmt.Sprintf("p%d", s), Change: &session.Change{AppendMessages: batch}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// readAllPages reads session s's messages in pages of at most maxBytes and
// checks every message against pageMsg.
func readAllPages(ctx context.Context, c *protocol.Client, s, msgs int, maxBytes int64) error {
	next := int64(0)
	for next < int64(msgs) {
		page, err := c.Messages(ctx, api.MessagesRequest{SessionID: fmt.Sprintf("p%d", s), From: next, MaxBytes: maxBytes})
		if err != nil {
			return err
		}
		if page.From != next || len(page.Messages) == 0 {
			return fmt.Errorf("session p%d: page from %d holds %d messages from %d", s, next, len(page.Messages), page.From)
		}
		for k, m := range page.Messages {
			if want := pageMsg(s, int(next)+k); string(m) != string(want) {
				return fmt.Errorf("session p%d message %d: %.50q..., want %.50q...", s, int(next)+k, m, want)
			}
		}
		next = page.Next
	}
	return nil
}

// TestE2EPagedReadsKeepTheirBytes: cairnd encodes each answer into a
// buffer it reuses once the answer is written, reads a page of messages
// into a scratch pad it reuses once the page is encoded, and the Go client
// reads each answer into a buffer it reuses once the answer is decoded. A
// buffer handed back too early would put one answer's bytes into another.
// Clients read every session in pages at once, several calls in flight on
// one client (the client's answers arrive interleaved) and on a raw
// connection sent without waiting (cairnd queues those answers for its
// writer); every message of every page must be the one saved.
func TestE2EPagedReadsKeepTheirBytes(t *testing.T) {
	const sessions, msgs = 6, 120
	p := startCairnd(t, workspace(t), "--log-level", "warn", "--no-track-files")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	savePages(t, ctx, p.dial(t), sessions, msgs)

	shared := p.dial(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4*sessions)
	for round := range 2 {
		for s := range sessions {
			wg.Add(2)
			go func() { // a client of its own
				defer wg.Done()
				c, err := protocol.Dial(ctx, p.sock, nil)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				errs <- readAllPages(ctx, c, s, msgs, int64(256<<10)<<round)
			}()
			go func() { // calls in flight together on one client
				defer wg.Done()
				errs <- readAllPages(ctx, shared, s, msgs, 300<<10)
			}()
		}
	}

	// Pipelined on one raw connection: every page of every session asked
	// for before any answer is read.
	ws, _, err := rawDial(ctx, p.sock, []string{protocol.Subprotocol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(protocol.DefaultMaxMessageSize)
	type ask struct{ s, from int }
	var asks []ask
	for s := range sessions {
		for from := 0; from < msgs; from += 15 {
			asks = append(asks, ask{s, from})
			req := mustReq(uint64(len(asks)), api.Messages.Name, api.MessagesRequest{SessionID: fmt.Sprintf("p%d", s), From: int64(from), Limit: 15})
			if err := ws.Write(ctx, websocket.MessageBinary, req); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range asks {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			ID     uint64              `cbor:"id"`
			Result api.MessagesResult  `cbor:"result"`
			Error  *protocol.WireError `cbor:"error"`
		}
		if err := protocol.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if r.Error != nil || r.ID == 0 || r.ID > uint64(len(asks)) {
			t.Fatalf("answer %d: %+v", r.ID, r.Error)
		}
		a := asks[r.ID-1]
		if len(r.Result.Messages) != 15 {
			t.Fatalf("session p%d from %d: %d messages, want 15", a.s, a.from, len(r.Result.Messages))
		}
		for k, m := range r.Result.Messages {
			if want := pageMsg(a.s, a.from+k); string(m) != string(want) {
				t.Fatalf("pipelined session p%d message %d: %.50q..., want %.50q...", a.s, a.from+k, m, want)
			}
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

// TestClientLoanKeepsPagesUntilRelease: a page read under a
// protocol.Loan holds slices of the answer as the client read it, and the
// client reads nothing into that buffer until the loan is released. Each
// round reads a page under a loan, then another page without one (read
// into whatever buffer the client has back), and only then checks the
// first page: a buffer handed back before Release would hold the second
// page's bytes by then.
func TestClientLoanKeepsPagesUntilRelease(t *testing.T) {
	const sessions, msgs = 2, 60
	p := startCairnd(t, workspace(t), "--log-level", "warn", "--no-track-files")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := p.dial(t)
	savePages(t, ctx, c, sessions, msgs)
	for round := range 200 {
		from := int64(round % 40)
		var loan protocol.Loan
		a, err := c.Messages(protocol.WithLoan(ctx, &loan), api.MessagesRequest{SessionID: "p0", From: from, Limit: 12})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Messages(ctx, api.MessagesRequest{SessionID: "p1", From: from, Limit: 12}); err != nil {
			t.Fatal(err)
		}
		for k, m := range a.Messages {
			if want := pageMsg(0, int(from)+k); string(m) != string(want) {
				t.Fatalf("round %d: message %d of the page read under the loan is now %.50q..., want %.50q...", round, int(from)+k, m, want)
			}
		}
		loan.Release()
	}
}

// TestPagedReadAllocations: a session read in pages through cairnd (in
// process, over the file store, with the Go client) allocates about what
// the client keeps, each page's messages once. Before cairnd's answers,
// its reads of a page and the client's reads went through reused buffers,
// a page of a mebibyte allocated five mebibytes or more: its log spans,
// its answer, the client's read grown from 512 bytes, and the messages
// decoded. The collector and its scavenger then cost cairnd more than the
// read itself
// (docs/PERFORMANCE.md, "Reads through cairnd without a heap that grows
// and shrinks per page").
//
// Under the race detector sync.Pool drops a quarter of what it is given,
// so the test skips there; `make test` runs it without (test-allocs).
func TestPagedReadAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops what it is given at random; make test-allocs runs this without -race")
	}
	ws := workspace(t)
	st, err := fsstore.Open(ws, fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(st, engine.Options{})
	srv, err := daemon.NewServer(daemon.Config{Backend: engine.Served{Engine: eng}, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	go func() { _ = srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		srv.Close()
		<-srv.Done()
		eng.Close()
	})
	c := dialSocket(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// 4 KiB messages, ten to a commit: a page of 1 MiB spans many frames.
	const msgs, size, page = 3000, 4 << 10, 1 << 20
	for i := 0; i < msgs; i += 10 {
		batch := make([]session.Value, 10)
		for j := range batch {
			batch[j] = session.Value(fmt.Sprintf(`{"i":%d,"t":%q}`, i+j, strings.Repeat("x", size)))
		}
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: "big", Change: &session.Change{AppendMessages: batch}}); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (pages int, bytes int64) {
		for next := int64(0); next < msgs; {
			p, err := c.Messages(ctx, api.MessagesRequest{SessionID: "big", From: next, MaxBytes: page})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range p.Messages {
				bytes += int64(len(m))
			}
			next = p.Next
			pages++
		}
		return pages, bytes
	}
	// The buffers are pooled (sync.Pool), and a pool drops what it holds
	// when the collector runs twice before it is asked again; client and
	// server share this process's heap, whose collections the client's
	// allocations set off. The collector is off for the reads, so that
	// what is measured is whether the buffers are handed back and reused.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	read() // warm: the buffers are made
	// The least of three reads: a pool keeps a buffer per P, and a read
	// whose request lands on a P that has none makes one more.
	var pages int
	var bytes, alloc int64
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		n, b := read()
		runtime.ReadMemStats(&after)
		a := int64(after.TotalAlloc - before.TotalAlloc)
		t.Logf("%d pages of %d message bytes in all: %d bytes allocated (%.2f per message byte)", n, b, a, float64(a)/float64(b))
		if alloc == 0 || a < alloc {
			pages, bytes, alloc = n, b, a
		}
	}
	// The messages decoded by the client, and slack for the rest (each
	// page's slices, the engine's and the protocol's small allocations):
	// any one page-sized buffer made per page takes it past 2.
	if limit := bytes * 3 / 2; alloc > limit {
		t.Fatalf("reading %d message bytes in %d pages allocated %d bytes, over %d", bytes, pages, alloc, limit)
	}
}
