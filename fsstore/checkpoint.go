package fsstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// Index checkpoints.
//
// Open indexes every session log (tracker) so Stat, List, FindRun and the
// reads answer from memory. Walking a whole log costs its size, so a log
// of some size keeps beside it, in sessions/<name>.idx, a checkpoint of its
// index: the tracker as of a prefix of the log, the prefix's length, its
// last generation and a CRC-32C of its last bytes. Open then reads the
// checkpoint and walks only the log's tail after the prefix, with the same
// assembler and the same torn-tail and damage rules (damage.go) as a walk
// from the start: a crash can only have torn what came after the last
// sync, and the prefix was synced and walked before the checkpoint was
// written.
//
// A checkpoint is an optimisation, never trusted: it is written without
// fsync, off the commit path, and any doubt sends Open back to a full walk
// of the log. Doubt is: a file that does not check (short, torn, a flipped
// byte: its checksum), a format version this build does not read, a log
// shorter than the prefix, or last bytes of the prefix that are not the ones
// the checkpoint saw (the log was compacted, repaired or replaced behind
// it). A walk that the tail after the prefix does not continue (its first
// commit is not the next generation) is handled as any damaged tail is.
//
// What a checkpoint does not re-check is the prefix itself: bit rot inside
// it, after it was written, is found when a read checks the frame it
// preads (every frame carries its CRC), by Load (which scans the whole
// log) and by Verify, which walks every log in full, as before.
//
// Checkpoints are written: at Close, for every log of at least
// IndexCheckpointBytes whose checkpoint is behind; in the background after a
// commit once the log has grown 32 × IndexCheckpointBytes past its
// checkpoint (so the tail a crash leaves to walk stays bounded); and after a
// compaction (or removed, for a compacted log below the size). Delete
// removes a session's checkpoint; one left without its log is removed at
// Open.

const (
	idxSuffix = ".idx"
	// idxMagic opens a checkpoint file: "cairn", a NUL, "I" and the format
	// version. A checkpoint of another version is ignored (full walk).
	idxMagic = "cairn\x00I1"
	// idxVersion is the format of the body, checked as well as the magic.
	idxVersion = 1
	// idxTailLen is how many of the prefix's last bytes the checkpoint's
	// CRC covers: the last commit record and what precedes it.
	idxTailLen = 4096
	// idxHeader is the magic, the body's length and its CRC-32C.
	idxHeader = len(idxMagic) + 8
)

