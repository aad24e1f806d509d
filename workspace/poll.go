package workspace

import "time"

// The polling fallback. When inotify is unavailable or its watches run out,
// the loop goroutine walks the tree in passes instead of reading events.
// A pass never holds the tracker lock across the walk: it reads up to
// pollSliceDirs directories without the lock (readdir and an lstat per
// name, through the os.Root), then takes the lock once to apply what those
// reads found, and releases it. So a commit, a lookup or Close waits at
// most for one slice to be applied, never for a walk.
//
// Background passes are throttled: after each slice the loop sleeps
// (1-PollDuty)/PollDuty times as long as the slice took, so scanning takes
// at most PollDuty of one core's wall time (10% by default), whatever the
// tree's size; a pass starts at most every PollInterval, so a small tree
// costs far less. The price is lag: on a tree whose walk takes W of CPU, a
// pass takes about W/PollDuty, and a change is seen up to that long after
// it is made.
//
// A caller that needs the tree exactly (Sync, hence Changes and Diff
// against the tree) starts an unthrottled pass of its own and waits for it;
// a throttled pass under way is abandoned (what it applied stays). Still
// no lock is held across it. RecordManifest does not wait: in polling mode
// it records the index as it stands and marks the manifest inexact.
//
// The walk checks the stop signal before every directory it reads, so
// Close returns within one directory's read.

// pollSliceDirs is how many directories a pass reads between two takes of
// the lock.
const pollSliceDirs = 64

// pollPass is one pass of the polling fallback, owned by the loop.
type pollPass struct {
	active  bool
	exact   bool            // a caller waits for it: not throttled
	stack   []string        // directories still to read; the last is next
	started time.Time       // when the pass began
	waiters []chan struct{} // closed when the pass completes
}

// dirRead is what a pass read from one directory, outside the lock.
type dirRead struct {
	rel   string
	items []scanned
	err   error
}

func newPass(exact bool, waiters []chan struct{}) pollPass {
	return pollPass{active: true, exact: exact, stack: []string{""}, started: time.Now(), waiters: waiters}
}

// poll runs the polling fallback until Close. now starts a pass at once
// (after a fallback the index may have missed changes); otherwise the first
// pass starts after PollInterval.
func (t *Tracker) poll(now bool) {
	duty := t.opts.PollDuty
	first := t.opts.PollInterval
	if now {
		first = 0
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	var p pollPass
	// Sync calls that arrived while an exact pass was under way: that pass
	// may have read their changes' directories before they asked, so they
	// wait for the next one.
	var queued []chan struct{}
	for {
		if p.active && p.exact {
			select {
			case <-t.closing:
				return
			case req := <-t.reqs:
				queued = append(queued, req.done)
				continue
			default:
			}
		} else {
			select {
			case <-t.closing:
				return
			case req := <-t.reqs:
				p = newPass(true, append(queued, req.done))
				queued = nil
			case <-timer.C:
				if !p.active {
					p = newPass(false, nil)
				}
			}
		}
		began := time.Now()
		done, stopped := t.pollSlice(&p)
		if stopped {
			return
		}
		if !done {
			if !p.exact {
				work := time.Since(began)
				timer.Reset(time.Duration(float64(work) * (1 - duty) / duty))
			}
			continue
		}
		t.rescans.Add(1)
		for _, ch := range p.waiters {
			close(ch)
		}
		started := p.started
		p = pollPass{}
		if len(queued) > 0 {
			p = newPass(true, queued)
			queued = nil
			continue
		}
		timer.Reset(max(0, time.Until(started.Add(t.opts.PollInterval))))
	}
}

// pollSlice reads up to pollSliceDirs directories of p without the lock,
// then applies them under it. done reports the pass complete; stopped that
// Close was called (nothing more is applied then).
func (t *Tracker) pollSlice(p *pollPass) (done, stopped bool) {
	t.mu.Lock()
	m := t.match // replaced, never mutated, when the rules change
	t.mu.Unlock()
	reads := make([]dirRead, 0, pollSliceDirs)
	for len(reads) < pollSliceDirs && len(p.stack) > 0 {
		select {
		case <-t.closing:
			return false, true
		default:
		}
		rel := p.stack[len(p.stack)-1]
		p.stack = p.stack[:len(p.stack)-1]
		if t.opts.pollHook != nil {
			t.opts.pollHook(rel)
		}
		r := dirRead{rel: rel}
		r.items, r.err = t.readDir(rel, &m)
		reads = append(reads, r)
		// Pushed in reverse so they are read in sorted order, each right
		// after its parent (depth first): a parent is always applied
		// before its children.
		for i := len(r.items) - 1; i >= 0; i-- {
			if r.items[i].st.mode.IsDir() {
				p.stack = append(p.stack, join(rel, r.items[i].name))
			}
		}
	}
	t.mu.Lock()
	for i := range reads {
		t.applyReadLocked(&reads[i])
	}
	notes := t.finishBatchLocked()
	t.mu.Unlock()
	t.deliver(notes)
	return len(p.stack) == 0, false
}

// readDir reads the directory rel of the workspace, without the lock.
func (t *Tracker) readDir(rel string, m *matcher) ([]scanned, error) {
	dr := t.rootFS
	if rel != "" {
		r, err := t.rootFS.OpenRoot(rel)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		dr = r
	}
	return readDirItems(dr, rel, m)
}

// applyReadLocked makes the index agree with one directory read. The read
// may be stale by the time it is applied; the next pass corrects it.
func (t *Tracker) applyReadLocked(r *dirRead) {
	d := t.dirs[r.rel]
	if d == nil {
		return // its parent's read, applied first, did not keep it
	}
	if r.err != nil {
		if r.rel == "" {
			t.log.Warn("polling the workspace root failed", "root", t.root, "error", r.err)
			return
		}
		// Removed or replaced since its parent was read: drop it as
		// scanSubdirLocked does; the next pass reads the parent again.
		dir, name := split(r.rel)
		if parent := t.dirs[dir]; parent != nil {
			if i, ok := parent.find(name); ok && parent.entries[i].isDir() {
				t.removeLocked(parent, i)
			}
		}
		return
	}
	var gitignore stat
	if r.rel == "" {
		if e := t.lookupLocked(".gitignore"); e != nil {
			gitignore = e.stat()
		}
	}
	t.reconcileLocked(d, r.items, func(*dirNode, string, bool) {})
	if r.rel == "" {
		var now stat
		if e := t.lookupLocked(".gitignore"); e != nil {
			now = e.stat()
		}
		if now != gitignore {
			// The rest of this pass and the next apply the new rules.
			t.loadIgnoreLocked()
		}
	}
}

// polling reports whether the tracker is in the polling fallback.
func (t *Tracker) polling() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.watcher == nil
}
