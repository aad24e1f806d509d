package workspace

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/session"
)

// RecordManifest syncs, then durably records the manifest of the tree as it
// is now (path -> size, times, mode, content hash for every indexed
// non-directory path) and returns the reference to store with a session
// commit. It costs one append and one fdatasync of the delta since the
// previous manifest, plus hashing the files that changed; when nothing
// changed it writes nothing and returns the previous manifest's id with the
// current clock. The first call after Open compares the whole tree with the
// newest stored manifest, reusing its hashes where (size, mtime, ctime)
// still match; the very first manifest of a workspace hashes every file.
//
// In the polling fallback it does not sync: waiting for a pass over a large
// tree would hold the commit for as long as the walk takes. It records the
// index as it stands, which lags the tree by at most one pass, and sets
// Inexact in the reference.
func (t *Tracker) RecordManifest(ctx context.Context) (session.ManifestRef, error) {
	inexact := t.polling()
	if !inexact {
		if err := t.Sync(ctx); err != nil {
			return session.ManifestRef{}, fmt.Errorf("workspace.RecordManifest: %w", err)
		}
	}
	t.mmu.Lock()
	defer t.mmu.Unlock()
	if t.isClosed() {
		return session.ManifestRef{}, fmt.Errorf("workspace.RecordManifest: %w", ErrClosed)
	}
	t.mu.Lock()
	clock, entries := t.clockLocked(), t.files
	var items []item
	incremental := t.mdirtyValid
	var dirty map[string]struct{}
	if incremental {
		dirty = t.mdirty
		// Most commits follow no change to the tree: the empty set stays,
		// rather than a new one being made for every commit.
		if len(dirty) > 0 {
			t.mdirty = make(map[string]struct{}, 16)
		} else {
			dirty = nil
		}
		items = make([]item, 0, len(dirty))
		for rel := range dirty {
			items = append(items, t.itemLocked(rel, t.lookupLocked(rel)))
		}
	} else {
		items = make([]item, 0, t.files)
		t.walkLocked(func(rel string, e *entry) { items = append(items, t.itemLocked(rel, e)) })
		clear(t.mdirty)
		t.mdirtyValid = true
	}
	t.mu.Unlock()
	restore := func() {
		// The delta was not recorded: fold its paths back in (or, after a
		// full comparison, ask for another one).
		t.mu.Lock()
		if incremental && t.mdirtyValid {
			for rel := range dirty {
				t.mdirty[rel] = struct{}{}
			}
		} else {
			t.mdirtyValid = false
			clear(t.mdirty)
		}
		t.mu.Unlock()
	}
	var ops []mop
	var prev map[string]mrec
	if incremental {
		if err := t.hashItems(ctx, items); err != nil {
			restore()
			return session.ManifestRef{}, fmt.Errorf("workspace.RecordManifest: hash: %w", err)
		}
		for i := range items {
			it := &items[i]
			if it.gone || !it.have {
				// Gone, or unreadable: not in this manifest.
				ops = append(ops, mop{del: true, path: it.rel})
			} else {
				ops = append(ops, mop{path: it.rel, rec: it.rec()})
			}
		}
	} else {
		var err error
		if prev, err = t.ms.load(t.ms.last); err != nil {
			restore()
			return session.ManifestRef{}, fmt.Errorf("workspace.RecordManifest: load previous manifest: %w", err)
		}
		reuseHashes(items, prev)
		if err := t.hashItems(ctx, items); err != nil {
			restore()
			return session.ManifestRef{}, fmt.Errorf("workspace.RecordManifest: hash: %w", err)
		}
		entries = 0
		for i := range items {
			it := &items[i]
			if it.gone || !it.have {
				continue
			}
			entries++
			p, ok := prev[it.rel]
			if !ok || p != it.rec() {
				ops = append(ops, mop{path: it.rel, rec: it.rec()})
			}
			delete(prev, it.rel)
		}
		for rel := range prev {
			ops = append(ops, mop{del: true, path: rel})
		}
		// prev was consumed above (it now holds only the deleted paths);
		// record reloads the previous manifest if it needs it whole.
		prev = nil
	}
	if len(ops) == 0 && t.ms.last > 0 {
		return session.ManifestRef{ID: t.ms.ref(t.ms.last), Clock: clock, Entries: int64(entries), Inexact: inexact}, nil
	}
	slices.SortFunc(ops, func(a, b mop) int { return strings.Compare(a.path, b.path) })
	seq, err := t.ms.record(ops, entries, prev)
	if err != nil {
		restore()
		return session.ManifestRef{}, fmt.Errorf("workspace.RecordManifest: %w", err)
	}
	return session.ManifestRef{ID: t.ms.ref(seq), Clock: clock, Entries: int64(entries), Inexact: inexact}, nil
}