// DefaultIndexCheckpointBytes is the default size a session log must reach
// before it keeps an index checkpoint: below it, walking the log costs
// about a millisecond. Below it, too, Open finds damage anywhere in the
// log; above it, damage inside the checkpointed prefix is found by the
// reads, Load and Verify (see the comment above).
const DefaultIndexCheckpointBytes = 1 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// idxEncMode encodes checkpoints deterministically (sorted map keys), so
// equal indexes give equal files.
var idxEncMode = func() cbor.EncMode {
	m, err := cbor.EncOptions{Time: cbor.TimeRFC3339Nano, Sort: cbor.SortBytewiseLexical}.EncMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// idxName is the file name of the checkpoint of the log name.
func idxName(logName string) string {
	return strings.TrimSuffix(logName, logSuffix) + idxSuffix
}

// idxFile is the body of a checkpoint file.
type idxFile struct {
	Version int        `cbor:"1,keyasint"`
	Prefix  int64      `cbor:"2,keyasint"` // the log's length the index covers
	Gen     uint64     `cbor:"3,keyasint"` // the last generation in the prefix
	TailLen int64      `cbor:"4,keyasint"` // bytes before Prefix that TailCRC covers
	TailCRC uint32     `cbor:"5,keyasint"`
	T       idxTracker `cbor:"6,keyasint"`
}

// idxTracker is a tracker as a checkpoint holds it: lists of items packed
// 16 bytes each (packItems), so an index of many messages encodes and
// decodes as a few byte strings.
type idxTracker struct {
	SessionID string              `cbor:"1,keyasint"`
	Gen       uint64              `cbor:"2,keyasint"`
	First     uint64              `cbor:"3,keyasint"`
	Created   time.Time           `cbor:"4,keyasint"`
	Updated   time.Time           `cbor:"5,keyasint"`
	Single    map[uint8][]byte    `cbor:"6,keyasint"`
	Meta      map[string][]byte   `cbor:"7,keyasint"`
	Runs      idxKeyed            `cbor:"8,keyasint"`
	Status    map[string]string   `cbor:"9,keyasint"`
	Verifs    idxKeyed            `cbor:"10,keyasint"`
	Tasks     idxKeyed            `cbor:"11,keyasint"`
	Msgs      []byte              `cbor:"12,keyasint"`
	MsgMarks  [][2]uint64         `cbor:"13,keyasint"`
	Traces    []byte              `cbor:"14,keyasint"`
	TrMarks   [][2]uint64         `cbor:"15,keyasint"`
	TraceRuns map[string][]int32  `cbor:"16,keyasint"`
	ArtOrder  []string            `cbor:"17,keyasint"`
	ArtHdr    []byte              `cbor:"18,keyasint"`
	ArtData   []byte              `cbor:"19,keyasint"`
	ArtFlags  []byte              `cbor:"20,keyasint"`
	Ckpts     map[string]idxRunLn `cbor:"21,keyasint"`
	Live      int64               `cbor:"22,keyasint"`
}

type idxKeyed struct {
	Order []string `cbor:"1,keyasint"`
	Items []byte   `cbor:"2,keyasint"` // packed, in Order
}

type idxRunLn struct {
	Latest session.LoopCheckpoint `cbor:"1,keyasint"`
	Gens   []uint64               `cbor:"2,keyasint"`
	Items  []byte                 `cbor:"3,keyasint"` // packed, one per Gens
}

const itemBytes = 16

func packItems(its []item) []byte {
	out := make([]byte, len(its)*itemBytes)
	for i, it := range its {
		b := out[i*itemBytes:]
		binary.LittleEndian.PutUint64(b, it.offElem)
		binary.LittleEndian.PutUint32(b[8:], it.fsz)
		binary.LittleEndian.PutUint32(b[12:], it.size)
	}
	return out
}

func unpackItems(b []byte) ([]item, error) {
	if len(b)%itemBytes != 0 {
		return nil, fmt.Errorf("packed items of %d bytes", len(b))
	}
	out := make([]item, len(b)/itemBytes)
	for i := range out {
		p := b[i*itemBytes:]
		out[i] = item{offElem: binary.LittleEndian.Uint64(p), fsz: binary.LittleEndian.Uint32(p[8:]), size: binary.LittleEndian.Uint32(p[12:])}
	}
	return out, nil
}

func unpackOne(b []byte) (item, error) {
	its, err := unpackItems(b)
	if err != nil || len(its) != 1 {
		return item{}, fmt.Errorf("bad packed item")
	}
	return its[0], nil
}

func packKeyed(k *keyed[item]) idxKeyed {
	its := make([]item, len(k.order))
	for i, id := range k.order {
		its[i] = k.at[id]
	}
	return idxKeyed{Order: orNil(k.order), Items: packItems(its)}
}

func unpackKeyed(x idxKeyed) (keyed[item], error) {
	its, err := unpackItems(x.Items)
	if err != nil || len(its) != len(x.Order) {
		return keyed[item]{}, fmt.Errorf("bad keyed list")
	}
	k := keyed[item]{}
	for i, id := range x.Order {
		if _, dup := k.set(id, its[i]); dup {
			return keyed[item]{}, fmt.Errorf("duplicate id %q", id)
		}
	}
	return k, nil
}

// toIdx is t as a checkpoint holds it. t is between commits.
func toIdx(t *tracker) idxTracker {
	x := idxTracker{
		SessionID: t.sessionID, Gen: t.gen, First: t.first, Created: t.created, Updated: t.updated,
		Single: map[uint8][]byte{}, Meta: map[string][]byte{},
		Runs: packKeyed(&t.runs), Status: t.status, Verifs: packKeyed(&t.verifs), Tasks: packKeyed(&t.tasks),
		Msgs: packItems(t.msgs), MsgMarks: fromMarks(t.msgMarks), Traces: packItems(t.traces), TrMarks: fromMarks(t.trMarks),
		TraceRuns: t.traceRuns, ArtOrder: orNil(t.arts.order), Ckpts: map[string]idxRunLn{}, Live: t.live,
	}
	for k, it := range t.single {
		x.Single[k] = packItems([]item{it})
	}
	for k, it := range t.meta {
		x.Meta[k] = packItems([]item{it})
	}
	hdr, data := make([]item, len(t.arts.order)), make([]item, len(t.arts.order))
	x.ArtFlags = make([]byte, len(t.arts.order))
	for i, id := range t.arts.order {
		a := t.arts.at[id]
		hdr[i], data[i] = a.hdr, a.data
		if a.hasDat {
			x.ArtFlags[i] |= 1
		}
		if a.legacy {
			x.ArtFlags[i] |= 2
		}
	}
	x.ArtHdr, x.ArtData = packItems(hdr), packItems(data)
	for run, l := range t.ckpts {
		ln := idxRunLn{Latest: l.latest, Gens: make([]uint64, len(l.events))}
		its := make([]item, len(l.events))
		for i, ev := range l.events {
			ln.Gens[i], its[i] = ev.gen, ev.at
		}
		ln.Items = packItems(its)
		x.Ckpts[run] = ln
	}
	return x
}

// fromIdx rebuilds a tracker from a checkpoint, checking that its parts
// fit together.
func fromIdx(x idxTracker) (*tracker, error) {
	t := newTracker()
	t.sessionID, t.gen, t.first, t.created, t.updated, t.live = x.SessionID, x.Gen, x.First, x.Created, x.Updated, x.Live
	t.curGen = x.Gen
	var err error
	for k, b := range x.Single {
		if t.single[k], err = unpackOne(b); err != nil {
			return nil, err
		}
	}
	for k, b := range x.Meta {
		if t.meta[k], err = unpackOne(b); err != nil {
			return nil, err
		}
	}
	if t.runs, err = unpackKeyed(x.Runs); err != nil {
		return nil, err
	}
	if t.verifs, err = unpackKeyed(x.Verifs); err != nil {
		return nil, err
	}
	if t.tasks, err = unpackKeyed(x.Tasks); err != nil {
		return nil, err
	}
	for run, status := range x.Status {
		t.setStatus(run, status)
	}
	if t.msgs, err = unpackItems(x.Msgs); err != nil {
		return nil, err
	}
	if t.traces, err = unpackItems(x.Traces); err != nil {
		return nil, err
	}
	if len(t.msgs) == 0 {
		t.msgs = nil
	}
	if len(t.traces) == 0 {
		t.traces = nil
	}
	t.msgMarks, t.trMarks = toMarksOrNil(x.MsgMarks), toMarksOrNil(x.TrMarks)
	if x.TraceRuns != nil {
		t.traceRuns = x.TraceRuns
	}
	for _, idxs := range t.traceRuns {
		for _, i := range idxs {
			if i < 0 || int(i) >= len(t.traces) {
				return nil, fmt.Errorf("trace index %d out of range", i)
			}
		}
	}
	hdr, err := unpackItems(x.ArtHdr)
	if err != nil {
		return nil, err
	}
	data, err := unpackItems(x.ArtData)
	if err != nil {
		return nil, err
	}
	if len(hdr) != len(x.ArtOrder) || len(data) != len(x.ArtOrder) || len(x.ArtFlags) != len(x.ArtOrder) {
		return nil, fmt.Errorf("bad artifact list")
	}
	for i, id := range x.ArtOrder {
		if _, dup := t.arts.set(id, art{hdr: hdr[i], data: data[i], hasDat: x.ArtFlags[i]&1 != 0, legacy: x.ArtFlags[i]&2 != 0}); dup {
			return nil, fmt.Errorf("duplicate artifact %q", id)
		}
	}
	for run, ln := range x.Ckpts {
		its, err := unpackItems(ln.Items)
		if err != nil || len(its) != len(ln.Gens) || len(its) == 0 {
			return nil, fmt.Errorf("bad checkpoint line of run %q", run)
		}
		l := &runLine{latest: ln.Latest, events: make([]ckptEvent, len(its))}
		for i := range its {
			l.events[i] = ckptEvent{gen: ln.Gens[i], at: its[i]}
		}
		t.ckpts[run] = l
	}
	if t.sessionID == "" || t.gen == 0 || t.first == 0 || t.first > t.gen {
		return nil, fmt.Errorf("index of no commit")
	}
	return t, nil
}

// orNil makes an empty list nil, so an index encodes the same however its
// lists came to be empty.
func orNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func toMarksOrNil(pairs [][2]uint64) []mark {
	if len(pairs) == 0 {
		return nil
	}
	return toMarks(pairs)
}

// encodeIdx encodes the checkpoint of t, which indexes the first prefix
// bytes of the log r.
func encodeIdx(r io.ReaderAt, prefix int64, t *tracker) ([]byte, error) {
	f := idxFile{Version: idxVersion, Prefix: prefix, Gen: t.gen, TailLen: min(prefix, idxTailLen), T: toIdx(t)}
	tail := make([]byte, f.TailLen)
	if n, err := r.ReadAt(tail, prefix-f.TailLen); n != len(tail) {
		return nil, fmt.Errorf("read the end of the indexed log: %w", err)
	}
	f.TailCRC = crc32.Checksum(tail, crcTable)
	body, err := idxEncMode.Marshal(f)
	if err != nil {
		return nil, err
	}
	out := make([]byte, idxHeader, idxHeader+len(body))
	copy(out, idxMagic)
	binary.LittleEndian.PutUint32(out[len(idxMagic):], uint32(len(body)))
	binary.LittleEndian.PutUint32(out[len(idxMagic)+4:], crc32.Checksum(body, crcTable))
	return append(out, body...), nil
}

// errIdx is why a checkpoint was not used.
var errIdx = errors.New("index checkpoint not usable")

// decodeIdx checks a checkpoint file against the log r of size bytes and
// returns the tracker it holds and the prefix it covers. Any error means:
// walk the whole log.
func decodeIdx(data []byte, r io.ReaderAt, size int64) (*tracker, int64, error) {
	if len(data) < idxHeader || !recordlog.HasMagic(data, idxMagic) {
		return nil, 0, fmt.Errorf("%w: not a version %d checkpoint", errIdx, idxVersion)
	}
	n := binary.LittleEndian.Uint32(data[len(idxMagic):])
	body := data[idxHeader:]
	if int64(n) != int64(len(body)) || crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(data[len(idxMagic)+4:]) {
		return nil, 0, fmt.Errorf("%w: torn or corrupt (checksum)", errIdx)
	}
	var f idxFile
	if err := decMode.Unmarshal(body, &f); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", errIdx, err)
	}
	if f.Version != idxVersion {
		return nil, 0, fmt.Errorf("%w: version %d", errIdx, f.Version)
	}
	if f.Prefix < int64(len(logMagic)) || f.Prefix > size || f.TailLen != min(f.Prefix, idxTailLen) || f.Gen != f.T.Gen {
		return nil, 0, fmt.Errorf("%w: stale (covers %d bytes of a log of %d)", errIdx, f.Prefix, size)
	}
	tail := make([]byte, f.TailLen)
	if n, err := r.ReadAt(tail, f.Prefix-f.TailLen); n != len(tail) {
		return nil, 0, fmt.Errorf("%w: read the log: %v", errIdx, err)
	}
	if crc32.Checksum(tail, crcTable) != f.TailCRC {
		return nil, 0, fmt.Errorf("%w: stale (the log's bytes before %d changed)", errIdx, f.Prefix)
	}
	t, err := fromIdx(f.T)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", errIdx, err)
	}
	return t, f.Prefix, nil
}

