package fsstore

import (
	"container/list"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/dirlock"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/vfs"
	"github.com/cairn-dev/cairn/session"
)

// DefaultMaxCommitBytes is the default limit on the encoded size of one
// commit.
const DefaultMaxCommitBytes = 64 << 20

// DefaultMaxSessionBytes is the default limit on a session's live bytes.
const DefaultMaxSessionBytes = 4 << 30

// DefaultCompactMinBytes is the default amount of dead bytes a log must hold
// before compaction rewrites it.
const DefaultCompactMinBytes = 64 << 10

// Options configure a Store. The zero value is valid.
type Options struct {
	// MaxCommitBytes limits the encoded size of one commit; larger commits
	// fail with session.ErrTooLarge. 0 means DefaultMaxCommitBytes.
	MaxCommitBytes int64
	// MaxSessionBytes limits a session's live bytes (Summary.LiveBytes): a
	// commit that would take a session past it fails with
	// session.ErrTooLarge, so no session grows past what can be read
	// back. 0 means DefaultMaxSessionBytes.
	MaxSessionBytes int64
	// MaxOpenLogs bounds how many session logs are open at once; the least
	// recently used are closed and reopened when needed. 0 means a
	// quarter of the process's open-file limit, at least 16 and at most
	// 1024.
	MaxOpenLogs int
	// CompactMinBytes is how many dead bytes a log must hold, besides
	// outweighing its live bytes, before it is compacted. 0 means
	// DefaultCompactMinBytes.
	CompactMinBytes int64
	// PreallocBytes bounds the zeros written ahead of the ends of all
	// session logs together (see prealloc.go); DefaultPreallocBytes is
	// the value to use. 0 or less writes none ahead.
	PreallocBytes int64
	// JournalBytes, when set, turns on the workspace journal (journal.go)
	// with a journal of this size: concurrent commits to different
	// sessions share its write and fdatasync instead of each
	// fdatasyncing its own log. DefaultJournalBytes is the value to use;
	// 0 or less commits without one. An Open replays a journal left
	// behind whatever this says.
	JournalBytes int64
	// Fault, when set, is called at each fault point (see FaultPoints).
	Fault func(point string) error
	// Logger receives warnings about recovery and compaction. Default: none.
	Logger hclog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// IndexCheckpointBytes is how large a session log must be before it
	// keeps an index checkpoint, so that Open reads the checkpoint and
	// walks only the log's tail instead of the whole log (checkpoint.go).
	// 0 means DefaultIndexCheckpointBytes; a negative value turns
	// checkpoints off (none read, none written).
	IndexCheckpointBytes int64
	// FS is the file system every file operation of the store goes
	// through, the writer lock excepted. Default: vfs.OS; power-cut tests
	// pass one that models what a crash keeps.
	FS vfs.FS
}

// Stats counts what a Store has done since Open.
type Stats struct {
	Commits      int64 // acknowledged commits (sessions and workflow steps)
	BytesWritten int64 // bytes of acknowledged commits, compaction excluded
	Compactions  int64 // completed compactions
	Trimmed      int64 // bytes of torn or uncommitted tails trimmed at Open
	TempsRemoved int64 // stale temp files removed at Open
	// The workspace journal (journal.go): commits it made durable, its
	// fdatasyncs for them, its checkpoints, and the commits Open
	// replayed from it into their logs.
	Journaled, JournalFlushes, JournalCheckpoints, JournalReplayed int64
	// JournalTooLarge counts the commits too large for a journal frame,
	// made durable by their own log's fdatasync.
	JournalTooLarge int64
}

// Store is the file-backed session.Store. Use Open.
type Store struct {
	root, dir   string
	sessionsDir string
	flowsDir    string
	opts        Options
	log         hclog.Logger
	fs          vfs.FS
	lock        *dirlock.Lock

	mu         sync.Mutex
	closed     bool
	sessions   map[string]*sessionFile  // by session id
	workflows  map[string]*workflowFile // by workflow id
	unreadable map[string]error         // file name -> why it cannot be read

	// bgMu guards bgClosed and compactions.Add. It is a leaf lock, taken
	// under a session's lock, so Close can stop new compactions without
	// taking mu under a session lock.
	bgMu        sync.Mutex
	bgClosed    bool
	compactions sync.WaitGroup

	commits, bytesWritten, compactionsDone, trimmed, tempsRemoved, journalReplayed atomic.Int64

	// j is the workspace journal, nil when commits go without one.
	j *journal

	// lruMu guards lru, the session logs that are open, most recently
	// used first. It is a leaf lock, taken under a session's lock.
	lruMu   sync.Mutex
	lru     list.List
	maxOpen int

	// runs names the session that records each run id (runindex.go).
	runs runIndex

	// slack counts the zeros written ahead of the session logs' ends
	// (recordlog.File.CountSlack), within opts.PreallocBytes.
	slack atomic.Int64
}

