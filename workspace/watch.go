package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/fsnotify/fsnotify"

	"github.com/cairn-dev/cairn/internal/layout"
)

// Modes reported by Status.
const (
	// ModeWatching means inotify watches cover every indexed directory.
	ModeWatching = "watching"
	// ModePolling means the tracker walks the tree in throttled passes
	// (see poll.go), at most one starting every PollInterval.
	ModePolling = "polling"
)

// errWatchLimit is what a simulated watch limit (Options.WatchLimit)
// returns; it matches syscall.ENOSPC like the real one.
var errWatchLimit = fmt.Errorf("inotify_add_watch: simulated watch limit: %w", syscall.ENOSPC)

// watchLocked adds d's inotify watch. When the kernel refuses for lack of
// watches (ENOSPC), the tracker falls back to polling.
func (t *Tracker) watchLocked(d *dirNode) {
	if t.watcher == nil {
		return
	}
	var err error
	if !d.watched && t.opts.WatchLimit > 0 && t.watches >= t.opts.WatchLimit {
		err = errWatchLimit
	} else {
		// Adding an existing watch again is harmless (same mask) and
		// repairs one the kernel or the notifier dropped on its own.
		err = t.watcher.Add(t.abs(d.path))
	}
	switch {
	case err == nil:
		if !d.watched {
			d.watched = true
			t.watches++
		}
	case errors.Is(err, syscall.ENOSPC):
		t.fallbackLocked(fmt.Sprintf("inotify watch limit reached after %d watches; raise fs.inotify.max_user_watches (sysctl -w fs.inotify.max_user_watches=524288)", t.watches), err)
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		// Gone before the watch was added; the scan that follows sees it gone.
	default:
		t.log.Warn("cannot watch directory; its changes are seen only by rescans", "path", d.path, "error", err)
	}
}

// unwatchLocked drops d's watch, if any.
func (t *Tracker) unwatchLocked(d *dirNode) {
	if !d.watched {
		return
	}
	d.watched = false
	t.watches--
	if t.watcher != nil {
		// ErrNonExistentWatch when inotify or the notifier already dropped it
		// (directory deleted or moved); either way it is gone.
		_ = t.watcher.Remove(t.abs(d.path))
	}
}

// unwatchTreeLocked drops the watches of d and every indexed directory
// below it. A directory that was moved keeps its inotify watch, and
// the notifier keeps reporting its events under the old path (fsnotify issue
// #694), so the whole subtree is unwatched before the new location is
// scanned and watched afresh.
func (t *Tracker) unwatchTreeLocked(d *dirNode) {
	t.unwatchLocked(d)
	for i := range d.entries {
		if d.entries[i].isDir() {
			if sub := t.dirs[join(d.path, d.entries[i].name)]; sub != nil {
				t.unwatchTreeLocked(sub)
			}
		}
	}
}

// fallbackLocked switches to polling, closing the watcher. The loop picks
// up the change on its next iteration and starts its poll ticker.
func (t *Tracker) fallbackLocked(warning string, err error) {
	if t.watcher == nil {
		return
	}
	t.log.Warn("falling back to polling", "interval", t.opts.PollInterval, "reason", warning, "error", err)
	t.warning = warning
	w := t.watcher
	t.watcher = nil
	// The notifier's Close waits for its reader, which never waits on t.mu.
	_ = w.Close()
	for _, d := range t.dirs {
		d.watched = false
	}
	t.watches = 0
	t.needRescan = true
}

func (t *Tracker) abs(rel string) string {
	if rel == "" {
		return t.root
	}
	return t.root + "/" + rel
}

// rel maps an event name to a workspace path; ok is false outside it.
func (t *Tracker) rel(name string) (string, bool) {
	if name == t.root {
		return "", true
	}
	if !strings.HasPrefix(name, t.root+"/") {
		return "", false
	}
	return name[len(t.root)+1:], true
}

// maxBatch bounds how many events are coalesced before they are applied.
const maxBatch = 16384

