package recordlog

import (
	"fmt"
	"sync/atomic"
)

// ZeroFrame reports whether b, the bytes at a frame boundary, start with
// an all-zero header: where zeros written ahead (File.Preallocate) begin.
// No record frames that way: a zero length and kind give the checksum of
// the one byte 0, which is not 0, so Scan and Walk stop there as at any
// frame that fails its checksum; the owner tells such a clean end from a
// torn one with Zeros.
func ZeroFrame(b []byte) bool {
	if len(b) < HeaderSize {
		return false
	}
	for _, c := range b[:HeaderSize] {
		if c != 0 {
			return false
		}
	}
	return true
}

// zeroChunk is how much Zeros reads, and Preallocate writes, at a time.
const zeroChunk = 256 << 10

// zeroBlock is what WriteZeros writes from: only ever read, so every file
// shares it, and writing zeros allocates nothing.
var zeroBlock [zeroChunk]byte

// Zeros reports whether the bytes off..end of r are all zero: a log that
// ends there in zeros ends cleanly at off, however the zeros came (written
// ahead and not yet overwritten, or a size extended by a crash before the
// data reached the disk). It reads a bounded amount at a time.
func Zeros(r interface {
	ReadAt([]byte, int64) (int, error)
}, off, end int64) (bool, error) {
	buf := make([]byte, min(zeroChunk, max(end-off, 0)))
	for off < end {
		b := buf[:min(int64(len(buf)), end-off)]
		if n, err := r.ReadAt(b, off); n < len(b) {
			return false, fmt.Errorf("read at %d: %w", off, err)
		}
		for _, c := range b {
			if c != 0 {
				return false, nil
			}
		}
		off += int64(len(b))
	}
	return true, nil
}

// WriteZeros writes zeros over off..end with write (a file's WriteAt), a
// bounded block at a time from one block of zeros every writer shares, so
// it allocates nothing. stop, when not nil, is asked before each block;
// its error ends the writing.
func WriteZeros(write func(p []byte, off int64) error, off, end int64, stop func() error) error {
	for off < end {
		if stop != nil {
			if err := stop(); err != nil {
				return err
			}
		}
		b := zeroBlock[:min(zeroChunk, end-off)]
		if err := write(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}

// Alloc returns where the file's zeros ahead end: the committed size
// when there are none.
func (l *File) Alloc() int64 { return l.alloc }

// CountSlack makes l keep its zeros ahead (Alloc - Size) counted in n,
// which its owner shares among its logs to bound them all.
func (l *File) CountSlack(n *atomic.Int64) {
	if l.slack == n {
		return
	}
	if l.slack != nil {
		l.slack.Add(-(l.alloc - l.size))
	}
	l.slack = n
	if n != nil {
		n.Add(l.alloc - l.size)
	}
}

// Preallocate writes n zero bytes past the end of the zeros already ahead
// and fdatasyncs them (vfs.File.Presync), so that the appends that
// overwrite them change neither the file's size nor its block map, and
// their fdatasync flushes data without a journal commit. fault, when not
// nil, is called at each step (StepWrite ... StepAfterSync), as for
// Append. No guarantee needs these zeros durable: a log that ends in zeros
// ends cleanly where they start (Zeros), whatever part of them a crash
// keeps. On failure the file is cut back to its old end (not synced, as
// Rollback).
func (l *File) Preallocate(n int64, fault func(step string) error) error {
	step := func(name string) error {
		if fault == nil {
			return nil
		}
		return fault(name)
	}
	from := l.alloc
	fail := func(op string, err error) error {
		err = fmt.Errorf("%s %s ahead of byte %d: %w", op, l.path, from, err)
		if terr := l.f.Truncate(from); terr != nil {
			return fmt.Errorf("%w; cutting it back failed too: %w", err, terr)
		}
		return err
	}
	if err := step(StepWrite); err != nil {
		return fail("write zeros to", err)
	}
	write := func(p []byte, off int64) error {
		_, err := l.f.WriteAt(p, off)
		return err
	}
	if err := WriteZeros(write, from, from+n, nil); err != nil {
		return fail("write zeros to", err)
	}
	if err := step(StepAfterWrite); err != nil {
		return fail("write zeros to", err)
	}
	err := step(StepSync)
	if err == nil {
		err = l.f.Presync()
	}
	if err != nil {
		return fail("fdatasync zeros of", err)
	}
	if err := step(StepAfterSync); err != nil {
		return fail("after fdatasync of zeros of", err)
	}
	l.setEnds(l.size, from+n)
	return nil
}

// Trim cuts the file back to its committed size, dropping the zeros ahead
// (not synced: zeros a crash brings back are a clean end again).
func (l *File) Trim() error {
	if l.alloc <= l.size {
		return nil
	}
	if err := l.f.Truncate(l.size); err != nil {
		return fmt.Errorf("truncate %s to its committed %d bytes: %w", l.path, l.size, err)
	}
	l.setEnds(l.size, l.size)
	return nil
}