// sessionFile is one session's log and its in-memory index. All fields
// are guarded by mu, except open, which the store's lruMu guards.
type sessionFile struct {
	mu         sync.Mutex
	name       string
	path       string
	log        *recordlog.File // nil until the first commit creates the file, and while closed (see logFor)
	size       int64           // committed size of the log
	overhead   int64           // framing of the log beyond its live bytes, as of the last compaction
	t          *tracker
	open       *list.Element // in s.lru while log is open
	broken     error         // set when the file must not be written again
	gone       bool          // deleted; look the session up again
	compacting bool
	sick       *sickness // set for a log the store does not serve (damage.go)
	idxAt      int64     // the log's length its index checkpoint covers (0: none; checkpoint.go)
	idxBusy    bool      // a checkpoint is being written in the background
	jepoch     uint64    // the journal epoch of the log's last journaled commit (journal.go)
}

// sickness is why a session's log is not served, and what List and run
// lookups still say about it.
type sickness struct {
	id    string          // the session id, or the file name when it could not be read
	state string          // StateCorrupt, StateUnsupported or StateUnreadable
	err   error           // what every call on the session answers
	runs  map[string]bool // runs named past the part t indexes
	// at is where the intact data ends (-1: unknown), size the log's size.
	at, size int64
}

// sickErr returns the error a call on sf answers when its log is not
// served, else nil. sf.mu is held.
func (sf *sessionFile) sickErr() error {
	if sf.sick == nil {
		return nil
	}
	return sf.sick.err
}

// workflowFile is one workflow's log and its content. Guarded by mu.
type workflowFile struct {
	mu     sync.Mutex
	name   string
	size   int64 // committed size of the log (0 until the first step creates it)
	gen    uint64
	w      *session.Workflow
	gone   bool
	broken error     // set when the file must not be written again
	sick   *sickness // set for a log the store does not serve (damage.go)
}

var _ session.Store = (*Store)(nil)

