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
// path crash-safely (recordlog.Create), with the create.* fault points.
func (s *Store) createLog(path string, data []byte) (*recordlog.File, error) {
	return recordlog.CreateFS(s.fs, path, data, s.faultAt("create."))
}

// appendCommit appends one framed commit to l and makes it durable
// (recordlog.File.Append), with the commit.* fault points. broken reports
// that a failed append could not be rolled back: l must not be written
// again until the store is reopened.
func (s *Store) appendCommit(l *recordlog.File, data []byte) (broken bool, err error) {
	return l.Append(data, s.faultAt("commit."))
}