// run is the tracker's one event loop: it reads the notifier's events and errors,
// applies them in batches, rescans on overflow and on request, and, once
// watching is impossible, hands over to the polling fallback (poll) for
// good. It owns t.watcher.
func (t *Tracker) run() {
	defer close(t.done)
	defer func() {
		t.mu.Lock()
		w := t.watcher
		t.watcher = nil
		t.mu.Unlock()
		if w != nil {
			_ = w.Close()
		}
	}()
	for {
		t.mu.Lock()
		w, rescan := t.watcher, t.needRescan
		if w == nil {
			t.needRescan = false
		}
		t.mu.Unlock()
		if w == nil {
			t.poll(rescan)
			return
		}
		if rescan {
			t.fullRescan("ignore rules changed")
			continue
		}
		select {
		case <-t.closing:
			return
		case ev, ok := <-w.Events():
			if !ok {
				t.lostWatcher(w)
				continue
			}
			t.collect(ev)
			n := uint64(1)
		drain:
			for ; n < maxBatch; n++ {
				select {
				case ev, ok := <-w.Events():
					if !ok {
						break drain
					}
					t.collect(ev)
				default:
					break drain
				}
			}
			ready := t.applyBatch()
			// Only now, and before any cookie's Sync is released: a Sync
			// that sees handled reach what the reader sent may trust the
			// index without a cookie, and the Sync after a cookie's finds
			// nothing of it left in flight.
			t.handled.Add(n)
			for _, w := range ready {
				w.release()
			}
		case err, ok := <-w.Errors():
			if !ok {
				t.lostWatcher(w)
				continue
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				t.overflows.Add(1)
				t.log.Warn("inotify queue overflowed; rescanning (raising fs.inotify.max_queued_events makes this rarer)")
				releaseAll(t.applyBatch())
				t.fullRescan("overflow")
			} else {
				t.log.Warn("watcher error", "error", err)
			}
			t.handled.Add(1)
		case req := <-t.reqs:
			releaseAll(t.applyBatch())
			t.fullRescan(req.reason)
			close(req.done)
		}
	}
}

// lostWatcher handles the notifier closing its channels on its own (its reader
// failed): fall back to polling rather than go blind.
func (t *Tracker) lostWatcher(w notifier) {
	t.mu.Lock()
	if t.watcher == w {
		t.fallbackLocked("the inotify reader stopped", errors.New("notifier channels closed"))
	}
	t.mu.Unlock()
}

// collect adds one event to the pending batch.
func (t *Tracker) collect(ev fsnotify.Event) {
	t.events.Add(1)
	rel, ok := t.rel(ev.Name)
	if !ok {
		return
	}
	if rest, ok := strings.CutPrefix(rel, layout.Dir+"/"); ok {
		if strings.HasPrefix(rest, layout.CookiePrefix) && ev.Has(cookieOp) {
			t.seen = append(t.seen, rest)
		}
		return
	}
	if rel == "" || rel == layout.Dir {
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			t.log.Warn("workspace root or its .cairn directory was removed or moved", "root", t.root, "op", ev.Op.String())
		}
		return
	}
	t.pending[rel] |= ev.Op
}

// applyBatch applies the pending events: first every directory that was
// moved or removed loses its watches, then each path is settled against the
// disk in sorted order (parents before children). It returns the waiters
// of the Sync calls whose cookies were seen, for the caller to release.
func (t *Tracker) applyBatch() []*cookieWaiter {
	if len(t.pending) == 0 && len(t.seen) == 0 {
		return nil
	}
	t.mu.Lock()
	paths := make([]string, 0, len(t.pending))
	for rel, op := range t.pending {
		paths = append(paths, rel)
		if op&(fsnotify.Rename|fsnotify.Remove) != 0 {
			if d := t.dirs[rel]; d != nil {
				t.unwatchTreeLocked(d)
			}
		}
	}
	slices.Sort(paths)
	roots := map[string]*os.Root{}
	for _, rel := range paths {
		t.processPathLocked(rel, t.pending[rel], roots)
	}
	for dir, r := range roots {
		if dir != "" {
			r.Close()
		}
	}
	clear(t.pending)
	notes := t.finishBatchLocked()
	var ready []*cookieWaiter
	for _, name := range t.seen {
		if w := t.cookies[name]; w != nil {
			ready = append(ready, w)
			delete(t.cookies, name)
		}
	}
	t.seen = t.seen[:0]
	t.mu.Unlock()
	t.deliver(notes)
	return ready
}

func releaseAll(ws []*cookieWaiter) {
	for _, w := range ws {
		w.release()
	}
}

// finishBatchLocked closes a batch: the next change gets a new tick, the
// deletion history is trimmed, and the notes for subscribers are handed
// back to be delivered outside the lock.
func (t *Tracker) finishBatchLocked() []note {
	t.bumped = false
	t.trimDeletionsLocked()
	notes := t.notes
	t.notes = nil
	return notes
}

func (t *Tracker) cairnPath(name string) string { return filepath.Join(layout.StateDir(t.root), name) }