// Open opens (creating when needed) the store under root/.cairn, takes its
// writer lock for the life of the Store, and recovers: torn or uncommitted
// log tails are trimmed, stale temp files removed, and interrupted deletes
// finished. A second Open of the same store while this one is open, from
// any process, fails with a *session.LockedError (errors.Is ErrLocked).
func Open(root string, opts Options) (*Store, error) {
	if opts.MaxCommitBytes <= 0 {
		opts.MaxCommitBytes = DefaultMaxCommitBytes
	}
	if opts.CompactMinBytes <= 0 {
		opts.CompactMinBytes = DefaultCompactMinBytes
	}
	if opts.MaxSessionBytes <= 0 {
		opts.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if opts.MaxOpenLogs <= 0 {
		opts.MaxOpenLogs = defaultMaxOpenLogs()
	}
	if opts.IndexCheckpointBytes == 0 {
		opts.IndexCheckpointBytes = DefaultIndexCheckpointBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.FS == nil {
		opts.FS = vfs.OS
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fsstore.Open: %w", err)
	}
	s := &Store{
		root: abs, dir: layout.StateDir(abs), opts: opts, log: opts.Logger, fs: opts.FS, maxOpen: opts.MaxOpenLogs,
		sessions: map[string]*sessionFile{}, workflows: map[string]*workflowFile{}, unreadable: map[string]error{},
	}
	s.sessionsDir = layout.Sessions(abs)
	s.flowsDir = layout.Workflows(abs)
	if fi, err := s.fs.Stat(abs); err != nil || !fi.IsDir() {
		return nil, session.Errorf(session.CodeInvalidArgument, "fsstore.Open: workspace %s is not a directory", abs)
	}
	if err := s.ensureDir(s.dir); err != nil {
		return nil, wrapOpen(err)
	}
	if s.lock, err = acquireLock(s.dir, s.sessionsDir, s.flowsDir, s.ensureDir, s.log); err != nil {
		return nil, err
	}
	if err := s.openJournal(); err != nil {
		_ = releaseLock(s.lock)
		return nil, wrapOpen(err)
	}
	if err := s.recover(); err != nil {
		s.closeFiles()
		if s.j != nil {
			s.j.abandon()
		}
		_ = releaseLock(s.lock)
		return nil, wrapOpen(err)
	}
	return s, nil
}

// wrapOpen names the operation in an error of Open, keeping its code and
// its cause.
func wrapOpen(err error) error {
	msg := err.Error()
	if se, ok := err.(*session.Error); ok {
		msg = se.Message
	}
	return &session.Error{Code: session.CodeOf(err), Message: "fsstore.Open: " + msg, Err: err}
}

// Dir returns the store's directory (root/.cairn).
func (s *Store) Dir() string { return s.dir }

// Stats reports counters since Open.
func (s *Store) Stats() Stats {
	st := Stats{
		Commits: s.commits.Load(), BytesWritten: s.bytesWritten.Load(), Compactions: s.compactionsDone.Load(),
		Trimmed: s.trimmed.Load(), TempsRemoved: s.tempsRemoved.Load(), JournalReplayed: s.journalReplayed.Load(),
	}
	if s.j != nil {
		st.Journaled, st.JournalFlushes, st.JournalCheckpoints = s.j.journaled.Load(), s.j.flushes.Load(), s.j.checkpoints.Load()
		st.JournalTooLarge = s.j.tooLarge.Load()
	}
	return st
}

// Capabilities reports a durable, atomic, CAS-capable, cross-process locked
// store with delta commits.
func (s *Store) Capabilities() session.Capabilities {
	return session.Capabilities{AtomicGenerations: true, DeltaCommits: true, CompareAndSwap: true, CrossProcessLock: true, Durable: true, History: true}
}

func (s *Store) recover() error {
	gi := layout.Gitignore(s.root)
	if fi, err := s.fs.Lstat(gi); os.IsNotExist(err) {
		if err := atomicfile.WriteFileFS(s.fs, gi, []byte("*\n"), 0o600); err != nil {
			return session.FileError(err, gi, "fsstore.Open")
		}
	} else if err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return session.Errorf(session.CodeInvalidArgument, "%s is not a regular file", gi)
	}
	for _, d := range []string{s.sessionsDir, s.flowsDir} {
		if err := s.ensureDir(d); err != nil {
			return err
		}
	}
	tombstones, err := s.recoverDir(s.flowsDir, s.loadWorkflow)
	if err != nil {
		return err
	}
	if len(tombstones) > 0 {
		return fmt.Errorf("unexpected %s in %s", tombstones[0], s.flowsDir)
	}
	if tombstones, err = s.recoverDir(s.sessionsDir, s.loadSession); err != nil {
		return err
	}
	for _, name := range tombstones {
		if err := s.finishDelete(name); err != nil {
			return err
		}
	}
	return nil
}

// recoverDir walks one log directory: it removes stale temp files, refuses
// symlinks, loads every log and returns the tombstones of interrupted
// deletes.
func (s *Store) recoverDir(dir string, load func(name string) error) ([]string, error) {
	entries, err := s.fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var tombstones []string
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case dir == s.sessionsDir && name == journalName:
			// The workspace journal, replayed before this walk.
		case strings.HasSuffix(name, idxSuffix) && !strings.HasPrefix(name, ".") && e.Type().IsRegular():
			s.orphanIdx(dir, name, names) // read with its log (indexLog)
		case strings.HasSuffix(name, logSuffix) && !strings.HasPrefix(name, "."):
			// A log that is not a regular file (a symlink, say) is not
			// followed: it is recorded as unreadable, and only its own
			// session or workflow is unavailable.
			if err := load(name); err != nil {
				return nil, err
			}
		case e.Type()&os.ModeSymlink != 0:
			s.log.Warn("ignoring symlink in store; the store does not follow links", "path", filepath.Join(dir, name))
		case strings.HasPrefix(name, tempPrefix):
			if err := s.fs.Remove(filepath.Join(dir, name)); err != nil {
				return nil, err
			}
			s.tempsRemoved.Add(1)
			s.log.Info("removed stale temp file", "path", filepath.Join(dir, name))
		case strings.HasPrefix(name, deletedPrefix):
			tombstones = append(tombstones, name)
		default:
			s.log.Warn("ignoring unexpected file in store", "path", filepath.Join(dir, name))
		}
	}
	// The removals of temp files are not synced: one that comes back
	// after a crash is removed again.
	return tombstones, nil
}

