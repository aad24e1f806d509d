package fsstore

import (
	"slices"
	"sync"
)

// runIndex names, for each run id the served sessions record (a run record
// or a checkpoint line), the session that records it, so that FindRun,
// CheckpointSession and Checkpoint look at one session instead of locking
// and looking through every one: a beginRun checks that its new id is
// unused, and would otherwise cost what the whole workspace holds.
//
// Only the absence of an id is trusted, and only while the index is whole:
// every served session's runs are then in it. A session it names is a
// guess, checked under that session's lock; a guess that no longer holds
// (the session deleted, replaced or no longer served, the run dropped)
// sends the lookup to the scan of every session, which answers as before.
//
// It is built by one scan on the first lookup after Open (and after Close,
// whose drop sends every lookup to that scan and its errClosed), then kept whole
// by the commits, which add the runs and checkpoints they write (run ids
// only ever enter a session through a commit's records). Anything else
// that may bring runs into a served session (a heal or a repair that reads
// a log back, a copy) drops it, and the next lookup scans again. A delete
// removes the deleted session's entries. A compaction keeps it: it
// rewrites the records a session holds, and adds none. Entries of runs a
// session no longer records (a replace, a dropped checkpoint) stay until
// the next drop: each is at most one per run a commit wrote.
//
// mu is a leaf lock, taken under a session's lock and under s.mu.
type runIndex struct {
	mu    sync.Mutex
	whole bool
	epoch uint64                  // counts the drops, so a scan that raced one is not trusted
	of    map[string]*sessionFile // nil value: two sessions record the run; scan
	// sick holds the sessions that have stopped being served, so the
	// lookup of a run no served session records asks only them whether
	// they name it (sickRun). A session leaves it when it is deleted or a
	// repair replaces it (forget), so it holds no index of a log that is
	// gone.
	sick []*sessionFile
}

// add records that sf, whose lock the caller holds, records run.
func (x *runIndex) add(sf *sessionFile, run string) {
	if old, ok := x.of[run]; ok && old != sf {
		x.of[run] = nil // another session named it (or did): ambiguous
		return
	}
	x.of[run] = sf
}

// added records the runs and checkpoints of a commit of sf, whose lock the
// caller holds.
func (x *runIndex) added(sf *sessionFile, ps []parsed) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.of == nil {
		x.of = map[string]*sessionFile{}
	}
	for i := range ps {
		switch p := &ps[i]; p.kind {
		case kindRun:
			x.add(sf, p.id.RunID)
		case kindCheckpoint:
			x.add(sf, p.cp.RunID)
		}
	}
}

// forget removes the entries that name sf, whose lock the caller holds,
// and sf from the sick list, as sf is deleted or a repair replaces it.
// The sick list is copied, not changed in place: sickFiles hands out the
// old one.
func (x *runIndex) forget(sf *sessionFile) {
	x.mu.Lock()
	defer x.mu.Unlock()
	sf.t.eachRunID(func(run string) {
		if x.of[run] == sf {
			delete(x.of, run)
		}
	})
	if i := slices.Index(x.sick, sf); i >= 0 {
		x.sick = slices.Delete(slices.Clone(x.sick), i, i+1)
	}
}

// drop forgets the index: the next lookup builds it again.
func (x *runIndex) drop() {
	x.mu.Lock()
	x.whole, x.of = false, nil
	x.epoch++
	x.mu.Unlock()
}

// stopped records that sf is no longer served.
func (x *runIndex) stopped(sf *sessionFile) {
	x.mu.Lock()
	x.sick = append(x.sick, sf)
	x.mu.Unlock()
}

// sickFiles returns the sessions that are not served.
func (x *runIndex) sickFiles() []*sessionFile {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sick[:len(x.sick):len(x.sick)]
}

// guess returns the session the index names for run and whether the
// index is whole; found is false when it names none.
func (x *runIndex) guess(run string) (sf *sessionFile, found, whole bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	sf, found = x.of[run]
	return sf, found, x.whole
}

// build makes the index whole from one scan of every served session,
// unless a drop raced the scan (then the next lookup scans again). The
// commits during the scan add their runs to the same map.
func (s *Store) buildRuns() error {
	x := &s.runs
	x.mu.Lock()
	if x.whole {
		x.mu.Unlock()
		return nil
	}
	if x.of == nil {
		x.of = map[string]*sessionFile{}
	}
	epoch := x.epoch
	x.mu.Unlock()
	err := s.eachSession(func(sf *sessionFile) bool {
		x.mu.Lock()
		if x.epoch == epoch {
			sf.t.eachRunID(func(run string) { x.add(sf, run) })
		}
		x.mu.Unlock()
		return false
	})
	if err != nil {
		return err
	}
	x.mu.Lock()
	x.whole = x.epoch == epoch
	x.mu.Unlock()
	return nil
}

// findRun calls fn, with the session locked, on the served sessions that
// may record run (a run record or a checkpoint line) until fn returns
// true, and reports whether it did: on the one session the run index
// names, or on none when the index knows that no served session records
// run, else on every served session. When fn never returned true, a
// session the store does not serve that names run answers its error
// (sickRun).
func (s *Store) findRun(run string, fn func(sf *sessionFile) bool) (bool, error) {
	found, known, err := s.findIndexed(run, fn)
	if err == nil && !known {
		err = s.eachSession(func(sf *sessionFile) bool {
			found = fn(sf)
			return found
		})
	}
	if err == nil && !found {
		err = s.sickRun(run)
	}
	return found, err
}

// findIndexed is findRun from the run index alone; known is false when
// the index cannot tell (not whole, an ambiguous or stale entry).
func (s *Store) findIndexed(run string, fn func(sf *sessionFile) bool) (found, known bool, err error) {
	if err := s.buildRuns(); err != nil {
		return false, false, err
	}
	sf, named, whole := s.runs.guess(run)
	switch {
	case !whole || named && sf == nil:
		return false, false, nil
	case !named:
		return false, true, nil
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if !sf.served() || !records(sf.t, run) {
		return false, false, nil
	}
	return fn(sf), true, nil
}

// records reports whether t has a run record or a checkpoint line of run.
func records(t *tracker, run string) bool {
	_, ok := t.status[run]
	return ok || t.ckpts[run] != nil
}

// eachRunID calls fn with each run id t has a run record or a checkpoint
// line of (one with both, twice).
func (t *tracker) eachRunID(fn func(run string)) {
	for run := range t.status {
		fn(run)
	}
	for run := range t.ckpts {
		fn(run)
	}
}
