package fsstore

import (
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/recordlog"
)

// Fault points name the steps of a commit, a file creation and a compaction,
// so tests can fail or stop each one (Options.Fault). At a point named for a
// step ("commit.write", "commit.sync", "create.rename", ...) a non-nil error
// from the hook makes that step fail as if the system call had: a failing
// write leaves part of its bytes behind, a failing sync or rename does not
// happen. At an "after-" point the hook is where a test stops the process;
// an error returned there fails the operation like a late I/O error.
const (
	FaultCommitWrite      = "commit." + recordlog.StepWrite
	FaultCommitAfterWrite = "commit." + recordlog.StepAfterWrite
	FaultCommitSync       = "commit." + recordlog.StepSync
	FaultCommitAfterSync  = "commit." + recordlog.StepAfterSync

	FaultCreateWrite       = "create." + atomicfile.StepWrite
	FaultCreateSync        = "create." + atomicfile.StepSync
	FaultCreateRename      = "create." + atomicfile.StepRename
	FaultCreateAfterRename = "create." + atomicfile.StepAfterRename

	FaultCompactWrite       = "compact." + atomicfile.StepWrite
	FaultCompactSync        = "compact." + atomicfile.StepSync
	FaultCompactRename      = "compact." + atomicfile.StepRename
	FaultCompactAfterRename = "compact." + atomicfile.StepAfterRename
)

// Fault points of the workspace journal's flush (Options.JournalBytes),
// which FaultPoints leaves out: a store without a journal never reaches
// them.
const (
	FaultJournalWrite = "journal." + recordlog.StepWrite
	FaultJournalSync  = "journal." + recordlog.StepSync
	// FaultJournalTooLarge is the fdatasync of a commit's own log in place
	// of a journal frame, for a commit too large for one.
	FaultJournalTooLarge = "journal.too-large.sync"
)

// FaultPoints lists every fault point in the order a first commit, a later
// commit and a compaction reach them.
var FaultPoints = []string{
	FaultCreateWrite, FaultCreateSync, FaultCreateRename, FaultCreateAfterRename,
	FaultCommitWrite, FaultCommitAfterWrite, FaultCommitSync, FaultCommitAfterSync,
	FaultCompactWrite, FaultCompactSync, FaultCompactRename, FaultCompactAfterRename,
}

// faultAt returns the hook recordlog and atomicfile call at each step, which
// reports the step to Options.Fault as the fault point prefix+step; nil
// when there is no Fault hook.
func (s *Store) faultAt(prefix string) func(step string) error {
	if s.opts.Fault == nil {
		return nil
	}
	return func(step string) error { return s.opts.Fault(prefix + step) }
}

// fault calls the hook at point, when there is one.
func (s *Store) fault(point string) error {
	if s.opts.Fault == nil {
		return nil
	}
	return s.opts.Fault(point)
}
