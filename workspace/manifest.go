package workspace

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/dirlock"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/session"
)

// On-disk manifests. A manifest is the map path -> (size, mtime, ctime,
// mode, flags, content hash) of every indexed non-directory path at one
// moment. Manifests are numbered 1, 2, ... per store and kept as deltas:
//
//	.cairn/manifests/
//	  LOCK                 flock'd by the one tracker that writes
//	  STORE                the store id (16 hex digits), written once
//	  base-<seq>.bin       a full manifest (seq in 16 hex digits); base 0 is
//	                       the empty manifest and has no file
//	  log-<seq>.bin        the deltas seq+1, seq+2, ... after base-<seq>
//
// A log starts with logMagic and holds records framed by internal/recordlog
// ([u32 payload length][u32 CRC-32C of kind+payload][u8 kind][payload]),
// each of kind recDelta with one delta as payload:
// [uvarint seq][uvarint op count][ops]. An op is
// [u8 opPut|opDel][uvarint path length][path] and, for a put,
// [uvarint size][varint mtime][varint ctime][uvarint mode][u8 flags][32-byte hash].
// A base file is baseMagic, [uvarint seq][uvarint count], count put ops, and
// a trailing CRC-32C of everything before it.
//
// Recording a manifest appends one frame and fdatasyncs the log: one write
// and one sync, whatever the tree's size. Open trims a torn tail. When the
// ops in the current log outnumber a quarter of the tree (and at least
// rebaseMinOps), a new base is written (temp file, fsync, rename, fsync
// directory) and a new log starts, so loading any manifest reads one base
// and a bounded log. Old bases and logs are kept: sessions refer to them.
//
// Logs written before the record-log framing was shared (magic
// legacyLogMagic, frames [u32 length of kind+payload][u32 CRC-32C][kind]
// [payload]) are rewritten in the current framing when the store opens
// (upgradeLegacyLog), since the manifests in them are what sessions refer
// to, not a cache that could be rebuilt.
const (
	logMagic       = "CAIRNML2"
	legacyLogMagic = "CAIRNML1"
	baseMagic      = "CAIRNMB1"
	recDelta       = 1
	opPut          = 1
	opDel          = 2
)

// rebaseMinOps is the fewest ops in a log (or in one delta) that start a new
// base; a variable so tests can lower it.
var rebaseMinOps = 4096

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// mrec is one manifest entry.
type mrec struct {
	size, mtime, ctime int64
	mode               fs.FileMode
	flags              uint8
	hash               [32]byte
}

func (r mrec) stat() stat { return stat{r.size, r.mtime, r.ctime, r.mode} }

// mop is one manifest delta operation.
type mop struct {
	del  bool
	path string
	rec  mrec
}

type manifestStore struct {
	dir    string
	fs     vfs.FS
	log    hclog.Logger
	lock   *dirlock.Lock
	id     string
	bases  []uint64        // sorted, always starting with 0
	cur    *recordlog.File // log-<bases[last]>
	last   uint64          // newest manifest's sequence number (0: none yet)
	curOps int             // ops in the current log
	broken error           // set when a failed append could not be rolled back
}

// openManifestStore opens the manifest store in dir, reaching its files
// through fsys (the lock excepted).
func openManifestStore(fsys vfs.FS, dir string, log hclog.Logger) (*manifestStore, error) {
	if err := ensureDirFS(fsys, dir); err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	lock, err := lockDir(dir, log)
	if err != nil {
		return nil, fmt.Errorf("manifests: %w", err)
	}
	ms := &manifestStore{dir: dir, fs: fsys, log: log, lock: lock, bases: []uint64{0}}
	if err := ms.recover(); err != nil {
		ms.close()
		return nil, fmt.Errorf("manifests: %w", err)
	}
	return ms, nil
}

func (ms *manifestStore) path(kind string, seq uint64) string {
	return filepath.Join(ms.dir, fmt.Sprintf("%s-%016x.bin", kind, seq))
}

