package workspace

import (
	"io/fs"
	"slices"
	"strings"
	"time"
)

// entry is one indexed name in a directory. It is kept small on purpose
// (88 bytes plus the name's bytes): the directory prefix lives once in its
// dirNode, and only the base name is stored here.
type entry struct {
	name    string
	size    int64
	mtime   int64 // nanoseconds since the epoch
	ctime   int64 // nanoseconds since the epoch; part of the hash cache key
	mode    fs.FileMode
	born    uint32 // tick at which the path appeared (for Changes)
	changed uint32 // tick of the last change seen
	flags   uint8
	hash    [32]byte // valid when flags&flagHashed
}

const (
	flagHashed uint8 = 1 << iota // hash holds the content hash for (size, mtime, ctime)
	flagRacy                     // hashed within racyWindow of the file's last change: rehash before trusting
)

// racyWindow is how recent a change may be, relative to the moment its
// content was hashed, before the (size, mtime, ctime) cache key is not
// trusted: a second write within the file system's timestamp granularity
// can leave all three unchanged (git's "racy clean" problem).
const racyWindow = 2 * time.Second

// racyAt reports whether st is within racyWindow of now (Unix
// nanoseconds): a write after it was taken, within the file system's
// timestamp granularity, may have left it as it was.
func racyAt(st stat, now int64) bool { return now-max(st.mtime, st.ctime) < int64(racyWindow) }

// dirNode is an indexed directory: its path once, and its entries sorted by
// name, subdirectories included (their entries have mode&fs.ModeDir).
type dirNode struct {
	path    string
	entries []entry
	watched bool
}

// stat is what the index keeps from an lstat.
type stat struct {
	size, mtime, ctime int64
	mode               fs.FileMode
}

