package recordlog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/internal/recordlog"
)

// TestZeroFrameIsNoRecord checks that a frame of zeros never scans as a
// record, whatever the zeros' length, so zeros written ahead end a scan.
func TestZeroFrameIsNoRecord(t *testing.T) {
	for _, n := range []int{recordlog.HeaderSize, recordlog.HeaderSize + 1, 4096} {
		zeros := make([]byte, n)
		if !recordlog.ZeroFrame(zeros) {
			t.Fatalf("%d zeros: not a zero frame", n)
		}
		if end := recordlog.Scan(zeros, 0, func(recordlog.Record) bool { return true }); end != 0 {
			t.Fatalf("%d zeros scan as records up to %d", n, end)
		}
		if _, ok := recordlog.FrameAt(zeros, 0); ok {
			t.Fatalf("%d zeros parse as a frame", n)
		}
	}
	if recordlog.ZeroFrame(recordlog.Append(nil, 0, nil)) {
		t.Fatal("an empty record of kind 0 frames as zeros")
	}
}

// TestPreallocate writes zeros ahead, appends into them, and checks the
// committed size, the file's size, the slack count, what a reopen reads,
// and that Trim and Close cut the zeros off.
func TestPreallocate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	first, _ := frames(t, "one")
	l, err := recordlog.Create(path, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	var slack atomic.Int64
	l.CountSlack(&slack)
	if err := l.Preallocate(8192, nil); err != nil {
		t.Fatal(err)
	}
	size := int64(len(first))
	if l.Size() != size || l.Alloc() != size+8192 || slack.Load() != 8192 {
		t.Fatalf("after preallocating: size %d alloc %d slack %d", l.Size(), l.Alloc(), slack.Load())
	}
	rec := recordlog.Append(nil, 1, []byte("two"))
	if _, err := l.Append(rec, nil); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if l.Size() != size+int64(len(rec)) || fi.Size() != size+8192 || slack.Load() != 8192-int64(len(rec)) {
		t.Fatalf("after an append into the zeros: size %d, file %d, slack %d", l.Size(), fi.Size(), slack.Load())
	}
	data, _ := os.ReadFile(path)
	if !bytes.Equal(data[size:l.Size()], rec) {
		t.Fatal("the append did not land at the committed size")
	}
	if zero, err := recordlog.Zeros(bytes.NewReader(data), l.Size(), int64(len(data))); err != nil || !zero {
		t.Fatalf("the rest is not zeros: %v %v", zero, err)
	}
	if zero, _ := recordlog.Zeros(bytes.NewReader(data), size, int64(len(data))); zero {
		t.Fatal("Zeros reports zeros over a record")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != size+int64(len(rec)) || slack.Load() != 0 {
		t.Fatalf("after Close: file %d bytes, slack %d; want %d, 0", fi.Size(), slack.Load(), size+int64(len(rec)))
	}
}

// TestPreallocateAllocatesNothing checks that the zeros written ahead come
// from a shared block, not a buffer made per call.
func TestPreallocateAllocatesNothing(t *testing.T) {
	first, _ := frames(t, "one")
	l, err := recordlog.Create(filepath.Join(t.TempDir(), "log"), first, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if n := testing.AllocsPerRun(5, func() {
		if err := l.Preallocate(64<<10, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Preallocate allocated %v times a call", n)
	}
}