func (ms *manifestStore) recover() error {
	names, err := ms.fs.ReadDir(ms.dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", ms.dir, err)
	}
	for _, de := range names {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, tempPrefix):
			ms.fs.Remove(filepath.Join(ms.dir, name))
		case strings.HasPrefix(name, "log-") && strings.HasSuffix(name, ".bin"):
			if err := ms.upgradeLegacyLog(filepath.Join(ms.dir, name)); err != nil {
				return err
			}
		case strings.HasPrefix(name, "base-") && strings.HasSuffix(name, ".bin"):
			if n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "base-"), ".bin"), 16, 64); err == nil && n > 0 {
				ms.bases = append(ms.bases, n)
			}
		}
	}
	slices.Sort(ms.bases)
	idPath := filepath.Join(ms.dir, "STORE")
	data, err := vfs.ReadFile(ms.fs, idPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		var b [8]byte
		_, _ = rand.Read(b[:])
		ms.id = hex.EncodeToString(b[:])
		if err := atomicfile.WriteFileFS(ms.fs, idPath, []byte(ms.id+"\n"), 0o600); err != nil {
			return session.FileError(err, idPath, "workspace: manifest store")
		}
	case err != nil:
		return fmt.Errorf("read %s: %w", idPath, err)
	default:
		ms.id = strings.TrimSpace(string(data))
		if len(ms.id) != 16 {
			return fmt.Errorf("%s: bad store id: %w", idPath, ErrCorrupt)
		}
	}
	base := ms.bases[len(ms.bases)-1]
	lp := ms.path("log", base)
	if _, err := ms.fs.Lstat(lp); errors.Is(err, os.ErrNotExist) {
		// A crash between writing a base and starting its log.
		if err := atomicfile.WriteFileFS(ms.fs, lp, []byte(logMagic), 0o600); err != nil {
			return session.FileError(err, lp, "workspace: manifest store")
		}
	}
	l, data, err := recordlog.OpenFS(ms.fs, lp)
	if err != nil {
		return fmt.Errorf("open %s: %w", lp, err)
	}
	ms.cur = l
	ms.last = base
	valid, err := scanLog(data, base, func(seq uint64, ops []mop) bool {
		ms.last = seq
		ms.curOps += len(ops)
		return true
	})
	if err != nil {
		return fmt.Errorf("%s: %w", lp, err)
	}
	if valid < len(data) {
		// The tail is kept before it is trimmed: it is most likely a torn
		// write, but if it was damage, later manifests are in it.
		q := filepath.Join(filepath.Dir(ms.dir), layout.QuarantineName)
		kept := filepath.Join(q, fmt.Sprintf("%s.%s.tail-at-%d", filepath.Base(lp), time.Now().UTC().Format("20060102T150405.000000000Z"), valid))
		if err := ensureDirFS(ms.fs, q); err != nil {
			return err
		}
		if err := atomicfile.WriteFileFS(ms.fs, kept, data[valid:], 0o600); err != nil {
			return session.FileError(err, kept, "workspace: manifest store")
		}
		ms.log.Warn("trimming a torn tail off the manifest log", "file", lp, "kept", valid, "dropped", len(data)-valid, "kept_in", kept)
		if err := l.Truncate(int64(valid)); err != nil {
			return err
		}
	}
	return nil
}

// upgradeLegacyLog rewrites a log in the legacy framing (legacyLogMagic)
// in the current one, crash-safely (atomicfile.WriteFile), keeping its
// intact prefix; a log already in the current framing is left alone. The
// legacy frame differs only in its length field, which counted the kind
// byte: the checksum covers the same bytes in both.
func (ms *manifestStore) upgradeLegacyLog(path string) error {
	// Only the magic is read to tell: the store opens once per tracker, and
	// old logs are kept for as long as sessions refer to them.
	if legacy, err := hasMagic(ms.fs, path, legacyLogMagic); err != nil || !legacy {
		return err
	}
	data, err := vfs.ReadFile(ms.fs, path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	out := []byte(logMagic)
	for off := len(legacyLogMagic); off+8 <= len(data); {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		if n < 1 || n > len(data)-off-8 {
			break
		}
		payload := data[off+8 : off+8+n]
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(data[off+4:]) {
			break
		}
		out = recordlog.Append(out, payload[0], payload[1:])
		off += 8 + n
	}
	ms.log.Info("rewriting a manifest log in the current framing", "file", path)
	return atomicfile.WriteFileFS(ms.fs, path, out, 0o600)
}

// hasMagic reports whether the file at path starts with magic, reading only
// that many bytes.
func hasMagic(fsys vfs.FS, path, magic string) (bool, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, int64(len(magic))), head); err != nil {
		return false, nil // shorter than a magic: not a legacy log
	}
	return string(head) == magic, nil
}

// scanLog walks the records of a log whose base is base, calling fn for
// each valid delta in order until fn returns false; it returns the length
// of the valid prefix. A record that is incomplete, fails its checksum
// (recordlog.Scan), does not decode or breaks the sequence ends the valid
// prefix (a torn tail).
func scanLog(data []byte, base uint64, fn func(seq uint64, ops []mop) bool) (int, error) {
	if !recordlog.HasMagic(data, logMagic) {
		return 0, fmt.Errorf("bad log header: %w", ErrCorrupt)
	}
	want := base + 1
	end := recordlog.Scan(data, int64(len(logMagic)), func(r recordlog.Record) bool {
		if r.Kind != recDelta {
			return false
		}
		seq, ops, err := decodeDelta(r.Payload)
		if err != nil || seq != want {
			return false
		}
		want++
		return fn(seq, ops)
	})
	return int(end), nil
}