func statOf(fi fs.FileInfo) stat {
	st := stat{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
	st.ctime = ctimeOf(fi)
	if st.mode.IsDir() {
		// A directory's size and times change with every entry; the index
		// tracks its contents, not those.
		st.size, st.mtime, st.ctime = 0, 0, 0
	}
	return st
}

func (e *entry) stat() stat { return stat{e.size, e.mtime, e.ctime, e.mode} }

func (e *entry) isDir() bool { return e.mode.IsDir() }

// find returns the index of name in d.entries and whether it is there.
func (d *dirNode) find(name string) (int, bool) {
	return slices.BinarySearchFunc(d.entries, name, func(e entry, n string) int { return strings.Compare(e.name, n) })
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// split returns the parent directory and base name of rel.
func split(rel string) (string, string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return "", rel
	}
	return rel[:i], rel[i+1:]
}

// FileInfo describes one indexed path.
type FileInfo struct {
	Path       string      // slash-separated, relative to the root
	Size       int64       // bytes; for a symlink, the length of its target
	ModTime    time.Time   // modification time
	Mode       fs.FileMode // type and permission bits, as lstat(2) reports them
	LinkTarget string      // the symlink's target, verbatim; never followed
}

// change kinds reported to subscribers and used in ChangeSet.
const (
	// KindAdded is a path that did not exist and now does.
	KindAdded = "added"
	// KindModified is a path whose size, times or mode changed.
	KindModified = "modified"
	// KindDeleted is a path that no longer exists (or is now ignored).
	KindDeleted = "deleted"
	// KindOverflow is delivered (with an empty path) to a subscriber that
	// fell so far behind that events were dropped; it should call Changes.
	KindOverflow = "overflow"
)

// deletion remembers a removed path for Changes.
type deletion struct {
	path string
	tick uint32 // when it was removed
	born uint32 // when the removed incarnation appeared
}

// bumpLocked returns the tick of the batch being applied, advancing the
// clock on the first change of the batch.
func (t *Tracker) bumpLocked() uint32 {
	if !t.bumped {
		t.tick++
		t.bumped = true
	}
	return t.tick
}

// noteLocked records a change of a non-directory path: for subscribers, and
// for the next manifest.
func (t *Tracker) noteLocked(rel, kind string) {
	if len(t.subs) > 0 {
		t.notes = append(t.notes, note{rel, kind})
	}
	if t.mdirtyValid {
		if len(t.mdirty) >= maxManifestDirty {
			// Too many to track one by one: the next manifest compares the
			// whole tree instead.
			t.mdirtyValid = false
			clear(t.mdirty)
		} else {
			t.mdirty[rel] = struct{}{}
		}
	}
}

// maxManifestDirty bounds the set of paths changed since the last manifest.
const maxManifestDirty = 1 << 18

// upsertLocked makes name in d match st, reporting the change if any. It
// does not handle directories appearing or disappearing; callers do.
// touched says that an event named the file: then a stat equal to the
// index's but within racyWindow of now is taken as a change too (another
// file renamed over it, or written in place, within one timestamp tick,
// can have the same size, mtime and ctime), so the next manifest hashes
// it again.
func (t *Tracker) upsertLocked(d *dirNode, name string, st stat, target string, touched bool) {
	i, ok := d.find(name)
	rel := join(d.path, name)
	if !ok {
		tick := t.bumpLocked()
		d.entries = slices.Insert(d.entries, i, entry{name: name, size: st.size, mtime: st.mtime, ctime: st.ctime, mode: st.mode, born: tick, changed: tick})
		if st.mode&fs.ModeSymlink != 0 {
			t.links[rel] = target
		}
		if !st.mode.IsDir() {
			t.files++
			t.noteLocked(rel, KindAdded)
		}
		return
	}
	e := &d.entries[i]
	if e.stat() == st && (st.mode&fs.ModeSymlink == 0 || t.links[rel] == target) &&
		!(touched && st.mode.IsRegular() && racyAt(st, time.Now().UnixNano())) {
		return
	}
	e.size, e.mtime, e.ctime, e.mode = st.size, st.mtime, st.ctime, st.mode
	e.flags = 0
	e.changed = t.bumpLocked()
	if st.mode&fs.ModeSymlink != 0 {
		t.links[rel] = target
	}
	if !st.mode.IsDir() {
		t.noteLocked(rel, KindModified)
	}
}

// removeLocked removes d.entries[i], and the whole subtree when it is a
// directory, recording each removed file.
func (t *Tracker) removeLocked(d *dirNode, i int) {
	e := d.entries[i]
	rel := join(d.path, e.name)
	if e.isDir() {
		if sub := t.dirs[rel]; sub != nil {
			for j := len(sub.entries) - 1; j >= 0; j-- {
				t.removeLocked(sub, j)
			}
			t.unwatchLocked(sub)
			delete(t.dirs, rel)
		}
	} else {
		t.files--
		delete(t.links, rel)
		t.deletions = append(t.deletions, deletion{path: rel, tick: t.bumpLocked(), born: e.born})
		t.noteLocked(rel, KindDeleted)
	}
	d.entries = slices.Delete(d.entries, i, i+1)
}

// trimDeletionsLocked bounds the deletion history, moving the horizon
// before which clocks are answered as fresh instances.
func (t *Tracker) trimDeletionsLocked() {
	if len(t.deletions) <= t.opts.MaxDeletions {
		return
	}
	drop := len(t.deletions) / 2
	t.horizon = t.deletions[drop-1].tick
	t.deletions = slices.Delete(t.deletions, 0, drop)
	t.deletions = slices.Clip(t.deletions)
}

// walkLocked calls fn for every indexed non-directory path in an
// unspecified order.
func (t *Tracker) walkLocked(fn func(rel string, e *entry)) {
	for _, d := range t.dirs {
		for i := range d.entries {
			if !d.entries[i].isDir() {
				fn(join(d.path, d.entries[i].name), &d.entries[i])
			}
		}
	}
}

// lookupLocked returns the entry for rel, or nil.
func (t *Tracker) lookupLocked(rel string) *entry {
	dir, name := split(rel)
	d := t.dirs[dir]
	if d == nil {
		return nil
	}
	i, ok := d.find(name)
	if !ok {
		return nil
	}
	return &d.entries[i]
}
