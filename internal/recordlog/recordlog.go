package recordlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/vfs"
)

// HeaderSize is the size of a frame's header: u32 length, u32 CRC, u8 kind.
const HeaderSize = 9

// MaxPayload bounds one record's payload, so a corrupt length is never
// trusted with a huge allocation or read.
const MaxPayload = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// kindSums holds the checksum of each kind byte alone, where a frame's
// checksum starts: a one-byte slice made for it per frame escaped to the
// heap.
var kindSums = func() (t [256]uint32) {
	for k := range t {
		t[k] = crc32.Checksum([]byte{byte(k)}, castagnoli)
	}
	return t
}()

// HasMagic reports whether data starts with magic.
func HasMagic(data []byte, magic string) bool {
	return len(data) >= len(magic) && string(data[:len(magic)]) == magic
}

// Reserve appends room for a frame header to buf and returns the new
// buffer and the frame's start. The caller appends the payload, then calls
// Seal; encoding straight into buf saves a copy of every payload.
func Reserve(buf []byte) ([]byte, int) {
	return append(buf, make([]byte, HeaderSize)...), len(buf)
}

// Seal fills in the header of the frame that starts at start and whose
// payload is the rest of buf.
func Seal(buf []byte, start int, kind byte) {
	payload := buf[start+HeaderSize:]
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
	buf[start+8] = kind
	binary.LittleEndian.PutUint32(buf[start+4:], checksum(kind, payload))
}

// Append appends one framed record to buf.
func Append(buf []byte, kind byte, payload []byte) []byte {
	buf, start := Reserve(buf)
	buf = append(buf, payload...)
	Seal(buf, start, kind)
	return buf
}

// header reads a frame's header at the start of b: payload length, CRC,
// kind.
func header(b []byte) (n int64, crc uint32, kind byte) {
	return int64(binary.LittleEndian.Uint32(b)), binary.LittleEndian.Uint32(b[4:]), b[8]
}

func checksum(kind byte, payload []byte) uint32 {
	return crc32.Update(kindSums[kind], castagnoli, payload)
}

// Record is one intact framed record found by Scan.
type Record struct {
	Kind    byte
	Payload []byte // aliases the scanned data
	Size    int64  // framed size: HeaderSize + len(Payload)
	End     int64  // offset just past the frame
}

// Scan walks the framed records of data from offset off and calls fn with
// each intact one, in order, until a frame is incomplete, fails its
// checksum or has an impossible length, or fn returns false. It returns
// the offset just past the last record fn accepted (off if none): the end
// of the valid data, as far as the framing can tell.
func Scan(data []byte, off int64, fn func(Record) bool) int64 {
	valid := off
	for int64(len(data))-off >= HeaderSize {
		n, crc, kind := header(data[off:])
		if n > MaxPayload || int64(len(data))-off-HeaderSize < n {
			break
		}
		payload := data[off+HeaderSize : off+HeaderSize+n]
		if checksum(kind, payload) != crc {
			break
		}
		off += HeaderSize + n
		if !fn(Record{Kind: kind, Payload: payload, Size: HeaderSize + n, End: off}) {
			break
		}
		valid = off
	}
	return valid
}

// Steps of an append, passed to the fault hook of File.Append so tests can
// fail or stop each one. At StepWrite and StepSync a non-nil error fails
// that step as if the system call had (a failing write leaves half its
// bytes behind); at the after- steps it fails the append like a late I/O
// error. StepRollback comes only after a failed step, before the append
// is rolled back (File.Rollback): an error there fails the rollback, as a
// failing truncate or fdatasync would, leaving the failed bytes in place.
const (
	StepWrite      = "write"
	StepAfterWrite = "after-write"
	StepSync       = "sync"
	StepAfterSync  = "after-sync"
	StepRollback   = "rollback"
)

// File is an open log: its file, the path every error names, and its
// committed size. It is not safe for concurrent use; its owner serialises
// appends (and may read concurrently with ReadAt below the committed size).
//
// The file may run on past the committed size in zeros this File wrote
// ahead (Preallocate): alloc is where those end, and slack, when set,
// counts alloc-size across the owner's logs. Appends go at the committed
// size, never at the file's end.
type File struct {
	f     vfs.File
	path  string
	size  int64
	alloc int64
	slack *atomic.Int64
	ident struct {
		once sync.Once
		fi   os.FileInfo
		err  error
	}
	named uint64 // see NamedAt
}

