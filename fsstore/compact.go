package fsstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/session"
)

// overGrownLocked reports whether sf's log holds more dead bytes than live
// ones, and at least CompactMinBytes of them. sf.mu is held.
func (s *Store) overGrownLocked(sf *sessionFile) bool {
	live := sf.t.acct.live
	return sf.size > 2*live && sf.size-live >= s.opts.CompactMinBytes
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
	// bgMu is a leaf lock: sf.mu is held here, and s.mu must not be taken
	// under it (Delete takes s.mu, then sf.mu).
	s.bgMu.Lock()
	closed := s.bgClosed
	if !closed {
		s.compactions.Add(1)
	}
	s.bgMu.Unlock()
	if closed {
		return
	}
	sf.compacting = true
	go func() {
		defer s.compactions.Done()
		for {
			err := s.compact(sf)
			if err != nil {
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
	return err
}

// compact writes a fresh log holding the session's current state beside the
// old one, then switches to it. Phase one (read, replay, encode, write,
// fsync) runs without the session lock, so commits and readers go on. Phase
// two, under the lock, copies the commits that landed meanwhile (they are
// complete and self-describing), fsyncs, renames over the old log and
// fsyncs the directory. A reader that opened the old log keeps reading a
// complete log; one that opens after the rename reads the new one.
func (s *Store) compact(sf *sessionFile) error {
	sf.mu.Lock()
	if sf.gone || sf.broken != nil || sf.f == nil {
		sf.mu.Unlock()
		return nil
	}
	final := filepath.Join(s.sessionsDir, sf.name)
	old, err := os.OpenFile(final, os.O_RDONLY|atomicfile.OpenFlags, 0)
	size, gen := sf.size, sf.t.gen
	sf.mu.Unlock()
	if err != nil {
		return err
	}
	defer old.Close()

	data, err := readAll(old, size)
	if err != nil {
		return err
	}
	groups, _, err := scan(data)
	if err != nil {
		return err
	}
	st, err := replayState(groups, 0)
	if err != nil {
		return err
	}
	var fb frameBuf
	fb.buf = append(fb.buf, logMagic[:]...)
	encodeState(&fb, st, gen, groups[len(groups)-1].commit.Time)
	if fb.err != nil {
		return fb.err
	}
	data = nil
	next := newTracker()
	ng, _, err := scan(fb.buf)
	if err != nil || len(ng) != 1 {
		return fmt.Errorf("compacted log does not scan back (%v)", err)
	}
	if err := next.observe(ng[0]); err != nil {
		return err
	}

	tmp := atomicfile.TempName(final)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|atomicfile.OpenFlags, 0o600)
	if err != nil {
		return err
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := s.fault(FaultCompactWrite); err != nil {
		_, _ = f.Write(fb.buf[:len(fb.buf)/2])
		return err
	}
	if _, err := f.Write(fb.buf); err != nil {
		return err
	}
	newSize := int64(len(fb.buf))
	if err := s.syncCompact(f); err != nil {
		return err
	}

	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.gone || sf.broken != nil || sf.f == nil {
		return nil
	}
	if sf.size > size {
		tail := make([]byte, sf.size-size)
		if _, err := sf.f.ReadAt(tail, size); err != nil {
			return err
		}
		tg, end, err := scanRecords(tail, 0, gen)
		if err != nil || end != int64(len(tail)) {
			return fmt.Errorf("commits since compaction began do not scan (%v)", err)
		}
		for _, g := range tg {
			if err := next.observe(g); err != nil {
				return err
			}
		}
		if _, err := f.WriteAt(tail, newSize); err != nil {
			return err
		}
		newSize += int64(len(tail))
		if err := s.syncCompact(f); err != nil {
			return err
		}
	}
	err = s.fault(FaultCompactRename)
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		return err
	}
	keep = true
	sf.f.Close()
	sf.f, sf.size, sf.t = f, newSize, next
	err = s.fault(FaultCompactAfterRename)
	if err == nil {
		err = atomicfile.SyncDir(s.sessionsDir)
	}
	if err != nil {
		// The new log is complete and in place, but its name may not be
		// durable; appending to it could lose acknowledged commits if the
		// old name came back after a crash.
		sf.broken = fmt.Errorf("directory sync after compaction failed (%v); reopen the store", err)
		return sf.broken
	}
	s.compactionsDone.Add(1)
	return nil
}

func (s *Store) syncCompact(f *os.File) error {
	err := s.fault(FaultCompactSync)
	if err == nil {
		err = f.Sync()
	}
	return err
}
