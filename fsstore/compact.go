package fsstore

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// overGrownLocked reports whether sf's log holds more dead bytes than live
// ones, and at least CompactMinBytes of them. The live count leaves out
// framing, so the framing a compacted log turned out to need (overhead) is
// not counted as dead: otherwise a small log just compacted could look
// overgrown and be compacted again and again. sf.mu is held.
func (s *Store) overGrownLocked(sf *sessionFile) bool {
	live, dead := sf.t.live, sf.size-sf.t.live-sf.overhead
	return dead > live && dead >= s.opts.CompactMinBytes
}

// startBackground counts a background job (compaction, index checkpoint)
// that Close waits for, and reports false once Close has begun. bgMu is a
// leaf lock: callers hold sf.mu, under which s.mu must not be taken
// (Delete takes s.mu, then sf.mu).
func (s *Store) startBackground() bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgClosed {
		return false
	}
	s.compactions.Add(1)
	return true
}

// maybeCompactLocked starts a background compaction of sf when its log has
// overgrown. sf.mu is held.
//
// Commits go on while a compaction runs, and the ones that land meanwhile
// are copied into the new log, so it can come out overgrown already; the
// compaction then runs again, until the log is within bounds, a
// compaction fails, or the session is gone. Once commits pause the loop
// ends within bounds, so the bound holds then, Close included (Close waits
// for the loop; a closed store takes no commits). While commits outpace
// it, it keeps running, as a retrigger by each commit would.
func (s *Store) maybeCompactLocked(sf *sessionFile) {
	if sf.compacting || !s.overGrownLocked(sf) {
		return
	}
	if !s.startBackground() {
		return
	}
	sf.compacting = true
	go func() {
		defer s.compactions.Done()
		for {
			err := s.compact(sf)
			if err != nil {
				err = session.FileError(err, sf.path, "fsstore: compaction")
				s.log.Warn("compaction failed; the old log stays in use", "session_file", sf.name, "error", err)
			}
			sf.mu.Lock()
			again := err == nil && !sf.gone && sf.broken == nil && s.overGrownLocked(sf)
			sf.compacting = again
			sf.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// Compact rewrites the session's log now, whatever its dead-byte ratio, and
// returns when the compacted log is in place. History before the current
// generation is gone afterwards.
func (s *Store) Compact(ctx context.Context, id string) error {
	sf, err := s.lockSession(id)
	if err != nil {
		return err
	}
	if sf.compacting {
		sf.mu.Unlock()
		return session.Errorf(session.CodeConflict, "session %q is being compacted", id)
	}
	sf.compacting = true
	sf.mu.Unlock()
	err = s.compact(sf)
	sf.mu.Lock()
	sf.compacting = false
	sf.mu.Unlock()
	return session.FileError(err, sf.path, "fsstore.Compact: session %q", id)
}

// compact writes a fresh log holding the session's current state beside the
// old one, then switches to it. Phase one (copy the live records the index
// names, fsync) runs on a copy of the index without the session lock, so
// commits and readers go on; it reads and writes a bounded amount at a
// time. Phase two, under the lock, copies the commits that landed meanwhile
// (they are complete and self-describing), fsyncs, renames over the old log
// and fsyncs the directory. A reader that opened the old log keeps reading
// a complete log; one that opens after the rename reads the new one.
func (s *Store) compact(sf *sessionFile) error {
	if err := s.checkLock("fsstore: compaction"); err != nil {
		return err
	}
	sf.mu.Lock()
	if sf.gone || sf.broken != nil || sf.t.gen == 0 {
		sf.mu.Unlock()
		return nil
	}
	final := sf.path
	size, gen, updated := sf.size, sf.t.gen, sf.t.updated
	snap := sf.t.clone()
	r, err := recordlog.OpenReaderAtFS(s.fs, final, size)
	sf.mu.Unlock()
	if err != nil {
		return err
	}
	defer r.Close()

	tmp, err := atomicfile.NewTempFS(s.fs, final, 0o600, s.faultAt("compact."))
	if err != nil {
		return err
	}
	defer tmp.Abort()
	newSize, err := writeLog(tmp, frameReader{r: r, path: final}, snap, snap.sessionID, true, nil, gen, updated)
	if err != nil {
		return err
	}
	next, err := indexOf(tmp, newSize)
	if err != nil {
		return fmt.Errorf("compacted log of %s: %w", final, err)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}

	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.gone || sf.broken != nil || sf.t.gen == 0 {
		return nil
	}
	// The framing the compacted state needs, before the commits that
	// landed meanwhile (whose superseded records are dead, not framing).
	overhead := max(newSize-next.live, 0)
	if cur := sf.size; cur > size {
		l, err := s.logFor(sf)
		if err != nil {
			return err
		}
		tail := make([]byte, cur-size)
		if _, err := l.ReadAt(tail, size); err != nil {
			return fmt.Errorf("read %s: %w", final, err)
		}
		tg, end, err := scanRecords(tail, 0, gen)
		if err != nil || end != int64(len(tail)) {
			return fmt.Errorf("commits to %s since compaction began do not scan (%d bytes of %d): %w", final, end, len(tail), err)
		}
		for _, g := range tg {
			if err := next.observe(g, newSize); err != nil {
				return err
			}
		}
		if err := tmp.WriteAt(tail, newSize); err != nil {
			return err
		}
		newSize += int64(len(tail))
		if err := tmp.Sync(); err != nil {
			return err
		}
	}
	if err := s.checkLock("fsstore: compaction"); err != nil {
		return err
	}
	if err := s.retireLocked(sf); err != nil {
		return err
	}
	f, err := tmp.Commit()
	if f == nil {
		return err
	}
	s.closeLog(sf)
	s.adoptLog(sf, recordlog.Adopt(f, final, newSize))
	sf.size, sf.t, sf.overhead = newSize, next, overhead
	sf.idxAt = -1 // the checkpoint, if any, describes the old log
	if err != nil {
		// The new log is complete and in place, but its name may not be
		// durable; appending to it could lose acknowledged commits if the
		// old name came back after a crash.
		sf.broken = fmt.Errorf("compaction of %s: the next commit syncs the directory again: %w", final, err)
		return sf.broken
	}
	s.checkpointLocked(sf)
	s.compactionsDone.Add(1)
	return nil
}

// writeLog writes to tmp a new log holding, as one commit of generation
// gen, the latest state of the session t indexes (read through fr) under
// id, with then (a delta, may be nil) applied after it, and returns its
// size. withCheckpoints keeps the run checkpoints and which generation
// added what (compaction); without, it is a copy (Store.Copy).
func writeLog(tmp *atomicfile.Temp, fr frameReader, t *tracker, id string, withCheckpoints bool, then *session.Change, gen uint64, at time.Time) (int64, error) {
	var off int64
	write := func(p []byte) error {
		if err := tmp.WriteAt(p, off); err != nil {
			return err
		}
		off += int64(len(p))
		return nil
	}
	var fb frameBuf
	fb.buf = append(fb.buf, logMagic...)
	fb.begin()
	created := t.created
	if !withCheckpoints {
		created = at // a copy is created when it is made
	}
	if err := writeLive(&fb, write, fr, t, id, created, withCheckpoints); err != nil {
		return 0, err
	}
	if then != nil {
		encodeDelta(&fb, then)
	}
	fb.commit(gen, at)
	fb.flush(write)
	return off, fb.err
}

// walkIndex indexes the log in the first size bytes of r, read in bounded
// chunks: artifact data is checksummed as it streams past, never held, and
// a pending commit holds parsed records, not payloads. The assembler says
// where the complete commits end (valid) and why the walk stopped (err);
// the error returned is a read error.
func walkIndex(r io.ReaderAt, size int64) (*tracker, *assembler, error) {
	t := newTracker()
	asm := &assembler{valid: int64(len(logMagic)), parse: true, onGroup: func(g commitGroup) error { return t.observe(g, 0) }}
	// parse: the assembler keeps nothing of a payload (parseRecord decodes
	// copies), as Walk, which reads every payload into one buffer, needs.
	_, err := recordlog.Walk(r, int64(len(logMagic)), size, func(kind byte) bool { return kind != kindBlob }, asm.add)
	return t, asm, err
}

// indexOf reads back a log just written (size bytes of r) and indexes it.
func indexOf(r io.ReaderAt, size int64) (*tracker, error) {
	t, asm, err := walkIndex(r, size)
	if err != nil {
		return nil, err
	}
	if asm.err != nil {
		return nil, asm.err
	}
	if asm.valid != size || t.gen == 0 {
		return nil, fmt.Errorf("does not read back (%d of %d bytes valid)", asm.valid, size)
	}
	return t, nil
}
