package workspace

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// scanned is one name read from a directory during a scan.
type scanned struct {
	name   string
	st     stat
	target string
}

// scanDirLocked reconciles d with the directory dr (d opened as an
// os.Root, so nothing it reads can escape the workspace through a symlink)
// and recurses into subdirectories: new ones always, existing ones when
// full. In watching mode it adds d's watch before reading the directory, so
// a name created afterwards is reported by an event and one created before
// is read here: nothing falls between the two. It holds the lock for the
// whole subtree, so it serves Open, watching mode and new directories named
// by events; the polling fallback walks without the lock (poll.go).
func (t *Tracker) scanDirLocked(d *dirNode, dr *os.Root, full bool) error {
	if t.watcher != nil {
		t.watchLocked(d)
	}
	items, err := readDirItems(dr, d.path, &t.match)
	if err != nil {
		return err
	}
	t.reconcileLocked(d, items, func(sub *dirNode, name string, isNew bool) {
		if !isNew && !full {
			return
		}
		if err := t.scanSubdirLocked(d, sub, dr, name); err != nil {
			t.log.Debug("scan subdirectory", "path", sub.path, "error", err)
		}
	})
	return nil
}

// readDirItems reads the directory dr (the workspace path rel) and lstats
// each name in it, leaving out what m ignores. It touches no tracker state,
// so the polling fallback calls it without the lock.
func readDirItems(dr *os.Root, rel string, m *matcher) ([]scanned, error) {
	f, err := dr.Open(".")
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	items := make([]scanned, 0, len(names))
	for _, name := range names {
		fi, err := dr.Lstat(name)
		if err != nil {
			continue // removed since it was listed; its event (if any) will say so
		}
		st := statOf(fi)
		if m.ignored(join(rel, name), st.mode.IsDir()) {
			continue
		}
		it := scanned{name: name, st: st}
		if st.mode&fs.ModeSymlink != 0 {
			// Recorded as a link with its target string; never followed.
			it.target, _ = dr.Readlink(name)
		}
		items = append(items, it)
	}
	return items, nil
}

// reconcileLocked makes d's entries match items (one directory's sorted
// contents) and calls visit, in order, for every subdirectory, with isNew
// set when it has just entered the index.
func (t *Tracker) reconcileLocked(d *dirNode, items []scanned, visit func(sub *dirNode, name string, isNew bool)) {
	// Names gone from the directory (or now ignored) go first.
	for i := len(d.entries) - 1; i >= 0; i-- {
		name := d.entries[i].name
		if _, ok := slices.BinarySearchFunc(items, name, func(s scanned, n string) int { return strings.Compare(s.name, n) }); !ok {
			t.removeLocked(d, i)
		}
	}
	for _, it := range items {
		isDir := it.st.mode.IsDir()
		if i, ok := d.find(it.name); ok && d.entries[i].isDir() != isDir {
			t.removeLocked(d, i)
		}
		t.upsertLocked(d, it.name, it.st, it.target, false)
		if !isDir {
			continue
		}
		rel := join(d.path, it.name)
		sub := t.dirs[rel]
		isNew := sub == nil
		if isNew {
			sub = &dirNode{path: rel}
			t.dirs[rel] = sub
		}
		visit(sub, it.name, isNew)
	}
}

// scanSubdirLocked opens name under dr and scans it as sub; if it cannot be
// read (removed meanwhile, replaced by a file), the entry is removed and the
// events that follow settle the rest.
func (t *Tracker) scanSubdirLocked(parent, sub *dirNode, dr *os.Root, name string) error {
	cr, err := dr.OpenRoot(name)
	if err == nil {
		err = t.scanDirLocked(sub, cr, true)
		cr.Close()
	}
	if err != nil {
		if i, ok := parent.find(name); ok {
			t.removeLocked(parent, i)
		}
		return err
	}
	return nil
}

// fullRescan reconciles the whole tree with the disk in watching mode
// (after an overflow, for Sync without cookies) and releases the Sync
// calls that were waiting when it began. The polling fallback never calls
// it: its passes walk without the lock (poll.go).
func (t *Tracker) fullRescan(reason string) {
	t.mu.Lock()
	start := t.cookieSeq
	// Cleared only here, under the lock held for the whole walk: a Sync
	// that finds nothing in flight must not return between the rules
	// changing and the rescan that applies them.
	t.needRescan = false
	t.rescans.Add(1)
	t.log.Debug("full rescan", "reason", reason)
	if err := t.scanDirLocked(t.dirs[""], t.rootFS, true); err != nil {
		t.log.Warn("rescan of the workspace root failed", "root", t.root, "error", err)
	}
	notes := t.finishBatchLocked()
	for name, w := range t.cookies {
		if w.seq <= start {
			w.release()
			delete(t.cookies, name)
		}
	}
	t.mu.Unlock()
	t.deliver(notes)
}

// processPathLocked settles one path named by events: lstat it and make the
// index agree. roots caches the parent directories opened in this batch.
func (t *Tracker) processPathLocked(rel string, op fsnotify.Op, roots map[string]*os.Root) {
	dir, name := split(rel)
	d := t.dirs[dir]
	if d == nil {
		// An event from a watch whose directory has since moved or been
		// removed, or under an ignored directory: the path it names is not
		// the one the event was about.
		return
	}
	if rel == ".gitignore" {
		t.loadIgnoreLocked()
		t.needRescan = true
	}
	dr := roots[dir]
	if dr == nil {
		var err error
		if dir == "" {
			dr = t.rootFS
		} else if dr, err = t.rootFS.OpenRoot(dir); err != nil {
			return // the parent itself is going; its own event removes it
		}
		roots[dir] = dr
	}
	i, exists := d.find(name)
	fi, err := dr.Lstat(name)
	if err != nil {
		if exists {
			t.removeLocked(d, i)
		}
		return
	}
	st := statOf(fi)
	isDir := st.mode.IsDir()
	if t.match.ignored(rel, isDir) {
		if exists {
			t.removeLocked(d, i)
		}
		return
	}
	if exists && d.entries[i].isDir() != isDir {
		t.removeLocked(d, i)
		exists = false
	}
	if !isDir {
		var target string
		if st.mode&fs.ModeSymlink != 0 {
			target, _ = dr.Readlink(name)
		}
		t.upsertLocked(d, name, st, target, true)
		return
	}
	t.upsertLocked(d, name, st, "", false)
	sub := t.dirs[rel]
	if sub == nil {
		sub = &dirNode{path: rel}
		t.dirs[rel] = sub
	} else if op&(fsnotify.Create|fsnotify.Rename|fsnotify.Remove) == 0 && sub.watched {
		return // attribute change of a directory we already track
	}
	// A new directory, or one replaced or moved into place: its contents
	// may be anything, so reconcile the whole subtree.
	if err := t.scanSubdirLocked(d, sub, dr, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.log.Debug("scan new directory", "path", rel, "error", err)
	}
}

// compactLocked trims the slack capacity of directory entry slices after a
// large scan, to keep the resident size per file small.
func (t *Tracker) compactLocked() {
	for _, d := range t.dirs {
		if cap(d.entries) > len(d.entries)+len(d.entries)/8 {
			d.entries = slices.Clone(d.entries)
		}
	}
}