// setEnds sets the committed size and the end of the zeros ahead, keeping
// the slack count.
func (l *File) setEnds(size, alloc int64) {
	alloc = max(alloc, size)
	if l.slack != nil {
		l.slack.Add((alloc - size) - (l.alloc - l.size))
	}
	l.size, l.alloc = size, alloc
}

// Create makes a new log at path holding data (the magic and the first
// records) crash-safely, through atomicfile.CreateFile; fault is passed on
// to it (steps atomicfile.StepWrite ... StepAfterRename).
func Create(path string, data []byte, fault func(step string) error) (*File, error) {
	return CreateFS(vfs.OS, path, data, fault)
}

// CreateFS is Create on fsys.
func CreateFS(fsys vfs.FS, path string, data []byte, fault func(step string) error) (*File, error) {
	f, err := atomicfile.CreateFileFS(fsys, path, data, 0o600, fault)
	if err != nil {
		return nil, err
	}
	return &File{f: f, path: path, size: int64(len(data)), alloc: int64(len(data))}, nil
}

// Open opens the log at path for reading and appending and returns it with
// its whole content; the committed size is the file's size until the
// owner, having scanned the content, calls Truncate.
func Open(path string) (*File, []byte, error) {
	return OpenFS(vfs.OS, path)
}

// OpenFS is Open on fsys.
func OpenFS(fsys vfs.FS, path string) (*File, []byte, error) {
	f, err := vfs.OpenNoAtime(fsys, path, os.O_RDWR|atomicfile.OpenFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	l := &File{f: f, path: path, size: fi.Size(), alloc: fi.Size()}
	data, err := l.ReadAll()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return l, data, nil
}

// Adopt makes a File of f, already open for reading and writing under
// path, with committed size size.
func Adopt(f vfs.File, path string, size int64) *File {
	return &File{f: f, path: path, size: size, alloc: size}
}

// Stat describes the open file (not whatever its path names now).
func (l *File) Stat() (os.FileInfo, error) { return l.f.Stat() }

// Ident is the open file's first Stat, kept: what os.SameFile compares
// (device and inode) does not change while a descriptor is open, so an
// owner that checks before every append that its path still names the
// file (vfs.SameFileAt of the path) need not fstat the descriptor each time.
// Size and times in it are stale.
func (l *File) Ident() (os.FileInfo, error) {
	l.ident.once.Do(func() { l.ident.fi, l.ident.err = l.f.Stat() })
	return l.ident.fi, l.ident.err
}

// NamedAt is what the owner last passed to SetNamedAt: a mark of its
// choosing (fsstore's: dirlock's epoch) for the moment it last found that
// the log's path names this file; 0 for a File it never marked. Both are
// called under the owner's lock on the log.
func (l *File) NamedAt() uint64 { return l.named }

// SetNamedAt records mark (see NamedAt).
func (l *File) SetNamedAt(mark uint64) { l.named = mark }

// Path returns the log's path.
func (l *File) Path() string { return l.path }

// Size returns the committed size.
func (l *File) Size() int64 { return l.size }

// ReadAt reads from the log; see io.ReaderAt.
func (l *File) ReadAt(p []byte, off int64) (int, error) { return l.f.ReadAt(p, off) }

// ReadAll reads the committed content.
func (l *File) ReadAll() ([]byte, error) {
	return readFull(l.f, l.path, l.size)
}

// Reader is a read-only view of a log's committed content as it was when
// it was opened.
type Reader struct {
	f    vfs.File
	path string
	size int64
}

// ReadAll reads the content and closes the reader.
func (r *Reader) ReadAll() ([]byte, error) {
	defer r.f.Close()
	return readFull(r.f, r.path, r.size)
}

// Close closes the reader without reading.
func (r *Reader) Close() error { return r.f.Close() }

func readFull(f io.ReaderAt, path string, size int64) ([]byte, error) {
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if int64(n) != size {
		if err == nil {
			err = errors.New("short read")
		}
		return nil, fmt.Errorf("read %s: %d of %d bytes: %w", path, n, size, err)
	}
	return data, nil
}

// Truncate cuts the log to size: recovery's trim of a torn or
// uncommitted tail. It does not sync: the next Append's fdatasync makes
// the new size durable with the data after it, and until then a crash
// leaves at most the old tail, which the next recovery trims again.
func (l *File) Truncate(size int64) error {
	if err := l.f.Truncate(size); err != nil {
		return fmt.Errorf("truncate %s: %w", l.path, err)
	}
	l.setEnds(size, size)
	return nil
}

// Append writes data (whole framed records) at the committed end and makes
// it durable with one fdatasync; the committed size then includes it.
// fault, when not nil, is called at each step (StepWrite ... StepAfterSync).
//
// On failure it rolls the file back to the committed end (Rollback:
// truncated, unsynced, as Truncate); if that fails too, broken is true and
// the error says so: the owner must not append again until a Rollback has
// succeeded (or it has reopened the log).
func (l *File) Append(data []byte, fault func(step string) error) (broken bool, err error) {
	return l.AppendWith(data, fault, nil)
}

// AppendWith is Append with the fdatasync replaced by durable, when not
// nil: it is called with the offset data was written at, after the write,
// and must return only once data is durable some other way (a journal
// that holds it, say). Its error fails the append as a failed fdatasync
// does.
func (l *File) AppendWith(data []byte, fault func(step string) error, durable func(off int64) error) (broken bool, err error) {
	step := func(name string) error {
		if fault == nil {
			return nil
		}
		return fault(name)
	}
	fail := func(op string, err error) (bool, error) {
		err = fmt.Errorf("%s %s: %w", op, l.path, err)
		if terr := l.Rollback(fault); terr != nil {
			return true, fmt.Errorf("%w; rolling it back failed too (%w), so the log takes no appends until a rollback succeeds", err, terr)
		}
		return false, err
	}
	if err := step(StepWrite); err != nil {
		_, _ = l.f.WriteAt(data[:len(data)/2], l.size)
		return fail("write", err)
	}
	if err := l.write(data); err != nil {
		return fail("write", err)
	}
	if err := step(StepAfterWrite); err != nil {
		return fail("write", err)
	}
	err = step(StepSync)
	switch {
	case err != nil:
	case durable != nil:
		if err = durable(l.size); err != nil {
			return fail("make durable", err)
		}
	default:
		err = l.f.Sync()
	}
	if err != nil {
		return fail("fdatasync", err)
	}
	if err := step(StepAfterSync); err != nil {
		return fail("after fdatasync of", err)
	}
	l.setEnds(l.size+int64(len(data)), l.alloc)
	return false, nil
}

// padBlock is the file system block an append into zeros ahead is
// written out to the end of (see write).
const padBlock = 4096

// maxPadded bounds the appends write pads: it copies them.
const maxPadded = 1 << 20

// padBufs holds the buffers write copies a padded append into.
var padBufs sync.Pool

// write writes data at the committed end. When the zeros ahead run past
// data's end, it writes them too, up to the end of data's last block: the
// write then covers that block whole, so the kernel does not read it
// from the disk to merge data into the page cache, which it must when the
// block is no longer cached. Zeros ahead are written up to a megabyte
// before a commit reaches them, minutes earlier at an agent's pace, and a
// page cache that reclaims cold pages (as a VM's memory reclaim does)
// drops them meanwhile: the read, ~100 µs on the benchmark machine, would
// come before every such commit's fdatasync. The zeros are rewritten over
// zeros (only zeros follow the committed end), so a crash finds what it
// would have.
func (l *File) write(data []byte) error {
	end := l.size + int64(len(data))
	pad := (padBlock - end%padBlock) % padBlock
	if pad == 0 || end+pad > l.alloc || len(data) > maxPadded {
		_, err := l.f.WriteAt(data, l.size)
		return err
	}
	bp, _ := padBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	w := append(append((*bp)[:0], data...), zeroBlock[:pad]...)
	_, err := l.f.WriteAt(w, l.size)
	*bp = w[:0]
	padBufs.Put(bp)
	return err
}

// Sync makes the log's content durable (fdatasync): what appends made
// durable some other way (AppendWith) before that way lets go of it.
func (l *File) Sync() error {
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("fdatasync %s: %w", l.path, err)
	}
	return nil
}