// loadSession indexes one session log for recovery, reading it in bounded
// chunks. It trims a torn tail (after keeping its bytes in quarantine/) and
// moves a log with no intact commit to quarantine/. A log it must not serve
// (damaged, newer, unopenable: see damage.go) is left exactly as it is and
// recorded as such, so one bad log does not take the whole store down. The
// log is left closed; logFor opens it when it is used.
func (s *Store) loadSession(name string) error {
	path := filepath.Join(s.sessionsDir, name)
	l, err := s.openForRecovery(path)
	if err != nil {
		s.sickSession(name, path, nil, StateUnreadable, err, nil)
		return nil
	}
	defer l.Close()
	size := l.Size()
	magic := make([]byte, len(logMagic))
	if n, _ := l.ReadAt(magic, 0); n < len(magic) || !recordlog.HasMagic(magic, logMagic) {
		s.sickSession(name, path, nil, StateCorrupt, session.Errorf(session.CodeCorrupt,
			"session log %s does not start as a cairn log (bad magic); it is kept as it is", path), nil)
		return nil
	}
	t, asm, idxAt, err := s.indexLog(l, path, size)
	if err != nil {
		s.sickSession(name, path, nil, StateUnreadable, session.Wrap(session.CodeInternal, err, "read session log %s", path), nil)
		return nil
	}
	if t.gen > 0 && name != fileName(t.sessionID) {
		s.sickSession(name, path, nil, StateCorrupt, session.Errorf(session.CodeCorrupt,
			"%s holds session %q, whose file would be %s; it is kept as it is", path, t.sessionID, fileName(t.sessionID)), nil)
		return nil
	}
	if asm.err != nil {
		state := StateCorrupt
		if session.CodeOf(asm.err) == session.CodeSchemaUnsupported {
			state = StateUnsupported
		}
		err := session.Wrap(session.CodeOf(asm.err), asm.err, "session log %s at byte %d (generations up to %d read)", path, asm.valid, t.gen)
		if state == StateCorrupt {
			err = session.Wrap(session.CodeCorrupt, asm.err, "session log %s holds a record at byte %d that does not decode; it is kept as it is", path, asm.valid)
		}
		s.sickSession(name, path, t, state, err, runsIn(l, [][2]int64{{asm.valid, size}})).at = asm.valid
		return nil
	}
	if asm.valid < size && s.zeroTail(l, asm.valid) {
		size = asm.valid
	}
	if asm.valid < size {
		seen, err := commitsAfter(l, asm.valid, size)
		if err != nil {
			s.sickSession(name, path, nil, StateUnreadable, session.Wrap(session.CodeInternal, err, "read session log %s", path), nil)
			return nil
		}
		if later := laterCommits(seen, t.gen); len(later) > 0 {
			id := t.sessionID
			if id == "" {
				id = firstResetID(l, size)
			}
			if id == "" {
				id = idFromName(name)
			}
			var ranges [][2]int64
			for _, c := range later {
				if c.intact {
					ranges = append(ranges, [2]int64{c.start, c.end})
				}
			}
			s.log.Error("session log is damaged; serving none of it until it is repaired", "path", path, "offset", asm.valid, "size", size)
			s.sickSession(name, path, t, StateCorrupt, errDamaged("session", id, path, asm.valid, size, t.gen, later), runsIn(l, ranges)).at = asm.valid
			return nil
		}
	}
	if t.gen == 0 {
		l.Close()
		if err := s.setAside(s.sessionsDir, path, name); err != nil {
			s.sickSession(name, path, nil, StateCorrupt, err, nil)
		}
		return nil
	}
	if asm.valid < size {
		if err := s.trimTorn(l, name, asm.valid); err != nil {
			s.sickSession(name, path, t, StateUnreadable, err, nil)
			return nil
		}
	}
	t.trim()
	s.sessions[t.sessionID] = &sessionFile{name: name, path: path, size: asm.valid, t: t, idxAt: idxAt}
	return nil
}

// openForRecovery opens a log for recovery: a regular file, opened for
// reading and writing without following a link.
func (s *Store) openForRecovery(path string) (*recordlog.File, error) {
	fi, err := s.fs.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s); the store does not follow links or read special files", path, fi.Mode().Type())
	}
	return recordlog.OpenAtFS(s.fs, path, fi.Size())
}

// sickSession records a session log the store will not serve. t indexes
// what could be read (nil: nothing); runs are the run ids the unread part
// names. Every call on the session answers err.
func (s *Store) sickSession(name, path string, t *tracker, state string, err error, runs map[string]bool) *sickness {
	if t == nil {
		t = newTracker()
	}
	id := t.sessionID
	if id == "" {
		id = idFromName(name)
	}
	if id == "" {
		id = name // a hashed name whose id could not be read
	}
	s.log.Error("session log not served", "path", path, "state", state, "error", err)
	sk := &sickness{state: state, err: err, runs: runs, id: id, at: -1, size: -1}
	if fi, err := s.fs.Lstat(path); err == nil {
		sk.size = fi.Size()
	}
	s.unreadable[name] = err
	sf := &sessionFile{name: name, path: path, t: t, sick: sk}
	s.sessions[id] = sf
	s.runs.stopped(sf)
	return sk
}

