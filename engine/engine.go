package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/checked"
	"github.com/cairn-dev/cairn/session"
)

// maxCASAttempts bounds how often a read-modify-write operation reloads and
// retries after its compare-and-swap commit lost to a writer outside this
// engine. Inside one engine the per-session lock already serialises writers,
// so a retry only happens when two engines share a store.
const maxCASAttempts = 32

// ErrClosed is returned (as a coded internal error) by every method called
// after Close.
var ErrClosed = session.Errorf(session.CodeInternal, "engine: closed")

// Options configure an Engine. The zero value is ready to use.
type Options struct {
	// Now is the engine's clock for run start and end times, checkpoint and
	// step times. Default time.Now. Snapshot created_at/updated_at come
	// from the store's own clock.
	Now func() time.Time
	// NewRunID returns a fresh run id for BeginRun and ResumeRun when the
	// host does not name one. Default: "run_" plus 128 random bits in hex.
	// The engine still checks the id is unused and asks again if it is not.
	NewRunID func() string
	// Logger receives diagnostics (a panicking subscriber, CAS retries).
	// Default: a null logger.
	Logger hclog.Logger
	// Workspace, when set, records a workspace manifest with every commit
	// and reports drift on ResumeSession and touched files on ResumeRun.
	// Without it both are reported as not tracked.
	Workspace Workspace
	// Root is the workspace directory: recorded processes with a relative
	// or empty cwd are probed there.
	Root string
	// ProbeTimeout bounds the health checks ResumeSession runs on recorded
	// processes (0: procs.DefaultProbeTimeout; negative: do not probe,
	// report every process as unknown).
	ProbeTimeout time.Duration
	// MaxReplyBytes is the largest reply a read builds (0:
	// DefaultMaxReplyBytes, the protocol's default message size limit). A
	// read that would answer with more is too_large before it builds the
	// reply, and pages are cut to fit. The daemon sets its message size
	// limit here.
	MaxReplyBytes int64
	// Host names this engine in the leases of a store that hosts share
	// (session.Leaser). Default: the machine's name and Root, so a daemon
	// restarted on the same workspace is the same host.
	Host string
	// LeaseTTL is how long a lease lasts unrenewed (0: DefaultLeaseTTL).
	// The engine renews its leases every third of it, and each fenced
	// commit renews the lease it writes under.
	LeaseTTL time.Duration
}

// Engine implements cairn's operations (docs/DESIGN.md §3) over a session.Store.
// It is safe for concurrent use. See the package documentation for what it
// guarantees.
type Engine struct {
	store  session.Store
	now    func() time.Time
	newID  func() string
	log    hclog.Logger
	ws     Workspace
	root   string
	probe  time.Duration
	closed atomic.Bool

	maxReplyBytes int64

	sessions  keyedMutex // read-modify-write of one session
	workflows keyedMutex // check-then-record of one workflow
	// runIDs serialises "is this run id free?" with the commit that takes
	// it, across sessions. Lock order: runIDs before a session lock.
	runIDs sync.Mutex
	// homes remembers the session each live run was last committed in.
	homes runHomes

	events eventBus
	leases leases
	notify *notifier // nil unless the store carries events between hosts
}

// New returns an engine over store. The engine owns the store from now on:
// Close closes it.
func New(store session.Store, opts Options) *Engine {
	e := &Engine{store: store, now: opts.Now, newID: opts.NewRunID, log: opts.Logger, ws: opts.Workspace, root: opts.Root, probe: opts.ProbeTimeout, maxReplyBytes: opts.MaxReplyBytes}
	if e.now == nil {
		e.now = time.Now
	}
	if e.newID == nil {
		e.newID = randomRunID
	}
	if e.log == nil {
		e.log = hclog.NewNullLogger()
	}
	e.events.log = e.log
	e.leases.init(store, opts, e.log)
	e.startListening()
	return e
}

func randomRunID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on Linux; if it ever does, an id that
		// collides is caught by the uniqueness check anyway.
		panic("engine: crypto/rand: " + err.Error())
	}
	return "run_" + hex.EncodeToString(b[:])
}

// Capabilities reports what the underlying store guarantees.
func (e *Engine) Capabilities() session.Capabilities { return e.store.Capabilities() }

// Close stops the engine and closes its store. Calls after Close fail with
// ErrClosed; a second Close returns nil.
func (e *Engine) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	e.events.closeAll()
	e.leases.close()
	e.stopListening()
	if err := e.store.Close(); err != nil {
		return session.Wrap(session.CodeInternal, err, "engine.Close: close store")
	}
	return nil
}

func (e *Engine) check() error {
	if e.closed.Load() {
		return ErrClosed
	}
	return nil
}

// checkSession is the prologue of an operation on one session: the engine
// is open and sid is a valid session id.
func (e *Engine) checkSession(sid string) error {
	if err := e.check(); err != nil {
		return err
	}
	return session.ValidateID("session", sid)
}

func (e *Engine) clock() time.Time { return e.now().UTC() }

// update is the read-modify-write step of a whole-snapshot save: build
// gets the session's latest state in full (Store.Load, which costs the
// session's size; nil when the session does not exist and mayCreate is
// set) to diff the snapshot against. See rmw.
func (e *Engine) update(ctx context.Context, sid string, mayCreate bool,
	build func(st *session.State) (*session.Change, error),
	after func(res session.CommitResult) []api.Event,
) (session.CommitResult, bool, error) {
	read := func() (*session.State, session.Summary, error) {
		st, err := e.store.Load(ctx, sid, 0)
		return st, session.Summary{}, err
	}
	return e.rmw(ctx, sid, mayCreate, read, func(st *session.State, _ session.Summary) (*session.Change, error) {
		return build(st)
	}, after)
}