// Rollback cuts the file back to the committed size (unsynced),
// dropping whatever a failed append left past it; fault is called at
// StepRollback first. An owner whose append could not be rolled back
// calls it again before its next append.
func (l *File) Rollback(fault func(step string) error) error {
	var err error
	if fault != nil {
		err = fault(StepRollback)
	}
	if err == nil {
		// Not synced, as Truncate: the next append's fdatasync makes the
		// size durable, and until then what a crash can bring back is at
		// worst a whole commit nobody was told of.
		err = l.f.Truncate(l.size)
	}
	if err != nil {
		return fmt.Errorf("truncate %s back to %d bytes: %w", l.path, l.size, err)
	}
	// The zeros ahead went too: the failed bytes may have overwritten
	// them, and only zeros may follow the committed end.
	l.setEnds(l.size, l.size)
	return nil
}

// Close trims the zeros ahead (Trim) and closes the file.
func (l *File) Close() error {
	_ = l.Trim()
	return l.f.Close()
}

// Size returns the committed size the reader reads.
func (r *Reader) Size() int64 { return r.size }

// OpenAt opens the log at path for reading and appending with committed
// size size, without reading it: a log whose content is already known
// (reopened after its descriptor was closed to bound open files).
func OpenAt(path string, size int64) (*File, error) {
	return OpenAtFS(vfs.OS, path, size)
}

