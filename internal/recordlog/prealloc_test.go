package recordlog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs"
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

// writesFS records the writes (offset, length) to the files it opens.
type writesFS struct {
	vfs.FS
	writes *[][2]int64
}

func (w writesFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := w.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return writesFile{f, w.writes}, nil
}

type writesFile struct {
	vfs.File
	writes *[][2]int64
}

func (f writesFile) WriteAt(p []byte, off int64) (int, error) {
	*f.writes = append(*f.writes, [2]int64{off, int64(len(p))})
	return f.File.WriteAt(p, off)
}

// TestAppendIntoZerosWritesWholeBlocks: an append that ends inside the
// zeros ahead is written out with those zeros to the end of its last 4 KiB
// block (so the kernel never reads that block from the disk to merge it),
// one that ends past them is written as it is, and the log reads back the
// same either way: its records, then zeros.
func TestAppendIntoZerosWritesWholeBlocks(t *testing.T) {
	var writes [][2]int64
	path := filepath.Join(t.TempDir(), "log")
	first, _ := frames(t, "one")
	l, err := recordlog.CreateFS(writesFS{vfs.OS, &writes}, path, first, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Zeros ahead to a block boundary, as the store writes them.
	if err := l.Preallocate(5*4096-int64(len(first)), nil); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(first)
	for i, n := range []int{10, 3000, 4096, 5000, 700, 9000} {
		rec := recordlog.Append(nil, 1, bytes.Repeat([]byte{byte('a' + i)}, n))
		off, alloc := l.Size(), l.Alloc()
		writes = writes[:0]
		if _, err := l.Append(rec, nil); err != nil {
			t.Fatal(err)
		}
		end := off + int64(len(rec))
		wantLen := int64(len(rec))
		if end <= alloc && end%4096 != 0 {
			wantLen = (end+4095)/4096*4096 - off
		}
		if len(writes) != 1 || writes[0] != [2]int64{off, wantLen} {
			t.Fatalf("append %d (%d bytes at %d, zeros ahead to %d): writes %v, want one of %d bytes at %d", i, len(rec), off, alloc, writes, wantLen, off)
		}
		want = append(want, rec...)
	}
	if writes[0][1] != int64(len(recordlog.Append(nil, 1, make([]byte, 9000)))) {
		t.Fatalf("the last append, past the zeros ahead, was padded: %v", writes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data[:len(want)], want) || !bytes.Equal(data[len(want):], make([]byte, len(data)-len(want))) {
		t.Fatalf("the log holds %d bytes, not its %d bytes of records then zeros", len(data), len(want))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func (f writesFile) Dup(name string) (vfs.File, error) {
	d, err := f.File.Dup(name)
	if err != nil {
		return nil, err
	}
	return writesFile{d, f.writes}, nil
}