// indexLog indexes the log l of size bytes (path, file name) for recovery:
// from its checkpoint when there is a usable one, walking only the tail
// after it; else from the start (walkIndex). at is the prefix the
// checkpoint covered (0: none used).
func (s *Store) indexLog(l io.ReaderAt, path string, size int64) (t *tracker, asm *assembler, at int64, err error) {
	if s.opts.IndexCheckpointBytes > 0 {
		ip := strings.TrimSuffix(path, logSuffix) + idxSuffix
		data, rerr := readSmall(s, ip)
		if rerr == nil {
			t, at, err = decodeIdx(data, l, size)
			if err == nil {
				asm = &assembler{valid: at, lastGen: t.gen, parse: true, onGroup: func(g commitGroup) error { return t.observe(g, 0) }}
				if _, err = recordlog.Walk(l, at, size, func(kind byte) bool { return kind != kindBlob }, asm.add); err != nil {
					return nil, nil, 0, err
				}
				return t, asm, at, nil
			}
			s.log.Warn("index checkpoint not used; walking the whole log", "path", ip, "error", err)
		} else if !errors.Is(rerr, os.ErrNotExist) {
			s.log.Warn("index checkpoint not read; walking the whole log", "path", ip, "error", rerr)
		}
	}
	t, asm, err = walkIndex(l, size)
	return t, asm, 0, err
}

