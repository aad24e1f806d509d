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
	if err := s.checkLock("create " + path); err != nil {
		return nil, err
	}
	l, err := recordlog.CreateFS(s.fs, path, data, s.faultAt("create."))
	if err == nil {
		if err = s.checkLock("create " + path); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, err
}

// appendCommit appends one framed commit to l and makes it durable
// (recordlog.File.Append), with the commit.* fault points. broken reports
// that a failed append could not be rolled back: l must not be written
// again until a rollback succeeds (healSession, healWorkflow). The writer lock and the log's
// identity are checked before, and the lock again after (checkLock).
func (s *Store) appendCommit(l *recordlog.File, data []byte) (broken bool, err error) {
	if err := s.checkLock("append to " + l.Path()); err != nil {
		return false, err
	}
	if err := s.checkLogFile(l); err != nil {
		return false, err
	}
	if broken, err = l.Append(data, s.faultAt("commit.")); err != nil {
		return broken, err
	}
	return false, s.checkLock("append to " + l.Path())
}
