package fsstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/session"
)

// The workspace journal: group commit for session logs (on when
// Options.JournalBytes is set, as cairnd sets it).
//
// Without it every commit fdatasyncs its own session log, so N sessions
// committing at once cost N flushes. With it a commit writes its bytes to
// its log without a flush and hands them to the journal,
// sessions/journal, one preallocated file of zeros for the workspace.
// One committer at a time (the leader) writes every commit queued since
// the last flush to the journal with one pwrite and makes them durable
// with one fdatasync; each waiting commit is then acknowledged. A session
// log stays readable on its own: it holds every byte of its commits (in
// the page cache until the kernel writes it back), and nothing is read
// from the journal but at Open after a crash.
//
// The journal is a run of recordlog frames. The first is a start frame:
// journalMagic and a random 64-bit epoch. Each commit frame holds the
// epoch, the offset in its log, the log's file name in sessions/, and the
// commit's bytes. A flush ends with a pad frame (the epoch, then zeros)
// up to the next journalAlign boundary, so that every flush writes whole
// blocks (see journalAlign). A scan reads frames from the start and stops
// at the first that fails its checksum or names another epoch: the zeros
// ahead, a torn tail, or the frames of an epoch before. Pad frames came
// with journalMagic's version 2; a version 1 journal (no pads) is still
// replayed.
//
// The rules that make it safe:
//   - Replay. Open, before it reads any log, and whatever its options,
//     writes every commit frame of the journal's epoch into its log at its
//     offset, in journal order (where the log's bytes differ), fdatasyncs
//     each log it touched, then starts a new epoch. A frame for a log that
//     is gone is skipped. So a commit the journal made durable is in its
//     log before anything reads the log.
//   - Checkpoint. Before the journal is written over from its start (when
//     it is full, at Close, and on request), every log with frames in the
//     epoch is fdatasynced, then a start frame of a new epoch is written at
//     offset 0 and fdatasynced: the old frames are never replayed again.
//   - Incarnation. A frame may only ever be replayed into the log file it
//     was written for. Before a session log with frames in the epoch is
//     removed or replaced (delete, compaction's switch, repair), the
//     journal is checkpointed (retireLocked); a new log under that name
//     then never meets an old frame.
//   - Close. A log with frames in the epoch is fdatasynced before its
//     descriptor is closed (release), so the checkpoint can reach every
//     log it must flush.
//   - Failure. A journal whose write, fdatasync or checkpoint fails takes
//     no commits until the store is reopened (whose replay sorts out what
//     reached the disk), as a session log that cannot be rolled back does.
//     The commits of the failed flush are rolled back and not
//     acknowledged; a crash may still bring one back whole (replay), never
//     torn.
//   - Size. A commit too large for a quarter of the journal fdatasyncs its
//     own log, as without a journal. Replaying frames written before it
//     rewrites bytes its log already holds. If that fdatasync fails, the
//     journal fails too: the log may hold bytes of earlier commits whose
//     other copy is a frame of the epoch, and after a failed writeback a
//     later fdatasync (the checkpoint's) may report success without
//     having written them, so only a reopen's replay may vouch for them.

// DefaultJournalBytes is the journal size cairnd uses.
const DefaultJournalBytes = 32 << 20

// minJournalBytes is the smallest journal Open makes: enough for the start
// frame and a few small commits.
const minJournalBytes = 4 << 10

// journalFirstBytes is how much of a new journal Open writes before it
// returns; the rest of its zeros are written in the background (grow),
// so a daemon's first start in a workspace does not wait for 32 MiB of
// them.
const journalFirstBytes = 1 << 20

// journalName is the journal's file name in sessions/ (not .cairn/
// itself, whose every change the workspace tracker's watch would see).
// No session log is named so: their names end in logSuffix.
const journalName = "journal"

// journalMagic starts the payload of the journal's start frame; its last
// byte is the format's version. Version 2 added pad frames, which a
// version 1 reader would take for the journal's end: it refuses the
// journal instead (a newer cairn's) and loses nothing, and a journal
// closed cleanly holds no frames and says version 1 (closeMagic).
const journalMagic = "cairnjr2"

// journalMagicV1 is version 1's: no pad frames. Replay reads it.
const journalMagicV1 = "cairnjr1"