// session returns the sessionFile for id, creating a placeholder (not yet
// on disk) when create is set.
func (s *Store) session(id string, create bool) (*sessionFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	sf := s.sessions[id]
	if sf == nil {
		name := fileName(id)
		if err := s.unreadable[name]; err != nil {
			return nil, err
		}
		if !create {
			return nil, notFound(id)
		}
		sf = &sessionFile{name: name, path: filepath.Join(s.sessionsDir, name), t: newTracker()}
		s.sessions[id] = sf
	}
	return sf, nil
}

var errClosed = session.Errorf(session.CodeInternal, "fsstore: store is closed")

func notFound(id string) error {
	return session.Errorf(session.CodeNotFound, "session %q not found", id)
}

// lockSession returns the existing session id, locked. The caller unlocks.
func (s *Store) lockSession(id string) (*sessionFile, error) {
	if err := session.ValidateID("session", id); err != nil {
		return nil, err
	}
	for {
		sf, err := s.session(id, false)
		if err != nil {
			return nil, err
		}
		sf.mu.Lock()
		if sf.gone {
			sf.mu.Unlock()
			continue
		}
		if err := sf.sickErr(); err != nil {
			sf.mu.Unlock()
			return nil, err
		}
		if sf.t.gen == 0 {
			sf.mu.Unlock()
			return nil, notFound(id)
		}
		return sf, nil
	}
}