// reuseHashes takes a manifest's hash for every item whose stat still
// matches the manifest's record, unless that record was racy.
func reuseHashes(items []item, m map[string]mrec) {
	for i := range items {
		it := &items[i]
		if it.have || it.gone {
			continue
		}
		if p, ok := m[it.rel]; ok && p.flags&flagRacy == 0 && p.stat() == it.st {
			it.hash, it.have = p.hash, true
		}
	}
}

// FileDiff lists the paths (slash-separated, relative to the root, sorted)
// that differ between two manifests, or between a manifest and the tree as
// it is now. A path is modified when its content hash or its mode differs;
// a file touched without a change of content is not.
type FileDiff struct {
	Added    []string `json:"added"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}

// Empty reports whether the diff names no path.
func (d FileDiff) Empty() bool { return len(d.Added)+len(d.Modified)+len(d.Deleted) == 0 }

// Diff compares the manifest from with the manifest to, or with the tree as
// it is now when to is nil. "Now" is exact even if no tracker was running
// since from was recorded (the daemon was down): the index was rebuilt by a
// full scan at Open and kept current since, Diff syncs first (in polling
// mode an unthrottled pass over the tree, walked without the lock), and every
// file whose (size, mtime, ctime) differs from its record in from (or whose
// record was racy) is read and hashed again.
//
// It returns ErrNoManifest for an empty from.ID and ErrManifestNotFound for
// a reference this workspace's store does not hold.
func (t *Tracker) Diff(ctx context.Context, from session.ManifestRef, to *session.ManifestRef) (FileDiff, error) {
	if from.ID == "" || (to != nil && to.ID == "") {
		return FileDiff{}, fmt.Errorf("workspace.Diff: %w", ErrNoManifest)
	}
	if to == nil {
		if err := t.Sync(ctx); err != nil {
			return FileDiff{}, fmt.Errorf("workspace.Diff: %w", err)
		}
	}
	t.mmu.Lock()
	if t.isClosed() {
		t.mmu.Unlock()
		return FileDiff{}, fmt.Errorf("workspace.Diff: %w", ErrClosed)
	}
	fromM, err := t.loadRef(from.ID)
	var toM map[string]mrec
	if err == nil && to != nil {
		toM, err = t.loadRef(to.ID)
	}
	t.mmu.Unlock()
	if err != nil {
		return FileDiff{}, fmt.Errorf("workspace.Diff: %w", err)
	}
	if to == nil {
		t.mu.Lock()
		items := make([]item, 0, t.files)
		t.walkLocked(func(rel string, e *entry) { items = append(items, t.itemLocked(rel, e)) })
		t.mu.Unlock()
		// Unchanged stat: same content as recorded, no need to read it.
		var need []item
		toM = make(map[string]mrec, len(items))
		for _, it := range items {
			if p, ok := fromM[it.rel]; ok && p.flags&flagRacy == 0 && p.stat() == it.st {
				toM[it.rel] = p
				continue
			}
			need = append(need, it)
		}
		if err := t.hashItems(ctx, need); err != nil {
			return FileDiff{}, fmt.Errorf("workspace.Diff: hash: %w", err)
		}
		if t.isClosed() {
			// Close may have shut the root under the hashing: what failed
			// to open says nothing about the tree.
			return FileDiff{}, fmt.Errorf("workspace.Diff: %w", ErrClosed)
		}
		for i := range need {
			it := &need[i]
			switch {
			case it.gone:
			case !it.have:
				// Unreadable now: report it as modified rather than guess.
				toM[it.rel] = mrec{mode: it.st.mode, flags: flagRacy}
			default:
				toM[it.rel] = it.rec()
			}
		}
	}
	return diffManifests(fromM, toM), nil
}

func (t *Tracker) loadRef(id string) (map[string]mrec, error) {
	seq, err := t.ms.parseRef(id)
	if err != nil {
		return nil, err
	}
	return t.ms.load(seq)
}

func diffManifests(from, to map[string]mrec) FileDiff {
	d := FileDiff{Added: []string{}, Modified: []string{}, Deleted: []string{}}
	for rel, r := range to {
		p, ok := from[rel]
		switch {
		case !ok:
			d.Added = append(d.Added, rel)
		case p.hash != r.hash || p.mode != r.mode:
			d.Modified = append(d.Modified, rel)
		}
	}
	for rel := range from {
		if _, ok := to[rel]; !ok {
			d.Deleted = append(d.Deleted, rel)
		}
	}
	slices.Sort(d.Added)
	slices.Sort(d.Modified)
	slices.Sort(d.Deleted)
	return d
}

// DiffFiles is Diff with its result spread out, as engine.Workspace wants
// it.
func (t *Tracker) DiffFiles(ctx context.Context, from session.ManifestRef, to *session.ManifestRef) (added, modified, deleted []string, err error) {
	d, err := t.Diff(ctx, from, to)
	return d.Added, d.Modified, d.Deleted, err
}