// updateHead is the read-modify-write step of the run operations: build
// gets the session's head and its summary, so checking a run costs what
// the session's runs cost, not its content. The head holds at least the
// session's id, generation, runs and loop checkpoints, which are all that
// the run operations read: a store that can read just those (runHeader)
// is asked for them, any other for its whole Store.Head (runtime, handoff
// and the rest of the snapshot without its messages, artifacts and
// traces). The session must exist. See rmw.
func (e *Engine) updateHead(ctx context.Context, sid string,
	build func(st *session.State, sum session.Summary) (*session.Change, error),
	after func(res session.CommitResult) []api.Event,
) (session.CommitResult, bool, error) {
	read := func() (*session.State, session.Summary, error) { return e.readRunHead(ctx, sid) }
	return e.rmw(ctx, sid, false, read, build, after)
}

// runHeader is a store that reads the part of a session's head the run
// operations use (fsstore): its id, generation, runs and loop checkpoints,
// and its summary, and none of its other records.
type runHeader interface {
	RunHead(ctx context.Context, sessionID string) (*session.State, session.Summary, error)
}

// readRunHead reads session sid's head for a run operation: RunHead where the
// store has it, else Head.
func (e *Engine) readRunHead(ctx context.Context, sid string) (*session.State, session.Summary, error) {
	if h, ok := e.store.(runHeader); ok {
		return h.RunHead(ctx, sid)
	}
	return e.store.Head(ctx, sid)
}

// errStale, returned by a build function, means a second read it made
// answered from another generation than the one build was given (a writer
// outside this engine committed in between): rmw reads again and retries.
var errStale = errors.New("engine: the session moved on between two reads")

// rmw is the engine's read-modify-write step for one session. Under the
// session's lock it reads the latest state with read (build must not
// modify it; it is nil when the session does not exist and mayCreate is
// set), asks build for the change to commit, commits it as a
// compare-and-swap on the generation read, and retries from the read when
// a writer outside this engine got there first. build returning a nil
// change means "nothing to do": rmw returns a zero result and ok false.
// after, when non-nil, gives the commit's events: they are published
// under the lock once the commit is durable (so subscribers see each
// session's events in generation order), or, on a store that carries
// events between hosts, sent inside the commit itself (see notifyWith).
func (e *Engine) rmw(ctx context.Context, sid string, mayCreate bool,
	read func() (*session.State, session.Summary, error),
	build func(st *session.State, sum session.Summary) (*session.Change, error),
	after func(res session.CommitResult) []api.Event,
) (res session.CommitResult, ok bool, err error) {
	unlock := e.sessions.lock(sid)
	defer unlock()
	cas := e.store.Capabilities().CompareAndSwap
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return res, false, err
		}
		st, sum, err := read()
		var gen uint64
		switch {
		case err == nil:
			gen = st.Snapshot.Generation
		case mayCreate && session.CodeOf(err) == session.CodeNotFound:
			st = nil
		default:
			return res, false, err
		}
		c, err := build(st, sum)
		if errors.Is(err, errStale) {
			if attempt < maxCASAttempts {
				continue
			}
			return res, false, session.Errorf(session.CodeConflict, "session %q kept changing under %d reads; try again", sid, attempt)
		}
		if err != nil || c == nil {
			return res, false, err
		}
		// Every engine commit passes through Normalize here: validation and
		// secret scrubbing do not depend on each caller remembering them.
		// The store is told, and does not scan the change again.
		if err := normalizeKnown(c, checked.Known(ctx)); err != nil {
			return res, false, err
		}
		opts := session.CommitOptions{Normalized: true, Fence: fenceOf(ctx), Notify: e.notifyWith(after)}
		if cas {
			opts.ExpectGeneration = session.Expect(gen)
		}
		e.stamp(ctx, c)
		res, err = e.store.Commit(ctx, sid, c, opts)
		if err == nil {
			e.emit(res, after)
			return res, true, nil
		}
		if session.CodeOf(err) != session.CodeConflict || !cas || attempt >= maxCASAttempts {
			return res, false, err
		}
		e.log.Debug("commit lost a compare-and-swap; retrying", "session", sid, "attempt", attempt)
	}
}

// keyedMutex is a set of mutexes addressed by string, created on demand and
// dropped when no one holds or waits for them.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

// lock locks key and returns its unlock function.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	ent := k.m[key]
	if ent == nil {
		ent = &keyedEntry{}
		k.m[key] = ent
	}
	ent.refs++
	k.mu.Unlock()
	ent.mu.Lock()
	return func() {
		ent.mu.Unlock()
		k.mu.Lock()
		ent.refs--
		if ent.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// isCode reports whether err carries code.
func isCode(err error, code session.Code) bool {
	return err != nil && session.CodeOf(err) == code
}

// wrapStore names the engine operation in a store error that is not
// already a coded session error, so an I/O failure says where it happened
// (CodeOf still sees through the %w), while coded errors keep their code
// and message unchanged.
func wrapStore(op string, err error) error {
	if err == nil {
		return nil
	}
	var se *session.Error
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("engine.%s: %w", op, err)
}

// sortedKeys returns the keys of m in order, for deterministic iteration.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
