package fsstore

import (
	"fmt"
	"path/filepath"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// FaultCommitRollback is the fault point before a failed commit's rollback
// (recordlog.StepRollback), and before each later attempt to heal the log
// (healSession, healWorkflow). It is not in FaultPoints: it is reached
// only after another point has failed.
const FaultCommitRollback = "commit." + recordlog.StepRollback

// healSession runs before a commit to a session whose log is broken
// (sf.broken): an append that could not be rolled back, a summary that
// failed, or a compaction whose directory sync failed. The cause may be
// gone (a full disk has room again, a transient I/O error passed), so it
// tries again what failed: cut the log back to its committed size and
// fdatasync it, fsync the directory (a compacted log's new name), and
// re-index the log from disk (a summary that went wrong). If all of that
// works the session takes commits again without a reopen; if not, the
// error says why, and the next commit tries again. sf.mu is held.
func (s *Store) healSession(sf *sessionFile) error {
	if sf.broken == nil {
		return nil
	}
	err := s.healLog(sf)
	if err != nil {
		return fmt.Errorf("%w; repairing it failed too: %w", sf.broken, err)
	}
	s.log.Info("session log repaired; taking commits again", "path", sf.path, "was", sf.broken)
	sf.broken = nil
	return nil
}

func (s *Store) healLog(sf *sessionFile) error {
	l, err := s.logFor(sf)
	if err != nil {
		return err
	}
	if l.Size() != sf.size {
		return fmt.Errorf("%s: open at %d bytes, committed %d", sf.path, l.Size(), sf.size)
	}
	if err := l.Rollback(s.faultAt("commit.")); err != nil {
		return err
	}
	if err := s.fs.SyncDir(s.sessionsDir); err != nil {
		return err
	}
	t, asm, err := walkIndex(l, sf.size)
	switch {
	case err != nil:
		return err
	case asm.err != nil:
		return asm.err
	case asm.valid != sf.size || t.gen < sf.t.gen:
		return fmt.Errorf("%s reads back to generation %d at %d of %d bytes, not generation %d", sf.path, t.gen, asm.valid, sf.size, sf.t.gen)
	}
	t.trim()
	sf.t = t
	s.runs.drop()
	return nil
}

// healWorkflow is healSession for a workflow whose step could not be
// rolled back: its content in memory is the committed one, so cutting the
// log back to its committed size is all it takes. wf.mu is held.
func (s *Store) healWorkflow(wf *workflowFile) error {
	if wf.broken == nil {
		return nil
	}
	path := filepath.Join(s.flowsDir, wf.name)
	l, err := recordlog.OpenAtFS(s.fs, path, wf.size)
	if err == nil {
		err = l.Rollback(s.faultAt("commit."))
		l.Close()
	}
	if err != nil {
		return fmt.Errorf("%w; repairing it failed too: %w", wf.broken, err)
	}
	s.log.Info("workflow log repaired; taking steps again", "path", path, "was", wf.broken)
	wf.broken = nil
	return nil
}

// brokenErr is the error of a write to a log that is broken and could not
// be repaired.
func brokenErr(err error, op, kind, id string) error {
	return session.Wrap(session.CodeInternal, err, "%s: %s %q", op, kind, id)
}