// maxIdxFile bounds what is read of a checkpoint file: an index is 16 bytes
// an item, far below this for any log the store accepts.
const maxIdxFile = 1 << 30

// readSmall reads a checkpoint file, refusing links and oversized files.
func readSmall(s *Store, path string) ([]byte, error) {
	f, err := s.fs.OpenFile(path, os.O_RDONLY|atomicfile.OpenFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxIdxFile {
		return nil, fmt.Errorf("%s is not a checkpoint file", path)
	}
	data := make([]byte, fi.Size())
	if n, err := f.ReadAt(data, 0); n != len(data) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// idxPath is the path of sf's checkpoint.
func (sf *sessionFile) idxPath() string {
	return strings.TrimSuffix(sf.path, logSuffix) + idxSuffix
}

// wantsIdxLocked reports whether sf's checkpoint is behind enough to be
// written: behind at all (final, at Close and after a compaction), or by
// 32 × IndexCheckpointBytes (during commits). sf.mu is held.
func (s *Store) wantsIdxLocked(sf *sessionFile, final bool) bool {
	min := s.opts.IndexCheckpointBytes
	if min <= 0 || sf.gone || sf.sick != nil || sf.broken != nil || sf.t.gen == 0 || sf.size < min || sf.idxAt == sf.size {
		return false
	}
	return final || sf.size-sf.idxAt >= 32*min
}

// encodeIdxLocked encodes sf's checkpoint as of now. sf.mu is held.
func (s *Store) encodeIdxLocked(sf *sessionFile) ([]byte, error) {
	r, err := recordlog.OpenReaderAtFS(s.fs, sf.path, sf.size)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return encodeIdx(r, sf.size, sf.t)
}

// writeIdx writes a checkpoint file through a temp file and a rename,
// without fsync: a checkpoint a crash tears is detected and ignored.
func (s *Store) writeIdx(path string, data []byte) error {
	tmp, err := atomicfile.NewTempFS(s.fs, path, 0o600, nil)
	if err != nil {
		return err
	}
	defer tmp.Abort()
	if err := tmp.WriteAt(data, 0); err != nil {
		return err
	}
	f, err := tmp.Rename()
	if f != nil {
		f.Close()
	}
	return err
}

// checkpointLocked writes sf's checkpoint now when it is behind (final)
// and removes a stale one from a log that no longer wants one. Errors are
// logged: a missing checkpoint costs time at the next Open, nothing else.
// sf.mu is held.
func (s *Store) checkpointLocked(sf *sessionFile) {
	if !s.wantsIdxLocked(sf, true) {
		if sf.idxAt != 0 && sf.idxAt != sf.size && !sf.gone {
			s.removeIdxLocked(sf)
		}
		return
	}
	data, err := s.encodeIdxLocked(sf)
	if err == nil {
		err = s.writeIdx(sf.idxPath(), data)
	}
	if err != nil {
		s.log.Warn("index checkpoint not written", "path", sf.idxPath(), "error", err)
		return
	}
	sf.idxAt = sf.size
}

// removeIdxLocked removes sf's checkpoint (not synced: one that comes back
// after a crash is found stale). sf.mu is held.
func (s *Store) removeIdxLocked(sf *sessionFile) {
	if err := s.fs.Remove(sf.idxPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("stale index checkpoint not removed", "path", sf.idxPath(), "error", err)
	}
	sf.idxAt = 0
}

// maybeCheckpointLocked writes sf's checkpoint in the background when the
// log has grown far past it. The goroutine, which Close waits for, takes
// the session's lock to encode the index (its cost is the index's size,
// paid once per 32 × IndexCheckpointBytes of commits, after the commit
// that crossed the line has returned), writes the file without the lock,
// and renames it into place only if the log it describes is still the
// session's (no compaction, heal or delete came between). sf.mu is held.
func (s *Store) maybeCheckpointLocked(sf *sessionFile) {
	if sf.idxBusy || !s.wantsIdxLocked(sf, false) {
		return
	}
	if !s.startBackground() {
		return
	}
	sf.idxBusy = true
	go func() {
		defer s.compactions.Done()
		sf.mu.Lock()
		var data []byte
		err := errIdx
		t, at := sf.t, sf.size
		if s.wantsIdxLocked(sf, true) {
			data, err = s.encodeIdxLocked(sf)
		}
		if err != nil {
			sf.idxBusy = false
		}
		sf.mu.Unlock()
		if err == nil {
			err = s.writeIdxIf(sf, data, t, at)
		}
		if err != nil && err != errIdx {
			s.log.Warn("index checkpoint not written", "path", sf.idxPath(), "error", err)
		}
	}()
}

// writeIdxIf writes a checkpoint file's temp without sf's lock, then,
// under the lock, renames it into place if the log is still the one it
// describes (t is still sf's index and the log not cut below at).
func (s *Store) writeIdxIf(sf *sessionFile, data []byte, t *tracker, at int64) error {
	tmp, err := atomicfile.NewTempFS(s.fs, sf.idxPath(), 0o600, nil)
	if err == nil {
		defer tmp.Abort()
		err = tmp.WriteAt(data, 0)
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.idxBusy = false
	if err != nil || sf.t != t || sf.gone || sf.size < at {
		return err
	}
	f, err := tmp.Rename()
	if f != nil {
		f.Close()
	}
	if err == nil {
		sf.idxAt = at
	}
	return err
}

// checkpointAll writes the checkpoint of every session whose checkpoint is
// behind: at Close, after background work has stopped.
func (s *Store) checkpointAll() {
	for _, sf := range s.sessions {
		sf.mu.Lock()
		s.checkpointLocked(sf)
		sf.mu.Unlock()
	}
}

// orphanIdx removes the checkpoint file name of dir when no log of its
// name is there (its session was deleted). names holds the directory's
// entries.
func (s *Store) orphanIdx(dir, name string, names map[string]bool) {
	if names[strings.TrimSuffix(name, idxSuffix)+logSuffix] {
		return
	}
	if err := s.fs.Remove(filepath.Join(dir, name)); err != nil {
		s.log.Warn("orphan index checkpoint not removed", "path", filepath.Join(dir, name), "error", err)
	}
}