// Commit applies c as the session's next generation, durably. It
// normalises c in place first (see session.Normalize), unless
// opts.Normalized says that is done.
//
// Lock order, here and everywhere: s.mu before a session's or workflow's mu,
// never the reverse; s.bgMu is a leaf.
func (s *Store) Commit(ctx context.Context, id string, c *session.Change, opts session.CommitOptions) (session.CommitResult, error) {
	if err := session.ValidateID("session", id); err != nil {
		return session.CommitResult{}, err
	}
	if !opts.Normalized {
		if err := session.Normalize(c); err != nil {
			return session.CommitResult{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return session.CommitResult{}, err
	}
	for {
		sf, err := s.session(id, true)
		if err != nil {
			return session.CommitResult{}, err
		}
		sf.mu.Lock()
		if sf.gone {
			sf.mu.Unlock()
			continue
		}
		res, err := s.commitLocked(sf, id, c, opts)
		sf.mu.Unlock()
		return res, err
	}
}

func (s *Store) commitLocked(sf *sessionFile, id string, c *session.Change, opts session.CommitOptions) (session.CommitResult, error) {
	if err := sf.sickErr(); err != nil {
		return session.CommitResult{}, err
	}
	if err := s.healSession(sf); err != nil {
		return session.CommitResult{}, brokenErr(err, "fsstore.Commit", "session", id)
	}
	if err := session.CheckExpect(id, sf.t.gen, opts); err != nil {
		return session.CommitResult{}, err
	}
	if sf.t.gen > 0 {
		if err := session.CheckEdits(id, c, sf.t.messages(), sf.t.arts.has); err != nil {
			return session.CommitResult{}, err
		}
	}
	now := s.opts.Now().UTC()
	gen := sf.t.gen + 1
	fb := newCommitBuf(commitSizeHint(c))
	defer fb.release()
	creating := sf.t.gen == 0
	if creating {
		fb.buf = append(fb.buf, logMagic...)
	}
	start := len(fb.buf)
	fb.begin()
	encodeChange(fb, sf.t, id, c, now)
	fb.commit(gen, now)
	if fb.err != nil {
		if session.CodeOf(fb.err) == session.CodeTooLarge {
			return session.CommitResult{}, fb.err
		}
		return session.CommitResult{}, session.Wrap(session.CodeInternal, fb.err, "fsstore.Commit: encode")
	}
	n := int64(len(fb.buf) - start)
	if n > s.opts.MaxCommitBytes {
		return session.CommitResult{}, session.Errorf(session.CodeTooLarge, "commit of %d bytes exceeds the limit of %d bytes", n, s.opts.MaxCommitBytes)
	}
	// A commit that only edits (truncates, deletes, drops) is always
	// taken, so a session at its limit can still be cut back.
	if adds(c) && sf.t.live+n > s.opts.MaxSessionBytes {
		return session.CommitResult{}, session.Errorf(session.CodeTooLarge,
			"session %q holds %d live bytes; a commit of %d more would pass its limit of %d bytes (truncate messages or delete artifacts first, or raise the limit)",
			id, sf.t.live, n, s.opts.MaxSessionBytes)
	}
	// The index is folded from what the encoder took of each record as it
	// framed it (indexValue), not from the records parsed back: replay
	// after a restart parses them and must find the same index, which
	// TestCommitIndexEqualsReplay checks.
	group := commitGroup{parsed: fb.index, commit: commitRec{Generation: gen, Time: now}}
	base := sf.size
	var epoch uint64
	if creating {
		l, err := s.createLog(sf.path, fb.buf)
		if err != nil {
			return session.CommitResult{}, writeError(err, false, sf.path, "fsstore.Commit: session %q", id)
		}
		s.adoptLog(sf, l)
	} else {
		l, err := s.logFor(sf)
		if err != nil {
			return session.CommitResult{}, err
		}
		s.preallocate(sf, l, int64(len(fb.buf)))
		var broken bool
		broken, epoch, err = s.appendCommit(l, fb.buf, sf.name)
		if broken {
			sf.broken = err
			s.log.Error("session log is broken; the next commit tries to repair it", "path", sf.path, "error", err)
		}
		if err != nil {
			return session.CommitResult{}, writeError(err, broken, sf.path, "fsstore.Commit: session %q", id)
		}
	}
	sf.size = sf.log.Size()
	if epoch != 0 {
		sf.jepoch = epoch
	}
	// Folded in place, not into a copy: copying the summary (every run,
	// checkpoint and live-byte key) would make each commit cost the
	// session's size. observe only fails on a log past what an index can
	// address or on records out of order, which this build does not write;
	// if it ever does, the commit is durable but the summary is not to be
	// trusted, so the session stops taking commits until a reopen rebuilds
	// it from the log.
	if err := sf.t.observe(group, base); err != nil {
		sf.broken = fmt.Errorf("summary of a durable commit failed; the next commit re-reads the log: %w", err)
		return session.CommitResult{}, session.Wrap(session.CodeInternal, sf.broken, "fsstore.Commit")
	}
	sf.t.remember(fb.index, base)
	s.runs.added(sf, fb.index)
	written := int64(len(fb.buf)) // the commit, plus the magic of a new file
	s.commits.Add(1)
	s.bytesWritten.Add(written)
	s.maybeCompactLocked(sf)
	s.maybeCheckpointLocked(sf)
	return session.CommitResult{Generation: gen, MessageCount: sf.t.messages(), BytesWritten: written}, nil
}

// Load returns the session at generation at (0: latest). It reads the log up
// to the committed length known at the call, so it never blocks commits or
// compaction for longer than it takes to open the file.
func (s *Store) Load(ctx context.Context, id string, at uint64) (*session.State, error) {
	sf, err := s.lockSession(id)
	if err != nil {
		return nil, err
	}
	gen, first := sf.t.gen, sf.t.first
	var r *recordlog.Reader
	switch {
	case at > gen:
		err = session.Errorf(session.CodeNotFound, "session %q has no generation %d (latest is %d)", id, at, gen)
	case at != 0 && at < first:
		err = session.Errorf(session.CodeNotFound, "session %q generation %d was compacted away (oldest kept is %d)", id, at, first)
	default:
		r, err = recordlog.OpenReaderAtFS(s.fs, sf.path, sf.size)
	}
	sf.mu.Unlock()
	if err != nil {
		return nil, err
	}
	size := r.Size()
	data, err := r.ReadAll()
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "fsstore.Load")
	}
	groups, valid, err := scan(data)
	if err != nil {
		return nil, err
	}
	if valid != size {
		return nil, session.Errorf(session.CodeCorrupt, "fsstore.Load: session %q: log is damaged at offset %d of %d (run `cairn verify`)", id, valid, size)
	}
	st, err := replayState(groups, at)
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "fsstore.Load: session %q", id)
	}
	want := gen
	if at != 0 {
		want = at
	}
	if st.Snapshot.Generation != want {
		return nil, session.Errorf(session.CodeInternal, "fsstore.Load: session %q replayed to generation %d", id, st.Snapshot.Generation)
	}
	return st, nil
}

// served reports whether the store serves sf: not deleted, not damaged,
// and committed to. sf's lock is held.
func (sf *sessionFile) served() bool { return !sf.gone && sf.sick == nil && sf.t.gen > 0 }

func (sf *sessionFile) summaryLocked() session.Summary {
	t := sf.t
	sum := session.Summary{
		SessionID: t.sessionID, Generation: t.gen, CreatedAt: t.created, UpdatedAt: t.updated,
		MessageCount: t.messages(), ArtifactCount: int64(len(t.arts.order)), TraceCount: int64(len(t.traces)),
		Checkpoints: len(t.ckpts), SizeBytes: sf.size, LiveBytes: t.live,
	}
	if len(t.counts) > 0 {
		sum.Runs = maps.Clone(t.counts)
	}
	return sum
}

