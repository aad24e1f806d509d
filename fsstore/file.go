package fsstore

import (
	"errors"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// ensureDir makes dir a real 0700 directory (atomicfile.EnsureDir); a
// symlink or other file in its place is invalid_argument.
func (s *Store) ensureDir(dir string) error {
	err := atomicfile.EnsureDirFS(s.fs, dir)
	if errors.Is(err, atomicfile.ErrNotDir) {
		return session.Wrap(session.CodeInvalidArgument, err, "fsstore: the store refuses links out of .cairn")
	}
	return err
}

// createLog writes data (the magic and the first commit) to a new log at
// path crash-safely (recordlog.Create), with the create.* fault points,
// checking the writer lock before and after (checkLock).
func (s *Store) createLog(path string, data []byte) (*recordlog.File, error) {
	if err := s.checkLockOn("create", path); err != nil {
		return nil, err
	}
	l, err := recordlog.CreateFS(s.fs, path, data, s.faultAt("create."))
	if err == nil {
		if err = s.checkLockOn("create", path); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, err
}

// appendCommit appends one framed commit to l and makes it durable
// (recordlog.File.Append), with the commit.* fault points. broken reports
// that a failed append could not be rolled back: l must not be written
// again until a rollback succeeds (healSession, healWorkflow). The log's
// identity is checked before and the writer lock after (checkLock): an
// append goes through l's descriptor, not a path, so it cannot land in a
// directory another writer locked, and a lock lost at any time before the
// check after the sync means the commit is not acknowledged.
//
// journal, when not empty, is the session log's file name: with the
// workspace journal on, the commit is made durable by it (journal.go)
// instead of by the log's own fdatasync, and epoch is the journal epoch
// it went into (0: the log was fdatasynced).
func (s *Store) appendCommit(l *recordlog.File, data []byte, journal string) (broken bool, epoch uint64, err error) {
	if err := s.checkLogFile(l); err != nil {
		// A log replaced under the store most often means its directory
		// was: then the lost lock is the reason to give.
		if lerr := s.checkLockOn("append to", l.Path()); lerr != nil {
			return false, 0, lerr
		}
		return false, 0, err
	}
	var durable func(off int64) error
	if s.j != nil && journal != "" {
		durable = func(off int64) (err error) {
			epoch, err = s.j.commit(journal, l, off, data)
			return err
		}
	}
	if broken, err = l.AppendWith(data, s.faultAt("commit."), durable); err != nil {
		return broken, 0, err
	}
	return false, epoch, s.checkLockOn("append to", l.Path())
}