// closeMagic labels the epoch a clean close begins, which holds no
// frames: version 1's, true of it, so a build that knows only version 1
// opens a workspace this one closed cleanly. The next Open's replay
// begins a version 2 epoch.
const closeMagic = journalMagicV1

// Kinds of journal frames.
const (
	jkStart  byte = 1
	jkCommit byte = 2
	jkPad    byte = 3
)

// journalAlign is the boundary every flush ends on, with a pad frame: a
// flush then starts and ends on a boundary of the file system's blocks
// (4 KiB; an epoch's first starts in the start frame's block, just
// written), so its write covers each block whole and the kernel never
// reads one from the disk to merge part of it into the page cache. A
// journal's blocks go cold between the flushes that reach them (32 MiB
// goes round in hours at an agent's pace), and a page cache that reclaims
// cold pages (as a VM's memory reclaim does) drops them: a part-block
// write into one waits for a read of it from the disk, ~100 µs on the
// benchmark machine, on the commit's path. The cost is the pad's bytes
// (under 4 KiB a flush): a busier journal, never more disk writes, since
// a flush writes whole pages in any case.
const journalAlign = 4096

// padFlushes is journalAlign's switch, off only in a benchmark's
// baseline (BenchmarkJournalColdPages).
var padFlushes = true

// padFrameMin is the smallest pad frame: a header and the epoch.
const padFrameMin = recordlog.HeaderSize + 8

// jCommitHead is the size of a commit frame's payload before the log
// name: epoch, offset, name length.
const jCommitHead = 8 + 8 + 2

// startFrameLen is the size of the framed start frame.
const startFrameLen = int64(recordlog.HeaderSize + len(journalMagic) + 8)

type journal struct {
	s         *Store
	f         vfs.File
	path      string
	capacity  atomic.Int64 // bytes the frames may use: the zeros written so far
	maxRecord atomic.Int64 // the largest commit frame the journal takes

	// growing is the goroutine writing the journal's zeros out to its full
	// size (grow); stop asks it to stop.
	growing sync.WaitGroup
	stop    atomic.Bool

	mu     sync.Mutex
	epoch  uint64
	end    int64 // where the next frame goes
	busy   bool  // a leader is flushing
	queue  []*jpending
	broken error
	closed bool
	buf    []byte // the leader's

	// dmu guards dirty: the open logs with frames in the epoch not yet
	// fdatasynced. Taken by the checkpoint for its whole flush of them and
	// by release, so no log is closed while the checkpoint flushes it.
	dmu   sync.Mutex
	dirty map[*recordlog.File]bool

	flushes, journaled, checkpoints, tooLarge atomic.Int64
}

// jpending is one commit (or, with checkpoint set, a request for a
// checkpoint) waiting for the journal.
type jpending struct {
	name       string
	l          *recordlog.File
	off        int64
	data       []byte
	checkpoint bool
	final      bool   // the checkpoint of close (see closeMagic)
	epoch      uint64 // the epoch its frame went into
	err        error
	lead       bool // woken to lead, not done
	done       chan struct{}
}

func newEpoch() uint64 {
	for {
		if e := rand.Uint64(); e != 0 {
			return e
		}
	}
}

// startFrame appends the start frame of epoch, whose frames are magic's
// version's.
func startFrame(buf []byte, epoch uint64, magic string) []byte {
	buf, at := recordlog.Reserve(buf)
	buf = append(buf, magic...)
	buf = binary.LittleEndian.AppendUint64(buf, epoch)
	recordlog.Seal(buf, at, jkStart)
	return buf
}

// appendPad appends to buf, the bytes a flush writes at end, a pad frame
// that takes it to the next journalAlign boundary, when it fits within
// capacity (else buf is written as it is: only slower).
func appendPad(buf []byte, epoch uint64, end, capacity int64) []byte {
	at := end + int64(len(buf))
	gap := (journalAlign - at%journalAlign) % journalAlign
	if gap == 0 || !padFlushes {
		return buf
	}
	if gap < padFrameMin {
		gap += journalAlign
	}
	if at+gap > capacity {
		return buf
	}
	buf, start := recordlog.Reserve(buf)
	buf = binary.LittleEndian.AppendUint64(buf, epoch)
	buf = append(buf, make([]byte, gap-padFrameMin)...) // extends buf, allocates nothing
	recordlog.Seal(buf, start, jkPad)
	return buf
}