// Stat describes the session from memory.
func (s *Store) Stat(ctx context.Context, id string) (session.Summary, error) {
	sf, err := s.lockSession(id)
	if err != nil {
		return session.Summary{}, err
	}
	defer sf.mu.Unlock()
	return sf.summaryLocked(), nil
}

func (s *Store) allSessions() ([]*sessionFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	out := make([]*sessionFile, 0, len(s.sessions))
	for _, sf := range s.sessions {
		out = append(out, sf)
	}
	return out, nil
}

// eachSession calls fn with every existing session, locked, until fn
// returns true.
func (s *Store) eachSession(fn func(sf *sessionFile) bool) error {
	all, err := s.allSessions()
	if err != nil {
		return err
	}
	for _, sf := range all {
		sf.mu.Lock()
		stop := sf.served() && fn(sf)
		sf.mu.Unlock()
		if stop {
			return nil
		}
	}
	return nil
}

// List describes every session, ordered by id, those the store does not
// serve included: their State says why, their Problem what every call on
// them answers, and the rest describes what could be read.
func (s *Store) List(ctx context.Context) ([]session.Summary, error) {
	all, err := s.allSessions()
	var out []session.Summary
	for _, sf := range all {
		sf.mu.Lock()
		switch {
		case sf.gone:
		case sf.sick != nil:
			sum := sf.summaryLocked()
			sum.SessionID, sum.State, sum.Problem = sf.sick.id, sf.sick.state, sf.sick.err.Error()
			out = append(out, sum)
		case sf.t.gen > 0:
			out = append(out, sf.summaryLocked())
		}
		sf.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b session.Summary) int { return strings.Compare(a.SessionID, b.SessionID) })
	if out == nil {
		out = []session.Summary{}
	}
	return out, err
}

// FindRun returns the session that records runID.
func (s *Store) FindRun(ctx context.Context, runID string) (string, error) {
	if err := session.ValidateID("run", runID); err != nil {
		return "", err
	}
	var found string
	_, err := s.findRun(runID, func(sf *sessionFile) bool {
		if records(sf.t, runID) {
			found = sf.t.sessionID
		}
		return found != ""
	})
	if err == nil && found == "" {
		err = session.Errorf(session.CodeNotFound, "run %q not found", runID)
	}
	return found, err
}

// sickRun returns, for a run no served session records, the error of a
// session the store does not serve that names it, else nil: such a run
// is not unknown, only unreadable.
func (s *Store) sickRun(runID string) error {
	for _, sf := range s.runs.sickFiles() {
		sf.mu.Lock()
		var found error
		if sf.sick != nil && !sf.gone {
			_, inRuns := sf.t.status[runID]
			if inRuns || sf.t.ckpts[runID] != nil || sf.sick.runs[runID] {
				found = session.Wrap(session.CodeOf(sf.sick.err), sf.sick.err, "run %q is recorded in session %q, which is not served", runID, sf.sick.id)
			}
		}
		sf.mu.Unlock()
		if found != nil {
			return found
		}
	}
	return nil
}

// Checkpoint returns the latest loop checkpoint of runID.
func (s *Store) Checkpoint(ctx context.Context, runID string) (*session.LoopCheckpoint, error) {
	if err := session.ValidateID("run", runID); err != nil {
		return nil, err
	}
	var cp *session.LoopCheckpoint
	var rerr error
	found, err := s.findRun(runID, func(sf *sessionFile) bool {
		if sf.t.ckpts[runID] == nil {
			return false
		}
		cp, rerr = s.readCheckpoint(sf, runID)
		return true
	})
	if err == nil {
		err = rerr
	}
	if err == nil && !found {
		err = session.Errorf(session.CodeNoCheckpoint, "run %q has no checkpoint", runID)
	}
	return cp, err
}

// Delete removes the session, its checkpoints and the workflows it owns.
// The session's log is first renamed to a tombstone (the point of no
// return), then the owned workflows and the tombstone are removed; Open
// finishes a delete a crash interrupted.
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := session.ValidateID("session", id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	sf := s.sessions[id]
	if sf == nil {
		return notFound(id)
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.sick != nil {
		return s.deleteSickLocked(sf, id)
	}
	if sf.t.gen == 0 {
		return notFound(id)
	}
	if err := s.checkLock("fsstore.Delete"); err != nil {
		return err
	}
	if err := s.retireLocked(sf); err != nil {
		return err
	}
	tomb := deletedPrefix + sf.name
	if err := s.fs.Rename(filepath.Join(s.sessionsDir, sf.name), filepath.Join(s.sessionsDir, tomb)); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.Delete")
	}
	if err := s.fs.SyncDir(s.sessionsDir); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.Delete: sync dir")
	}
	sf.gone = true
	s.runs.forget(sf)
	s.closeLog(sf)
	s.removeIdxLocked(sf)
	delete(s.sessions, id)
	if err := s.deleteOwnedLocked(id); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.Delete")
	}
	if err := s.fs.Remove(filepath.Join(s.sessionsDir, tomb)); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.Delete")
	}
	if err := s.fs.SyncDir(s.sessionsDir); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.Delete: sync dir")
	}
	return nil
}

