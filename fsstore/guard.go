package fsstore

import (
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/session"
)

// checkLock fails with session.CodeLocked once the store's writer lock is
// lost (dirlock.Lock.Check): its .cairn, sessions or workflows directory
// was renamed or removed and another made in its place, where a second
// writer could lock it. It is called before every write that names a path
// (so none lands in a directory another writer may own) and after every
// write it acknowledges (so none is acknowledged that may have); op names
// the operation. The check is a few stat calls, or one read(2) while
// nothing has changed (dirlock's watch).
//
// The code is locked, not unavailable: the store, not the daemon, lost its
// claim; unavailable tells a client to reconnect and retry, which would
// only meet the same refusal, and embedded stores have no daemon at all.
func (s *Store) checkLock(op string) error {
	if err := s.lock.Check(); err != nil {
		return session.Wrap(session.CodeLocked, err, "%s", op)
	}
	return nil
}

// checkLockOn is checkLock for an operation on path, worded "verb path";
// the words are joined only when the check fails (it runs after every
// append).
func (s *Store) checkLockOn(verb, path string) error {
	if err := s.lock.Check(); err != nil {
		return session.Wrap(session.CodeLocked, err, "%s %s", verb, path)
	}
	return nil
}

// checkLogFile fails when the path of the open log l no longer names the
// file l appends to (it was removed or replaced under the store): commits
// appended to it would be acknowledged and then missing after a restart.
// It asks for the file's identity, not its times (vfs.SameFileAt), so
// that the append after it does not change the log's inode.
//
// With the writer lock's watch (dirlock's Epoch; the store on the real
// filesystem) the stat is skipped while the epoch is the one the last stat
// that passed was made at: no name in the sessions directory (or above it)
// has changed since.
func (s *Store) checkLogFile(l *recordlog.File) error {
	var epoch uint64
	watched := false
	if s.fs == vfs.OS {
		if epoch, watched = s.lock.Epoch(); watched && l.NamedAt() == epoch {
			return nil
		}
	}
	fi, err := l.Ident()
	if err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore: stat log %s", l.Path())
	}
	same, err := vfs.SameFileAt(s.fs, l.Path(), fi)
	if err != nil || !same {
		return session.Errorf(session.CodeInternal,
			"fsstore: log %s was removed or replaced while the store had it open; it takes no commits, which would be lost, until the store is reopened", l.Path())
	}
	if watched {
		l.SetNamedAt(epoch)
	}
	return nil
}
