package fsstore

// Fault points name the steps of a commit, a file creation and a compaction,
// so tests can fail or stop each one (Options.Fault). At a point named for a
// step ("commit.write", "commit.sync", "create.rename", ...) a non-nil error
// from the hook makes that step fail as if the system call had: a failing
// write leaves part of its bytes behind, a failing sync or rename does not
// happen. At an "after-" point the hook is where a test stops the process;
// an error returned there fails the operation like a late I/O error.
const (
	FaultCommitWrite      = "commit.write"
	FaultCommitAfterWrite = "commit.after-write"
	FaultCommitSync       = "commit.sync"
	FaultCommitAfterSync  = "commit.after-sync"

	FaultCreateWrite       = "create.write"
	FaultCreateSync        = "create.sync"
	FaultCreateRename      = "create.rename"
	FaultCreateAfterRename = "create.after-rename"

	FaultCompactWrite       = "compact.write"
	FaultCompactSync        = "compact.sync"
	FaultCompactRename      = "compact.rename"
	FaultCompactAfterRename = "compact.after-rename"
)

// FaultPoints lists every fault point in the order a first commit, a later
// commit and a compaction reach them.
var FaultPoints = []string{
	FaultCreateWrite, FaultCreateSync, FaultCreateRename, FaultCreateAfterRename,
	FaultCommitWrite, FaultCommitAfterWrite, FaultCommitSync, FaultCommitAfterSync,
	FaultCompactWrite, FaultCompactSync, FaultCompactRename, FaultCompactAfterRename,
}

func (s *Store) fault(point string) error {
	if s.opts.Fault == nil {
		return nil
	}
	return s.opts.Fault(point)
}
