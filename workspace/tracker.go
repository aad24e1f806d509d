package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/layout"
)

// Tracker keeps a live index of one workspace tree and its manifests. All
// methods are safe for concurrent use.
type Tracker struct {
	root     string // absolute, symlinks resolved
	opts     Options
	log      hclog.Logger
	rootFS   *os.Root
	instance string

	events, rescans, overflows atomic.Uint64
	// handled counts the events and errors the loop has finished with
	// (applied, or rescanned after); notifier.settled compares it with
	// what the reader sent.
	handled atomic.Uint64
	// cookieSyncs counts the Syncs in watching mode that needed a cookie
	// round trip; the others found nothing in flight.
	cookieSyncs atomic.Uint64

	mu          sync.Mutex // guards the fields below
	closed      bool
	dirs        map[string]*dirNode
	links       map[string]string // symlink path -> target
	match       matcher
	files       int
	tick        uint32
	bumped      bool
	horizon     uint32
	deletions   []deletion
	mdirty      map[string]struct{} // non-directory paths changed since the last manifest
	mdirtyValid bool                // false: the next manifest compares the whole tree
	lastTick    uint32              // tick when the last manifest was taken (valid with mdirtyValid)
	notes       []note
	subs        map[uint64]*subscriber
	subSeq      uint64
	cookies     map[string]*cookieWaiter
	cookieSeq   uint64
	watcher     notifier // nil in polling mode; closed only by the loop or a fallback
	watches     int
	warning     string
	needRescan  bool

	// Owned by the loop goroutine.
	pending map[string]fsnotify.Op
	seen    []string

	reqs    chan rescanRequest
	closing chan struct{}
	done    chan struct{}
	subWG   sync.WaitGroup

	mmu sync.Mutex // serializes manifest writes; guards ms
	ms  *manifestStore
}

type rescanRequest struct {
	reason string
	done   chan struct{}
}

type cookieWaiter struct {
	seq  uint64
	ch   chan struct{}
	once sync.Once
}

func (w *cookieWaiter) release() { w.once.Do(func() { close(w.ch) }) }

// Open starts tracking the workspace at root: it creates <root>/.cairn
// (0700) if needed, takes the manifest store's lock, scans the tree while
// adding a watch on every directory, and starts the event loop. If inotify
// is unavailable or its watch limit is reached, the tracker polls instead
// and Status says so.
func Open(root string, opts Options) (*Tracker, error) {
	opts = opts.withDefaults()
	abs, err := filepath.Abs(root)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("workspace.Open: resolve %s: %w: %w", root, ErrNotDirectory, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("workspace.Open: %s: %w", abs, ErrNotDirectory)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	t := &Tracker{
		root: abs, opts: opts, log: opts.Logger.Named("workspace"), instance: hex.EncodeToString(id[:]),
		dirs: map[string]*dirNode{"": {path: ""}}, links: map[string]string{},
		mdirty: map[string]struct{}{}, subs: map[uint64]*subscriber{}, cookies: map[string]*cookieWaiter{},
		pending: map[string]fsnotify.Op{},
		reqs:    make(chan rescanRequest), closing: make(chan struct{}), done: make(chan struct{}),
	}
	if err := ensureCairnDir(layout.StateDir(abs)); err != nil {
		return nil, fmt.Errorf("workspace.Open: %w", err)
	}
	if t.ms, err = openManifestStore(opts.FS, layout.Manifests(abs), t.log); err != nil {
		return nil, fmt.Errorf("workspace.Open: %w", err)
	}
	if t.rootFS, err = os.OpenRoot(abs); err != nil {
		t.ms.close()
		return nil, fmt.Errorf("workspace.Open: open root: %w", err)
	}
	t.mu.Lock()
	t.loadIgnoreLocked()
	if opts.ForcePolling {
		t.warning = "polling forced by Options.ForcePolling"
	} else if w, err := newNotifier(opts.EventBuffer); err != nil {
		limit := "inotify is unavailable"
		if errors.Is(err, syscall.EMFILE) {
			limit = "too many inotify instances; raise fs.inotify.max_user_instances"
		}
		t.log.Warn("falling back to polling", "interval", opts.PollInterval, "reason", limit, "error", err)
		t.warning = limit
	} else {
		t.watcher = w
		// The cookie directory is the one place under .cairn that is
		// watched, and only for Sync cookies.
		if err := w.AddCookieDir(layout.StateDir(abs)); err != nil {
			t.fallbackLocked("cannot watch .cairn for sync cookies; raise fs.inotify.max_user_watches", err)
		} else {
			t.watches++
		}
	}
	t.bumpLocked()
	if err := t.scanDirLocked(t.dirs[""], t.rootFS, true); err != nil {
		t.mu.Unlock()
		t.rootFS.Close()
		t.ms.close()
		if t.watcher != nil {
			t.watcher.Close()
		}
		return nil, fmt.Errorf("workspace.Open: scan %s: %w", abs, err)
	}
	t.compactLocked()
	t.needRescan = false // the scan just done is the rescan
	t.finishBatchLocked()
	t.mu.Unlock()
	go t.run()
	return t, nil
}

// ensureCairnDir makes dir a real 0700 directory with a .gitignore of "*",
// refusing a symlink or any other file in its place.
func ensureCairnDir(dir string) error {
	if err := ensureDir(dir); err != nil {
		return err
	}
	gi := filepath.Join(dir, layout.GitignoreName)
	fi, err := os.Lstat(gi)
	if errors.Is(err, os.ErrNotExist) {
		return atomicfile.WriteFile(gi, []byte("*\n"), 0o600)
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", gi, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w", gi, ErrUnsafePath)
	}
	return nil
}