func commitFrameLen(name string, data []byte) int64 {
	return int64(recordlog.HeaderSize + jCommitHead + len(name) + len(data))
}

func appendCommitFrame(buf []byte, epoch uint64, p *jpending) []byte {
	buf, at := recordlog.Reserve(buf)
	buf = binary.LittleEndian.AppendUint64(buf, epoch)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(p.off))
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(p.name)))
	buf = append(buf, p.name...)
	buf = append(buf, p.data...)
	recordlog.Seal(buf, at, jkCommit)
	return buf
}

// journalLogName reports whether name, from a commit frame, is a session
// log's file name: one name in sessions/, not hidden, ending in logSuffix.
func journalLogName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "/\x00") && !strings.HasPrefix(name, ".") &&
		strings.HasSuffix(name, logSuffix) && len(name) <= 0xffff
}

// openJournal replays the journal, when there is one, and opens it for
// commits when opts.JournalBytes is set (making it when missing). It runs
// at Open before any log is read.
func (s *Store) openJournal() error {
	path := filepath.Join(s.sessionsDir, journalName)
	f, err := s.fs.OpenFile(path, os.O_RDWR|atomicfile.OpenFlags, 0)
	if errors.Is(err, os.ErrNotExist) {
		if s.opts.JournalBytes <= 0 {
			return nil
		}
		s.createJournal(path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err != nil {
		f.Close()
		return err
	}
	j := &journal{s: s, f: f, path: path}
	if err := j.replay(fi.Size()); err != nil {
		f.Close()
		return err
	}
	if s.opts.JournalBytes <= 0 {
		// Replayed and retired; the store commits without it.
		return f.Close()
	}
	if fi.Size() < minJournalBytes {
		// Too small to hold a commit (a crash cut its creation short,
		// say): replayed, so made again.
		f.Close()
		if err := s.fs.Remove(path); err != nil {
			return fmt.Errorf("remove journal %s: %w", path, err)
		}
		s.createJournal(path)
		return nil
	}
	j.init(fi.Size())
	s.j = j
	return nil
}

// createJournal makes a new journal at path (newJournal) and commits
// through it. The journal only makes commits cheaper: without room for it
// (a full disk, a small file system) each commit fdatasyncs its own log,
// as with no journal asked for.
func (s *Store) createJournal(path string) {
	if err := s.newJournal(path); err != nil {
		s.log.Warn("no workspace journal: each commit fdatasyncs its own log", "error", err)
	}
}

// newJournal writes a new journal at path: a start frame, then zeros to
// opts.JournalBytes or journalFirstBytes if less (init starts grow for
// the rest), its name made durable.
func (s *Store) newJournal(path string) error {
	size := min(max(s.opts.JournalBytes, minJournalBytes), journalFirstBytes)
	tmp, err := atomicfile.NewTempFS(s.fs, path, 0o600, nil)
	if err != nil {
		return fmt.Errorf("create journal: %w", err)
	}
	defer tmp.Abort()
	epoch := newEpoch()
	head := startFrame(nil, epoch, journalMagic)
	if err := tmp.WriteAt(head, 0); err != nil {
		return fmt.Errorf("create journal: %w", err)
	}
	if err := recordlog.WriteZeros(tmp.WriteAt, int64(len(head)), size, nil); err != nil {
		return fmt.Errorf("create journal: %w", err)
	}
	// Not a guarantee: the first flush's fdatasync makes the start frame
	// durable with its own frames (a journal a crash leaves without it is
	// empty); the zeros are there so that flushes overwrite blocks
	// already on disk. When grow follows, its own Presync covers them.
	// Its name is durable before any commit uses it.
	if size >= s.opts.JournalBytes {
		if err := tmp.Presync(); err != nil {
			return fmt.Errorf("create journal: %w", err)
		}
	}
	f, err := tmp.Create()
	if err != nil {
		return fmt.Errorf("create journal: %w", err)
	}
	j := &journal{s: s, f: f, path: path, epoch: epoch}
	j.init(size)
	j.end = int64(len(head))
	s.j = j
	return nil
}

func (j *journal) init(size int64) {
	j.setCapacity(size)
	j.dirty = map[*recordlog.File]bool{}
	if want := j.s.opts.JournalBytes; size < want {
		j.growing.Add(1)
		go j.grow(size, want)
	}
}

func (j *journal) setCapacity(size int64) {
	// A frame must fit after the start frame even when the journal is
	// full of others; a quarter keeps the checkpoints of a busy journal
	// rarer than its flushes.
	j.maxRecord.Store((size - startFrameLen) / 4)
	j.capacity.Store(size)
}

// grow writes zeros from the journal's end at from out to size, then lets
// the frames use them. The leader writes below from meanwhile. A failure
// (no room) leaves the journal at the size it had, the zeros past it cut
// off.
func (j *journal) grow(from, size int64) {
	defer j.growing.Done()
	if testHookGrow != nil {
		testHookGrow()
	}
	write := func(p []byte, off int64) error {
		_, err := j.f.WriteAt(p, off)
		return err
	}
	stop := func() error {
		if j.stop.Load() {
			return errors.New("the store closed")
		}
		return nil
	}
	err := recordlog.WriteZeros(write, from, size, stop)
	if err == nil {
		// As at creation: so that flushes overwrite blocks already on disk.
		err = j.f.Presync()
	}
	if err != nil {
		_ = j.f.Truncate(from)
		j.s.log.Warn("the workspace journal stays at its size", "bytes", from, "error", err)
		return
	}
	j.setCapacity(size)
}

// testHookGrow, when set (tests only), runs before grow writes anything.
var testHookGrow func()

// replay writes the commit frames of the journal's epoch into their logs
// and starts a new epoch (see the rules above).
func (j *journal) replay(size int64) error {
	s := j.s
	var epoch uint64
	first := true
	files := map[string]vfs.File{}
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	var order []string
	var werr error
	var unsupported bool
	var have []byte // a frame's bytes as its log holds them
	replayed := 0
	_, err := recordlog.Walk(j.f, 0, size, func(byte) bool { return true }, func(r recordlog.Record) bool {
		p := r.Payload
		if first {
			first = false
			if r.Kind != jkStart || len(p) != len(journalMagic)+8 {
				return false
			}
			if m := string(p[:len(journalMagic)]); m != journalMagic && m != journalMagicV1 {
				unsupported = strings.HasPrefix(m, journalMagic[:len(journalMagic)-1])
				return false
			}
			epoch = binary.LittleEndian.Uint64(p[len(journalMagic):])
			return true
		}
		if r.Kind == jkPad && len(p) >= 8 && binary.LittleEndian.Uint64(p) == epoch {
			return true
		}
		if r.Kind != jkCommit || len(p) < jCommitHead || binary.LittleEndian.Uint64(p) != epoch {
			return false
		}
		off := int64(binary.LittleEndian.Uint64(p[8:]))
		n := int(binary.LittleEndian.Uint16(p[16:]))
		if len(p) < jCommitHead+n || off < 0 {
			return false
		}
		name, data := string(p[jCommitHead:jCommitHead+n]), p[jCommitHead+n:]
		if !journalLogName(name) {
			werr = fmt.Errorf("journal %s names %q, which is not a session log", j.path, name)
			return false
		}
		f, seen := files[name]
		if !seen {
			var err error
			f, err = s.fs.OpenFile(filepath.Join(s.sessionsDir, name), os.O_RDWR|atomicfile.OpenFlags, 0)
			switch {
			case errors.Is(err, os.ErrNotExist):
				s.log.Warn("the journal holds a commit to a log that is gone; skipped", "log", name)
				f = nil
			case err != nil:
				werr = fmt.Errorf("replay journal into %s: %w", name, err)
				return false
			default:
				order = append(order, name)
			}
			files[name] = f
		}
		if f == nil {
			return true
		}
		have = slices.Grow(have[:0], len(data))[:len(data)]
		if n, _ := f.ReadAt(have, off); n < len(data) || !bytes.Equal(have, data) {
			if _, err := f.WriteAt(data, off); err != nil {
				werr = fmt.Errorf("replay journal into %s at %d: %w", name, off, err)
				return false
			}
		}
		replayed++
		return true
	})
	switch {
	case err != nil:
		return fmt.Errorf("read journal %s: %w", j.path, err)
	case werr != nil:
		return werr
	case unsupported:
		return session.Errorf(session.CodeSchemaUnsupported, "journal %s was written by a newer cairn; open the workspace with that version", j.path)
	}
	for _, name := range order {
		if err := files[name].Sync(); err != nil {
			return fmt.Errorf("replay journal into %s: fdatasync: %w", name, err)
		}
	}
	if replayed > 0 {
		s.log.Info("replayed the journal's commits into their logs", "commits", replayed, "logs", len(order))
	}
	s.journalReplayed.Store(int64(replayed))
	// A new epoch, so none of these frames is replayed again and no frame
	// a crash tore in this epoch lines up with the next one's. Made
	// durable at once when frames were replayed: a log they went to may
	// be deleted and made again before the next flush. With none, the old
	// epoch holds nothing to replay, and the next flush's fdatasync makes
	// the new one durable before any frame of it counts.
	j.epoch = newEpoch()
	head := startFrame(nil, j.epoch, journalMagic)
	if _, err := j.f.WriteAt(head, 0); err != nil {
		return fmt.Errorf("write journal %s: %w", j.path, err)
	}
	if replayed > 0 {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("fdatasync journal %s: %w", j.path, err)
		}
	}
	j.end = int64(len(head))
	return nil
}

// commit makes data, written to l at off, durable through the journal
// and returns the epoch its frame went into (0 when it fdatasynced l
// instead). It waits for the flush that covers it.
func (j *journal) commit(name string, l *recordlog.File, off int64, data []byte) (uint64, error) {
	if commitFrameLen(name, data) > j.maxRecord.Load() {
		j.mu.Lock()
		err := j.usable()
		j.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if err := j.syncTooLarge(l); err != nil {
			j.fail(err)
			return 0, err
		}
		return 0, nil
	}
	p := &jpending{name: name, l: l, off: off, data: data}
	err := j.wait(p)
	return p.epoch, err
}

// checkpointNow checkpoints the journal, in turn with the flushes.
func (j *journal) checkpointNow() error {
	return j.wait(&jpending{checkpoint: true})
}

// wait queues p and returns once a leader has flushed it, leading itself
// when no one else is.
func (j *journal) wait(p *jpending) error {
	j.mu.Lock()
	if err := j.usable(); err != nil {
		j.mu.Unlock()
		return err
	}
	j.queue = append(j.queue, p)
	if j.busy {
		p.done = make(chan struct{})
		j.mu.Unlock()
		<-p.done
		if !p.lead {
			return p.err
		}
		j.mu.Lock()
	}
	j.busy = true
	batch := j.queue
	j.queue = nil
	j.mu.Unlock()

	err := j.flush(batch)

	j.mu.Lock()
	j.failLocked(err)
	for _, q := range batch {
		q.err = err
		if q != p {
			close(q.done)
		}
	}
	if len(j.queue) > 0 {
		next := j.queue[0]
		next.lead = true
		close(next.done)
	} else {
		j.busy = false
	}
	j.mu.Unlock()
	return err
}

// syncTooLarge makes a commit too large for a frame durable by fdatasyncing
// its log l (see "Size" above).
func (j *journal) syncTooLarge(l *recordlog.File) error {
	err := j.s.fault(FaultJournalTooLarge)
	if err == nil {
		err = l.Sync()
	}
	if err != nil {
		return fmt.Errorf("fdatasync a log for a commit too large for the journal: %w", err)
	}
	j.tooLarge.Add(1)
	return nil
}

// fail breaks the journal with err, unless err is nil or it is broken
// already: it takes no commits until the store is reopened.
func (j *journal) fail(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.failLocked(err)
}

// failLocked is fail with j.mu held.
func (j *journal) failLocked(err error) {
	if err == nil || j.broken != nil {
		return
	}
	j.broken = fmt.Errorf("%w; the store takes no commits until it is reopened", err)
	j.s.log.Error("the workspace journal failed; commits are refused until the store is reopened", "error", err)
}

func (j *journal) usable() error {
	if j.closed {
		return errClosed
	}
	return j.broken
}

// flush writes the commit frames of batch, as few writes and fdatasyncs
// as the room left allows, and checkpoints when the journal is full or a
// checkpoint was asked for. Only the leader calls it.
func (j *journal) flush(batch []*jpending) error {
	checkpoint, final := false, false
	buf := j.buf[:0]
	var logs []*recordlog.File
	write := func() error {
		if len(buf) == 0 {
			return nil
		}
		buf = appendPad(buf, j.epoch, j.end, j.capacity.Load())
		err := j.s.fault(FaultJournalWrite)
		if err == nil {
			_, err = j.f.WriteAt(buf, j.end)
		}
		if err != nil {
			return fmt.Errorf("write journal %s: %w", j.path, err)
		}
		if err = j.s.fault(FaultJournalSync); err == nil {
			err = j.f.Sync()
		}
		if err != nil {
			return fmt.Errorf("fdatasync journal %s: %w", j.path, err)
		}
		j.flushes.Add(1)
		j.end += int64(len(buf))
		buf = buf[:0]
		j.dmu.Lock()
		for _, l := range logs {
			j.dirty[l] = true
		}
		j.dmu.Unlock()
		logs = logs[:0]
		return nil
	}
	for _, p := range batch {
		if p.checkpoint {
			checkpoint = true
			final = final || p.final
			continue
		}
		if j.end+int64(len(buf))+commitFrameLen(p.name, p.data) > j.capacity.Load() {
			if err := write(); err != nil {
				return err
			}
			if err := j.checkpoint(false); err != nil {
				return err
			}
		}
		buf = appendCommitFrame(buf, j.epoch, p)
		p.epoch = j.epoch
		logs = append(logs, p.l)
		j.journaled.Add(1)
	}
	err := write()
	j.buf = buf[:0]
	if err == nil && checkpoint {
		err = j.checkpoint(final)
	}
	return err
}

// checkpoint fdatasyncs every log with frames in the epoch, then starts a
// new epoch at the journal's start. Only the leader calls it. The final
// checkpoint, close's, labels its epoch version 1 (closeMagic).
func (j *journal) checkpoint(final bool) error {
	j.dmu.Lock()
	defer j.dmu.Unlock()
	for l := range j.dirty {
		if err := l.Sync(); err != nil {
			return fmt.Errorf("journal checkpoint: %w", err)
		}
		delete(j.dirty, l)
	}
	// Not shared with replay's new epoch: the power-cut mutation tests
	// tell the two start frames' syncs apart by the line that asks.
	epoch := newEpoch()
	magic := journalMagic
	if final {
		magic = closeMagic
	}
	if _, err := j.f.WriteAt(startFrame(nil, epoch, magic), 0); err != nil {
		return fmt.Errorf("journal checkpoint: write %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal checkpoint: fdatasync %s: %w", j.path, err)
	}
	j.mu.Lock()
	j.epoch, j.end = epoch, startFrameLen
	j.mu.Unlock()
	j.checkpoints.Add(1)
	return nil
}

// release fdatasyncs l when it has frames in the epoch, before its
// descriptor is closed. A failure leaves the journal broken: its frames
// for l could no longer be retired safely.
func (j *journal) release(l *recordlog.File) {
	j.dmu.Lock()
	defer j.dmu.Unlock()
	if !j.dirty[l] {
		return
	}
	delete(j.dirty, l)
	if err := l.Sync(); err != nil {
		j.mu.Lock()
		if j.broken == nil {
			j.broken = fmt.Errorf("closing a log: %w; the store takes no commits until it is reopened", err)
		}
		j.mu.Unlock()
	}
}

// current returns the epoch frames go into now.
func (j *journal) current() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.epoch
}

// close checkpoints the journal, so a clean reopen replays nothing, and
// closes it; commits after it fail.
func (j *journal) close() error {
	j.stop.Store(true)
	j.growing.Wait()
	err := j.wait(&jpending{checkpoint: true, final: true})
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// abandon stops the journal's growth and closes it, for an Open that
// fails after making it.
func (j *journal) abandon() {
	j.stop.Store(true)
	j.growing.Wait()
	j.f.Close()
}

// retireLocked checkpoints the journal when sf's log has frames in its
// epoch, before the log is removed or replaced (the incarnation rule).
// sf.mu is held.
func (s *Store) retireLocked(sf *sessionFile) error {
	if s.j == nil || sf.jepoch == 0 || sf.jepoch != s.j.current() {
		return nil
	}
	if err := s.j.checkpointNow(); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore: checkpoint the journal")
	}
	sf.jepoch = 0
	return nil
}

// closeLogFile closes l, fdatasyncing it first when the journal holds
// commits of it that are not in a flushed log yet.
func (s *Store) closeLogFile(l *recordlog.File) {
	if s.j != nil {
		s.j.release(l)
	}
	l.Close()
}
