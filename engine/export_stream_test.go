package engine

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// heapSampler discards what is written and, every `every` bytes, collects
// garbage and records the live heap: what the writer's caller holds at
// that point. (A memory store's Head marshals the session once to size
// it; that garbage is the store's, and gone by the time it is sampled.)
type heapSampler struct {
	n, next, every int64
	peak           uint64
}

func (s *heapSampler) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	if s.n >= s.next {
		s.next += s.every
		// Twice: sync.Pool caches (encoding/json's buffers) survive one.
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s.peak = max(s.peak, ms.HeapAlloc)
	}
	return len(p), nil
}

// TestExportStreams exports a session of 48 MiB of messages and checks
// that the exporter never held it: the live heap while the envelope is
// written stays within a few pages of what the store itself holds.
func TestExportStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("exports 48 MiB")
	}
	ctx := context.Background()
	e := New(session.NewMemStore(), Options{})
	t.Cleanup(func() { _ = e.Close() })
	const total, size = 48 << 20, 1 << 10
	pad := strings.Repeat("x", size-40)
	msgs := make([]session.Value, 0, total/size)
	for i := range total / size {
		msgs = append(msgs, session.Value(fmt.Sprintf(`{"role":"user","n":%8d,"p":"%s"}`, i, pad)))
	}
	if _, err := e.Save(ctx, api.SaveRequest{SessionID: "big", Change: &session.Change{AppendMessages: msgs}}); err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	for _, m := range msgs {
		sum += int64(len(m))
	}
	msgs = nil
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc

	w := &heapSampler{every: 2 << 20}
	head, _, err := e.store.Head(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	err = e.writeEnvelope(ctx, head, w)
	if gen := head.Snapshot.Generation; err != nil || gen != 1 {
		t.Fatalf("writeEnvelope = %d, %v", gen, err)
	}
	if w.n < sum {
		t.Fatalf("wrote %d bytes, less than the session's %d of messages", w.n, sum)
	}
	const bound = 16 << 20
	if w.peak > base+bound {
		t.Fatalf("live heap rose by %d MiB while exporting a %d MiB session (bound %d MiB): the export held the session", (w.peak-base)>>20, total>>20, bound>>20)
	}
	t.Logf("exported %d MiB; live heap rose by at most %d KiB", w.n>>20, (w.peak-base)>>10)
}