func appendOp(b []byte, op mop) []byte {
	if op.del {
		b = append(b, opDel)
	} else {
		b = append(b, opPut)
	}
	b = binary.AppendUvarint(b, uint64(len(op.path)))
	b = append(b, op.path...)
	if !op.del {
		r := op.rec
		b = binary.AppendUvarint(b, uint64(r.size))
		b = binary.AppendVarint(b, r.mtime)
		b = binary.AppendVarint(b, r.ctime)
		b = binary.AppendUvarint(b, uint64(r.mode))
		b = append(b, r.flags)
		b = append(b, r.hash[:]...)
	}
	return b
}

// opReader decodes ops from a byte slice.
type opReader struct {
	b   []byte
	err error
}

func (r *opReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = ErrCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *opReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = ErrCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *opReader) bytes(n uint64) []byte {
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = ErrCorrupt
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *opReader) op() mop {
	kind := r.bytes(1)
	if r.err != nil {
		return mop{}
	}
	var op mop
	op.path = string(r.bytes(r.uvarint()))
	switch kind[0] {
	case opDel:
		op.del = true
	case opPut:
		op.rec.size = int64(r.uvarint())
		op.rec.mtime = r.varint()
		op.rec.ctime = r.varint()
		op.rec.mode = fs.FileMode(r.uvarint())
		if f := r.bytes(1); f != nil {
			op.rec.flags = f[0]
		}
		copy(op.rec.hash[:], r.bytes(32))
	default:
		r.err = ErrCorrupt
	}
	return op
}

// encodeDelta frames one delta as a recDelta record.
func encodeDelta(seq uint64, ops []mop) []byte {
	b := make([]byte, 0, 32+len(ops)*80)
	b, start := recordlog.Reserve(b)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(ops)))
	for _, op := range ops {
		b = appendOp(b, op)
	}
	recordlog.Seal(b, start, recDelta)
	return b
}

// decodeDelta decodes the payload of a recDelta record.
func decodeDelta(p []byte) (uint64, []mop, error) {
	r := &opReader{b: p}
	seq := r.uvarint()
	n := r.uvarint()
	if r.err != nil || n > uint64(len(p)) {
		return 0, nil, ErrCorrupt
	}
	ops := make([]mop, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		ops = append(ops, r.op())
	}
	if r.err != nil || len(r.b) != 0 {
		return 0, nil, ErrCorrupt
	}
	return seq, ops, nil
}

// append durably records ops as manifest last+1: one write, one fdatasync.
// On failure the log is truncated back; if even that fails, the store
// refuses appends until a later one manages the truncate.
func (ms *manifestStore) append(ops []mop) (uint64, error) {
	if ms.broken != nil {
		// The cause may be gone: try the rollback again.
		if err := ms.cur.Rollback(nil); err != nil {
			return 0, fmt.Errorf("%w; rolling it back again failed: %w", ms.broken, err)
		}
		ms.log.Info("manifest log repaired", "file", ms.cur.Path())
		ms.broken = nil
	}
	if err := ms.checkLock(); err != nil {
		return 0, err
	}
	seq := ms.last + 1
	broken, err := ms.cur.Append(encodeDelta(seq, ops), nil)
	if err != nil {
		if broken {
			ms.broken = fmt.Errorf("manifest log broken; the next append rolls it back again: %w", err)
			return 0, fmt.Errorf("append manifest %d: %w", seq, err)
		}
		return 0, session.FileError(err, ms.cur.Path(), "workspace: append manifest %d", seq)
	}
	if err := ms.checkLock(); err != nil {
		return 0, err
	}
	ms.last = seq
	ms.curOps += len(ops)
	return seq, nil
}

// record durably stores ops as manifest last+1 and returns its number.
// A small delta is one append and one fdatasync of the current log. A
// delta as large as a quarter of the tree (the first manifest of a
// workspace, a branch switch) is written as a new base instead, so it is
// not stored twice. prev, when the caller has it, is manifest last; record
// may modify it.
func (ms *manifestStore) record(ops []mop, entries int, prev map[string]mrec) (uint64, error) {
	if len(ops) >= rebaseMinOps && len(ops) >= entries/4 {
		if prev == nil {
			var err error
			if prev, err = ms.load(ms.last); err != nil {
				return 0, err
			}
		}
		for _, op := range ops {
			if op.del {
				delete(prev, op.path)
			} else {
				prev[op.path] = op.rec
			}
		}
		seq := ms.last + 1
		if err := ms.startBase(seq, prev); err != nil {
			return 0, err
		}
		return seq, nil
	}
	seq, err := ms.append(ops)
	if err != nil {
		return 0, err
	}
	if ms.curOps >= rebaseMinOps && ms.curOps >= entries/4 {
		// The manifest is recorded; a failure here only makes later loads
		// replay a longer log.
		m, err := ms.load(ms.last)
		if err == nil {
			err = ms.startBase(ms.last, m)
		}
		if err != nil {
			ms.log.Warn("cannot write a manifest base; loads replay a longer log", "error", err)
		}
	}
	return seq, nil
}