// OpenAtFS is OpenAt on fsys.
func OpenAtFS(fsys vfs.FS, path string, size int64) (*File, error) {
	f, err := vfs.OpenNoAtime(fsys, path, os.O_RDWR|atomicfile.OpenFlags, 0)
	if err != nil {
		return nil, err
	}
	return &File{f: f, path: path, size: size, alloc: size}, nil
}

// ErrDamaged reports a frame that fails its checksum or its bounds where a
// valid one was expected.
var ErrDamaged = errors.New("damaged record")

// CheckFrame checks that buf, read from path at off, is exactly one frame,
// and returns its record, whose Payload shares buf: a frame read alone or
// as part of a larger span.
func CheckFrame(buf []byte, path string, off int64) (Record, error) {
	if len(buf) < HeaderSize {
		return Record{}, fmt.Errorf("%s at offset %d: %w", path, off, ErrDamaged)
	}
	n, crc, kind := header(buf)
	if n != int64(len(buf)-HeaderSize) || checksum(kind, buf[HeaderSize:]) != crc {
		return Record{}, fmt.Errorf("%s at offset %d: %w", path, off, ErrDamaged)
	}
	return Record{Kind: kind, Payload: buf[HeaderSize:], Size: int64(len(buf)), End: off + int64(len(buf))}, nil
}

// CopyFrame hands the frame of size bytes at off (below the committed
// size) to write as it is, its payload read into buf a part at a time: a
// frame of any size (an artifact's data) is copied without being held
// whole. Its checksum is checked as it streams past, so a frame that fails
// it has been written when CopyFrame reports ErrDamaged: the caller writes
// to a file it drops on error.
func CopyFrame(r io.ReaderAt, path string, off int64, size int, buf []byte, write func([]byte) error) error {
	var hdr [HeaderSize]byte
	if len(buf) == 0 {
		return errors.New("recordlog.CopyFrame: an empty buffer")
	}
	if size < HeaderSize {
		return fmt.Errorf("%s at offset %d: %w", path, off, ErrDamaged)
	}
	if n, err := r.ReadAt(hdr[:], off); n != HeaderSize {
		return fmt.Errorf("read %s at %d: %d of %d bytes: %w", path, off, n, HeaderSize, err)
	}
	n, crc, kind := header(hdr[:])
	if n != int64(size-HeaderSize) {
		return fmt.Errorf("%s at offset %d: %w", path, off, ErrDamaged)
	}
	if err := write(hdr[:]); err != nil {
		return err
	}
	sum, err := streamPayload(r, off+HeaderSize, n, kind, buf, write)
	switch {
	case err != nil:
		return fmt.Errorf("copy %s at %d: %w", path, off, err)
	case sum != crc:
		return fmt.Errorf("%s at offset %d: %w", path, off, ErrDamaged)
	}
	return nil
}

