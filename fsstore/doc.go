// Package fsstore is the file-backed session.Store. It keeps everything
// under <workspace>/.cairn/ and guarantees:
//
//   - An acknowledged commit is durable: Commit returns only after the bytes
//     of the commit and its commit record are written and fdatasync'd, in
//     its log or, with the workspace journal on, in the journal (and, for a
//     new session, the file is renamed into place and the directory
//     fsync'd).
//   - A commit is atomic: a reader sees generation N or N+1, never a mix,
//     and after a crash at any instant the store reopens at the last
//     acknowledged generation or later, with no torn data.
//   - A commit costs work in proportion to what it adds: a delta is one
//     append of its new bytes (plus a small fixed overhead for framing and
//     the commit record) and one fdatasync, whatever the session's size.
//   - The on-disk size of a session stays within about 2x its live data:
//     a background compaction rewrites a log whose superseded records
//     outweigh the live ones, beside the old log, and switches atomically
//     (rename, then directory fsync). Readers are never blocked for the
//     duration of a compaction and always find one complete log.
//
// Zeros ahead (prealloc.go; on when Options.PreallocBytes is set, as
// cairnd and the embedded library set it). A commit that grows its file
// makes ext4's fdatasync commit the journal (the new size and block map);
// one that overwrites blocks already written and synced flushes data only.
// So a session log whose zeros ahead cannot hold the next commit first
// gets zeros written and fdatasync'd past its end, up to that commit plus
// min(size/2, 1 MiB), rounded to 4 KiB; that commit and the following ones
// are pwrites at the committed size into them. The zeros are bounded
// workspace-wide, never a segment per session: they count against one
// budget (DefaultPreallocBytes, 32 MiB), taken back from the least
// recently used open logs when a log needs room, and trimmed (ftruncate)
// when a log is closed (open-log LRU eviction, compaction's switch,
// Close), so a workspace stays within twice its live data plus the budget
// and the block rounding of each file. A session's first commit and
// workflow logs write none ahead: a session committed once costs no
// zeros. The commit that runs out pays for the zeros (a write and an
// fdatasync before its own), the next ones until they run out do not; as
// a log grows, so does the run. The logical end of a log is the end of its
// last intact commit, never the file's size: appends, reads, compaction's
// live/dead accounting, Verify, export and Summary.SizeBytes all use the
// committed size the index keeps. No guarantee rests on the zeros: their
// fdatasync is a vfs.File.Presync, which the power-cut tests cut at but do
// not require.
//
// The workspace journal (journal.go; on when Options.JournalBytes is set,
// as cairnd sets it). Concurrent commits to different sessions share one
// write and one fdatasync: each commit writes its bytes to its own log
// without a flush and queues them for the journal, one preallocated file
// per workspace (sessions/journal); one committer at a time writes every
// commit queued since the last flush to it with one pwrite and one
// fdatasync, and acknowledges each. A session log still holds every byte
// of its commits and reads on its own; the journal is read only by Open,
// which, before it reads any log and whatever its options, writes each
// commit the journal holds into its log where the log lacks it, fdatasyncs
// those logs and starts a new epoch. Before the journal is written over
// (when full, at Close), every log it covers is fdatasynced; before a log
// it covers is removed or replaced (delete, compaction, repair), the same
// checkpoint runs, so no frame is ever replayed into another file under
// the same name; a log is fdatasynced before its descriptor is closed. A
// journal that fails to write or sync takes no commits until the store is
// reopened. A commit larger than a quarter of the journal fdatasyncs its
// own log. A new journal starts at 1 MiB and grows to its size in the
// background. The power-cut workload runs with it too
// (TestPowerCutJournal and its mutation test), with a replay of its own
// (TestJournalReplayPowerCut) and concurrent committers cut while they run
// (TestJournalGroupCommitPowerCut).
//
// Layout (the names are internal/layout's):
//
//	.cairn/                 0700, with a .gitignore of "*"; flock'd itself by
//	                        the one writer process (internal/dirlock)
//	  LOCK                  flock'd by that writer too; holds its pid
//	  sessions/<name>.log   one append-only record log per session
//	  sessions/<name>.idx   the index checkpoint of a session log of at least
//	                        Options.IndexCheckpointBytes (checkpoint.go)
//	  sessions/journal      the workspace journal (journal.go), when one was used
//	  workflows/<name>.log  one append-only record log per workflow
//	  quarantine/           damaged logs and trimmed torn tails, kept, never read
//
// Each log starts with an 8-byte magic and holds records framed by
// internal/recordlog as
// [u32 payload length][u32 CRC-32C of kind+payload][u8 kind][payload], the
// payload CBOR. New logs and compacted logs are written through
// internal/atomicfile; errors name the log's own path, never a temp file.
// A write the file system refuses is classified by session.FileError
// (ioerr.go): a full file system, a spent quota or a file size limit
// (ENOSPC, EDQUOT, EFBIG) is session.ErrNoSpace, a read-only file system or
// a permission problem is internal with a message saying which. The failed
// write leaves nothing behind (the append is truncated back, the temp file
// removed), and the next write succeeds once space is freed, without a
// reopen. A commit is a run of item records closed by a commit record
// that carries the generation, the record count and the byte length of the
// commit; recovery keeps everything up to the last valid commit record.
// Bytes after it that are all zero are a clean end (zeros written ahead,
// or a size a crash extended before the data reached the disk): they are
// cut off, not quarantined, not reported. No frame is all zeros (a zero
// length and kind checksum to CRC-32C of one zero byte, not 0), so the
// scan stops at them like at any bad frame. A torn tail after it (no
// intact commit record follows, zeros or not) is copied to
// quarantine/ and trimmed; damage with an intact later commit after it is
// never trimmed: the log is kept as it is and its session is refused with
// code corrupt until Repair (see damage.go). Ids are mapped to file names that cannot escape the store
// (see names.go). Loop checkpoints are records in their session's log,
// written in the same commit as the messages of their turn, so deleting a
// session deletes them; workflows owned by a session are deleted with it.
//
// Open walks each session log from its index checkpoint, when it has one
// that checks (checksum, version, and the log's bytes at the end of the
// prefix it covers), else from the start: it reads the log's tail after
// the checkpoint, where a crash can tear, never the history before it, so
// opening costs the number of sessions and the size of their indexes, not
// their bytes. A checkpoint is an optimisation, written without fsync and
// never trusted: any doubt means a full walk (see checkpoint.go).
//
// The in-memory index (index.go) is built at open by parsing each record,
// and advanced after each commit from what the encoder kept of each record
// as it framed it (indexValue), not by parsing the commit back; the two
// are checked to agree (TestCommitIndexEqualsReplay). The run, checkpoint
// (up to 1 KiB of state) and manifest reference records of a session's
// last commit are kept decoded (tracker.memo), and so is every run's
// record once written or read (tracker.runVals): Head answers them from
// there rather than from the log.
//
// The store also keeps which session records each run id (runindex.go),
// built by one look through every session on the first lookup and kept by
// the commits, so FindRun, CheckpointSession and Checkpoint look at one
// session; only an id's absence is trusted, and any doubt (a stale guess,
// an id two sessions record, a scan a heal, repair or copy raced) means a
// look through every session, as before.
//
// Every file operation goes through Options.FS (internal/vfs), the writer's
// LOCK excepted. The power-cut tests (powercut_test.go) run a workload on
// internal/vfs/crashfs, which models what a power cut keeps, cut the power
// before every sync and check each image against what was acknowledged;
// their mutation test removes each sync in turn and requires a cut to fail,
// so every fdatasync and directory fsync here is one the guarantees need.
//
// Caveats, stated plainly: durability relies on the file system honouring
// fdatasync and on rename(2) being atomic (true for ext4 and xfs on Linux).
// After a failed fdatasync the store truncates the unacknowledged bytes
// (the next commit's fdatasync makes that durable; a crash before it may
// bring the failed commit back whole, or torn, which recovery trims); if
// the truncate fails the session (or workflow) refuses commits, rather
// than guess what reached the disk, until a later commit manages the
// truncate (and re-reads the log's index from disk): no reopen is needed
// once the cause is gone. History
// (Load at an older generation) reaches back only to the last compaction.
//
// The writer lock cannot be lost silently: deleting LOCK does not free the
// store (the directory is the lock, and the writer puts LOCK back), and
// before every write it acknowledges, and again after a commit's sync, the
// writer checks that .cairn, sessions/ and workflows/ are still the
// directories it locked (four stat calls: .cairn by its path, then
// sessions, workflows and LOCK by name in the directory it locked; on
// Linux one read(2) of an inotify watch of them while nothing changed
// there, see dirlock.Lock.Watch). If one was
// renamed or removed and another made in its place, where a second writer
// could lock it, the store refuses every write from then on with code
// locked, logs it once, and must be reopened. A session log removed or
// replaced under the store refuses commits (internal) rather than take
// commits that would vanish at the next open.
package fsstore