// startBase writes manifest seq in full as base-<seq> and starts the empty
// log-<seq> after it, each crash-safely (temp file, fsync, rename); one
// directory fsync, after the log's rename, makes both names durable. A
// crash between the two leaves a base without a log, which Open completes.
func (ms *manifestStore) startBase(seq uint64, m map[string]mrec) error {
	if err := ms.checkLock(); err != nil {
		return err
	}
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	b := []byte(baseMagic)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(paths)))
	for _, p := range paths {
		b = appendOp(b, mop{path: p, rec: m[p]})
	}
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if err := atomicfile.WriteFileDeferDirSyncFS(ms.fs, ms.path("base", seq), b, 0o600); err != nil {
		return session.FileError(err, ms.path("base", seq), "workspace: manifest %d", seq)
	}
	l, err := recordlog.CreateFS(ms.fs, ms.path("log", seq), []byte(logMagic), nil)
	if err != nil {
		return session.FileError(err, ms.path("log", seq), "workspace: manifest %d", seq)
	}
	ms.cur.Close()
	ms.cur, ms.curOps = l, 0
	if seq != ms.bases[len(ms.bases)-1] {
		ms.bases = append(ms.bases, seq)
	}
	ms.last = seq
	return nil
}

// load reconstructs manifest seq: its base, then the deltas after it.
func (ms *manifestStore) load(seq uint64) (map[string]mrec, error) {
	if seq > ms.last {
		return nil, fmt.Errorf("manifest %d (newest is %d): %w", seq, ms.last, ErrManifestNotFound)
	}
	i, found := slices.BinarySearch(ms.bases, seq)
	if !found {
		i--
	}
	base := ms.bases[i]
	m, err := ms.readBase(base)
	if err != nil || seq == base {
		return m, err
	}
	lp := ms.path("log", base)
	data, err := vfs.ReadFile(ms.fs, lp)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lp, err)
	}
	reached := base
	if _, err := scanLog(data, base, func(s uint64, ops []mop) bool {
		for _, op := range ops {
			if op.del {
				delete(m, op.path)
			} else {
				m[op.path] = op.rec
			}
		}
		reached = s
		return s < seq
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", lp, err)
	}
	if reached != seq {
		return nil, fmt.Errorf("%s ends at manifest %d, before %d: %w", lp, reached, seq, ErrCorrupt)
	}
	return m, nil
}

func (ms *manifestStore) readBase(seq uint64) (map[string]mrec, error) {
	if seq == 0 {
		return map[string]mrec{}, nil
	}
	p := ms.path("base", seq)
	data, err := vfs.ReadFile(ms.fs, p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) < len(baseMagic)+4 || !bytes.HasPrefix(data, []byte(baseMagic)) ||
		crc32.Checksum(data[:len(data)-4], castagnoli) != binary.LittleEndian.Uint32(data[len(data)-4:]) {
		return nil, fmt.Errorf("%s: %w", p, ErrCorrupt)
	}
	r := &opReader{b: data[len(baseMagic) : len(data)-4]}
	if got := r.uvarint(); got != seq {
		return nil, fmt.Errorf("%s holds manifest %d: %w", p, got, ErrCorrupt)
	}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(data)) {
		return nil, fmt.Errorf("%s: %w", p, ErrCorrupt)
	}
	m := make(map[string]mrec, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		op := r.op()
		m[op.path] = op.rec
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, fmt.Errorf("%s: %w", p, ErrCorrupt)
	}
	return m, nil
}

func (ms *manifestStore) close() error {
	var err error
	if ms.cur != nil {
		err = ms.cur.Close()
		ms.cur = nil
	}
	if ms.lock != nil {
		if uerr := ms.lock.Release(); err == nil {
			err = uerr
		}
		ms.lock = nil
	}
	return err
}

// ref formats the id of manifest seq: "<store id>:<seq>".
func (ms *manifestStore) ref(seq uint64) string { return ms.id + ":" + strconv.FormatUint(seq, 10) }

// parseRef returns the sequence number of a manifest id of this store.
func (ms *manifestStore) parseRef(id string) (uint64, error) {
	store, seq, ok := strings.Cut(id, ":")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil || n == 0 {
		return 0, fmt.Errorf("manifest id %q: %w", id, ErrManifestNotFound)
	}
	if store != ms.id {
		return 0, fmt.Errorf("manifest id %q belongs to another store (this one is %s): %w", id, ms.id, ErrManifestNotFound)
	}
	return n, nil
}