// Close stops the event loop and every subscriber, releases the watches and
// the manifest store's lock. It waits for all goroutines the tracker started.
// Calling it again returns nil.
func (t *Tracker) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for _, s := range t.subs {
		s.stop()
	}
	clear(t.subs)
	for _, w := range t.cookies {
		w.release()
	}
	t.mu.Unlock()
	close(t.closing)
	<-t.done
	t.subWG.Wait()
	t.mmu.Lock()
	err := t.ms.close()
	t.mmu.Unlock()
	t.rootFS.Close()
	if err != nil {
		return fmt.Errorf("workspace.Close: %w", err)
	}
	return nil
}

// Root returns the absolute, symlink-resolved workspace root.
func (t *Tracker) Root() string { return t.root }

// Sync returns once every change made to the tree before it was called is
// in the index. In watching mode it first asks the notifier whether
// anything is in flight (on Linux: nothing queued on the inotify
// descriptor, nothing being read, every event read already applied, see
// notify_linux.go); if not, the index is already exact and Sync returns at
// once. Otherwise it creates and removes a unique cookie file in .cairn/
// and waits for its event (inotify delivers one instance's events in
// order, so every earlier change has been read by then); if the cookie is not seen within
// CookieTimeout it rescans instead. In polling mode it waits for an
// unthrottled pass that starts after the call (poll.go), which holds the
// lock only to apply each slice of directories.
func (t *Tracker) Sync(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return fmt.Errorf("workspace.Sync: %w", ErrClosed)
	}
	if t.watcher == nil {
		t.mu.Unlock()
		return t.rescan(ctx, "sync")
	}
	// needRescan: the ignore rules changed and the loop has yet to rescan.
	if !t.needRescan && !t.opts.noFastSync && t.watcher.settled(t.handled.Load()) {
		t.mu.Unlock()
		return nil
	}
	t.cookieSyncs.Add(1)
	t.cookieSeq++
	w := &cookieWaiter{seq: t.cookieSeq, ch: make(chan struct{})}
	name := fmt.Sprintf("%s%s-%d", layout.CookiePrefix, t.instance, w.seq)
	t.cookies[name] = w
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.cookies, name)
		t.mu.Unlock()
	}()
	path := t.cairnPath(name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		t.log.Debug("cannot create sync cookie; rescanning instead", "error", err)
		return t.rescan(ctx, "sync without cookie")
	}
	f.Close()
	// Removed before the wait: on Linux the unlink is the event waited for
	// (cookieOp), so nothing of the cookie is left in flight afterwards to
	// push the next Sync off its fast path.
	if err := os.Remove(path); err != nil {
		t.log.Debug("cannot remove sync cookie; rescanning instead", "error", err)
		return t.rescan(ctx, "sync without cookie")
	}
	timer := time.NewTimer(t.opts.CookieTimeout)
	defer timer.Stop()
	select {
	case <-w.ch:
		if t.isClosed() {
			return fmt.Errorf("workspace.Sync: %w", ErrClosed)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("workspace.Sync: %w", ctx.Err())
	case <-timer.C:
		t.log.Debug("sync cookie not seen in time; rescanning", "timeout", t.opts.CookieTimeout)
		return t.rescan(ctx, "sync cookie timeout")
	}
}

// rescan asks the loop for a full rescan and waits for it.
func (t *Tracker) rescan(ctx context.Context, reason string) error {
	req := rescanRequest{reason: reason, done: make(chan struct{})}
	select {
	case t.reqs <- req:
	case <-t.closing:
		return fmt.Errorf("workspace.Sync: %w", ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("workspace.Sync: %w", ctx.Err())
	}
	select {
	case <-req.done:
		return nil
	case <-t.closing:
		return fmt.Errorf("workspace.Sync: %w", ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("workspace.Sync: %w", ctx.Err())
	}
}

func (t *Tracker) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Status reports the mode, the counters and the current clock.
func (t *Tracker) Status() api.FilesStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := api.FilesStatus{
		Root: t.root, Mode: ModeWatching, Warning: t.warning, Clock: t.clockLocked(),
		Files: t.files, Dirs: len(t.dirs), Watches: t.watches,
		Events: t.events.Load(), Rescans: t.rescans.Load(), Overflows: t.overflows.Load(),
	}
	if t.watcher == nil {
		s.Mode = ModePolling
	}
	return s
}

// Lookup returns what the index holds for path (slash-separated, relative
// to the root), without touching the disk.
func (t *Tracker) Lookup(path string) (FileInfo, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.lookupLocked(path)
	if e == nil {
		return FileInfo{}, false
	}
	return FileInfo{Path: path, Size: e.size, ModTime: time.Unix(0, e.mtime), Mode: e.mode, LinkTarget: t.links[path]}, true
}

// loadIgnoreLocked (re)reads the root .gitignore and combines it with the
// configured patterns.
func (t *Tracker) loadIgnoreLocked() {
	var lines []string
	if data, err := t.rootFS.ReadFile(".gitignore"); err == nil {
		lines = strings.Split(string(data), "\n")
	}
	lines = append(lines, t.opts.Ignore...)
	rules, bad := parseIgnore(lines)
	if len(bad) > 0 {
		t.log.Warn("ignoring malformed ignore patterns", "patterns", bad)
	}
	t.match = matcher{rules: rules}
}