// deleteSickLocked deletes a session the store does not serve: its log
// is moved to quarantine/, not removed, since what it holds could not be
// read. s.mu and sf.mu are held.
func (s *Store) deleteSickLocked(sf *sessionFile, id string) error {
	if err := s.retireLocked(sf); err != nil {
		return err
	}
	dst, err := s.moveToQuarantine(s.sessionsDir, sf.path, sf.name, "deleted", true)
	if err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.Delete: move %s to quarantine", sf.path)
	}
	s.log.Warn("deleted a session that was not served; its log is kept in quarantine", "session", id, "to", dst)
	sf.gone = true
	s.runs.forget(sf)
	delete(s.sessions, id)
	delete(s.unreadable, sf.name)
	if err := s.deleteOwnedLocked(id); err != nil {
		return session.Wrap(session.CodeInternal, err, "fsstore.Delete")
	}
	return nil
}

// deleteOwnedLocked removes the workflows owned by session id; the log of a
// workflow the store does not serve is moved to quarantine/. s.mu is held.
func (s *Store) deleteOwnedLocked(id string) error {
	removed := false
	for wid, wf := range s.workflows {
		wf.mu.Lock()
		if wf.w.SessionID == id && !wf.gone {
			if wf.sick != nil {
				if _, err := s.moveToQuarantine(s.flowsDir, filepath.Join(s.flowsDir, wf.name), wf.name, "deleted", true); err != nil {
					wf.mu.Unlock()
					return err
				}
				delete(s.unreadable, wf.name)
			} else if err := s.fs.Remove(filepath.Join(s.flowsDir, wf.name)); err != nil && !os.IsNotExist(err) {
				wf.mu.Unlock()
				return err
			}
			wf.gone = true
			delete(s.workflows, wid)
			removed = true
		}
		wf.mu.Unlock()
	}
	if removed {
		return s.fs.SyncDir(s.flowsDir)
	}
	return nil
}

// finishDelete completes a delete interrupted after its tombstone rename.
func (s *Store) finishDelete(tomb string) error {
	path := filepath.Join(s.sessionsDir, tomb)
	data, err := vfs.ReadFile(s.fs, path)
	if err != nil {
		return err
	}
	if groups, _, err := scan(data); err == nil && len(groups) > 0 {
		t := newTracker()
		if len(groups[0].records) > 0 && groups[0].records[0].Kind == kindReset {
			if err := t.observeRecord(groups[0].records[0], 0); err == nil {
				if err := s.deleteOwnedLocked(t.sessionID); err != nil {
					return err
				}
			}
		}
	}
	s.log.Info("finished interrupted delete", "path", path)
	if err := s.fs.Remove(path); err != nil {
		return err
	}
	return s.fs.SyncDir(s.sessionsDir)
}

// Close waits for background compactions, closes every file and releases
// the writer lock.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.bgMu.Lock()
	s.bgClosed = true
	s.bgMu.Unlock()
	s.compactions.Wait()
	s.mu.Lock()
	s.checkpointAll()
	var jerr error
	if s.j != nil {
		// Every log flushed and a new epoch begun: a clean reopen
		// replays nothing. Should it fail, the logs are closed all the
		// same (each fdatasynced first) and the journal, whose frames
		// are left as they are, is replayed by the next Open.
		jerr = s.j.close()
	}
	s.closeFiles()
	s.runs.drop()
	s.mu.Unlock()
	if err := releaseLock(s.lock); err != nil {
		return err
	}
	if jerr != nil {
		return session.Wrap(session.CodeInternal, jerr, "fsstore.Close")
	}
	return nil
}

func (s *Store) closeFiles() {
	for _, sf := range s.sessions {
		sf.mu.Lock()
		s.closeLog(sf)
		sf.gone = true
		sf.mu.Unlock()
	}
	for _, wf := range s.workflows {
		wf.mu.Lock()
		wf.gone = true
		wf.mu.Unlock()
	}
}

// Root returns the workspace directory the store lives in.
func (s *Store) Root() string { return s.root }
