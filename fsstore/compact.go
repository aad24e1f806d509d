package fsstore

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// overGrownLocked reports whether sf's log holds more dead bytes than live
// ones, and at least CompactMinBytes of them. sf.mu is held.
func (s *Store) overGrownLocked(sf *sessionFile) bool {
	live, size := sf.t.acct.live, sf.log.Size()
	return size > 2*live && size-live >= s.opts.CompactMinBytes
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
	if sf.gone || sf.broken != nil || sf.log == nil {
		sf.mu.Unlock()
		return nil
	}
	final := sf.log.Path()
	size, gen := sf.log.Size(), sf.t.gen
	r, err := sf.log.OpenReader()
	sf.mu.Unlock()
	if err != nil {
		return err
	}
	data, err := r.ReadAll()
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
	fb.buf = append(fb.buf, logMagic...)
	encodeState(&fb, st, gen, groups[len(groups)-1].commit.Time)
	if fb.err != nil {
		return fb.err
	}
	data = nil
	next := newTracker()
	ng, _, err := scan(fb.buf)
	if err != nil || len(ng) != 1 {
		return fmt.Errorf("compacted log of %s does not scan back (%d commits): %w", final, len(ng), err)
	}
	if err := next.observe(ng[0]); err != nil {
		return err
	}

	tmp, err := atomicfile.NewTemp(final, 0o600, s.faultAt("compact."))
	if err != nil {
		return err
	}
	defer tmp.Abort()
	if err := tmp.WriteAt(fb.buf, 0); err != nil {
		return err
	}
	newSize := int64(len(fb.buf))
	if err := tmp.Sync(); err != nil {
		return err
	}

	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.gone || sf.broken != nil || sf.log == nil {
		return nil
	}
	if cur := sf.log.Size(); cur > size {
		tail := make([]byte, cur-size)
		if _, err := sf.log.ReadAt(tail, size); err != nil {
			return fmt.Errorf("read %s: %w", final, err)
		}
		tg, end, err := scanRecords(tail, 0, gen)
		if err != nil || end != int64(len(tail)) {
			return fmt.Errorf("commits to %s since compaction began do not scan (%d bytes of %d): %w", final, end, len(tail), err)
		}
		for _, g := range tg {
			if err := next.observe(g); err != nil {
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
	f, err := tmp.Commit()
	if f == nil {
		return err
	}
	sf.log.Close()
	sf.log, sf.t = recordlog.Adopt(f, final, newSize), next
	if err != nil {
		// The new log is complete and in place, but its name may not be
		// durable; appending to it could lose acknowledged commits if the
		// old name came back after a crash.
		sf.broken = fmt.Errorf("compaction of %s: reopen the store: %w", final, err)
		return sf.broken
	}
	s.compactionsDone.Add(1)
	return nil
}