// streamPayload reads the n payload bytes at off of a frame of kind into
// buf a part at a time, hands each part to fn (when not nil) and returns
// the frame's checksum over them.
func streamPayload(r io.ReaderAt, off, n int64, kind byte, buf []byte, fn func([]byte) error) (uint32, error) {
	sum := kindSums[kind]
	for done := int64(0); done < n; {
		part := buf[:min(int64(len(buf)), n-done)]
		if got, err := r.ReadAt(part, off+done); got != len(part) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		sum = crc32.Update(sum, castagnoli, part)
		if fn != nil {
			if err := fn(part); err != nil {
				return 0, err
			}
		}
		done += int64(len(part))
	}
	return sum, nil
}

// walkChunk is how much Walk reads at a time.
const walkChunk = 1 << 20

// Walk is Scan over the bytes off..end of r, read in bounded chunks rather
// than all at once. Payloads of frames whose kind keep accepts are handed
// to fn in one buffer, grown as needed and read into again for the next
// frame: a payload is fn's only until fn returns, so walking a log of any
// size allocates about as much as its largest kept frame. The others are
// checksummed as they stream past and handed over with a nil Payload. It
// returns the end of the valid data and any read error.
func Walk(r io.ReaderAt, off, end int64, keep func(kind byte) bool, fn func(Record) bool) (int64, error) {
	valid := off
	var hdr [HeaderSize]byte
	var chunk, payload []byte
	for end-off >= HeaderSize {
		if _, err := r.ReadAt(hdr[:], off); err != nil {
			return valid, err
		}
		n, crc, kind := header(hdr[:])
		if n > MaxPayload || end-off-HeaderSize < n {
			break
		}
		rec := Record{Kind: kind, Size: HeaderSize + n, End: off + HeaderSize + n}
		if keep(kind) {
			if int64(cap(payload)) < n {
				payload = make([]byte, n)
			}
			rec.Payload = payload[:n]
			if _, err := r.ReadAt(rec.Payload, off+HeaderSize); err != nil {
				return valid, err
			}
			if checksum(kind, rec.Payload) != crc {
				break
			}
		} else {
			if chunk == nil {
				chunk = make([]byte, walkChunk)
			}
			sum, err := streamPayload(r, off+HeaderSize, n, kind, chunk, nil)
			if err != nil {
				return valid, err
			}
			if sum != crc {
				break
			}
		}
		off = rec.End
		if !fn(rec) {
			break
		}
		valid = off
	}
	return valid, nil
}

// OpenReaderAt opens the log at path for reading its first size bytes
// through a descriptor of its own.
func OpenReaderAt(path string, size int64) (*Reader, error) {
	return OpenReaderAtFS(vfs.OS, path, size)
}

// OpenReaderAtFS is OpenReaderAt on fsys.
func OpenReaderAtFS(fsys vfs.FS, path string, size int64) (*Reader, error) {
	f, err := vfs.OpenNoAtime(fsys, path, os.O_RDONLY|atomicfile.OpenFlags, 0)
	if err != nil {
		return nil, err
	}
	return &Reader{f: f, path: path, size: size}, nil
}

// ReadAt reads from the content; see os.File.ReadAt.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }

// FrameAt parses the frame at the start of b, which must hold it whole:
// ok is false unless its length fits in b and its checksum holds. Damage
// scans use it to find intact frames past a damaged one.
func FrameAt(b []byte, off int64) (rec Record, ok bool) {
	if len(b) < HeaderSize {
		return Record{}, false
	}
	n, crc, kind := header(b)
	if n > MaxPayload || int64(len(b))-HeaderSize < n {
		return Record{}, false
	}
	payload := b[HeaderSize : HeaderSize+n]
	if checksum(kind, payload) != crc {
		return Record{}, false
	}
	return Record{Kind: kind, Payload: payload, Size: HeaderSize + n, End: off + HeaderSize + n}, true
}

// Stat describes the file the reader reads.
func (r *Reader) Stat() (os.FileInfo, error) { return r.f.Stat() }
