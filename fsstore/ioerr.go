package fsstore

import "github.com/cairn-dev/cairn/session"

// writeError is the error of a failed write to the log at path, op naming
// the operation and the session or workflow: session.FileError (no_space
// for a full file system, a plain message naming the log, never a temp
// file), unless the failed append could not be rolled back (broken). Then
// the log takes no more writes until the store is reopened, which freeing
// space does not change, so it stays internal and says so.
func writeError(err error, broken bool, path, op string, args ...any) error {
	if broken && session.CodeOf(err) == session.CodeInternal {
		return session.Wrap(session.CodeInternal, err, op, args...)
	}
	return session.FileError(err, path, op, args...)
}
