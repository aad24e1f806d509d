package fsstore

import (
	"github.com/cairn-dev/cairn/internal/recordlog"
)

// DefaultPreallocBytes bounds, by default, the zeros written ahead of the
// ends of all of a store's session logs together.
const DefaultPreallocBytes = 32 << 20

// maxLogSlack bounds the zeros ahead of one log's end.
const maxLogSlack = 1 << 20

// preallocBlock is the file system block the zeros ahead are rounded up
// to: the block a log's last bytes occupy is taken on disk anyway.
const preallocBlock = 4096

// reclaimScan bounds how many idle logs one preallocation looks at to free
// room in the budget.
const reclaimScan = 64

// Fault points of writing zeros ahead of a log's end (recordlog.File.
// Preallocate). They are not in FaultPoints: a commit reaches them only
// when its log's zeros ahead run out, and a failure there fails nothing.
const (
	FaultPreallocWrite      = "prealloc." + recordlog.StepWrite
	FaultPreallocAfterWrite = "prealloc." + recordlog.StepAfterWrite
	FaultPreallocSync       = "prealloc." + recordlog.StepSync
	FaultPreallocAfterSync  = "prealloc." + recordlog.StepAfterSync
)

// FaultPreallocPoints lists the fault points of a preallocation in order.
var FaultPreallocPoints = []string{FaultPreallocWrite, FaultPreallocAfterWrite, FaultPreallocSync, FaultPreallocAfterSync}

// preallocate makes room in zeros for the next commit, of next bytes, to
// the session log l, when the zeros already ahead of its end cannot hold
// it: it writes and fdatasyncs zeros from the end of those up to the
// commit's end plus min(size/2, maxLogSlack), rounded up to a block, within
// what the store's budget (Options.PreallocBytes) has left after taking
// back the zeros of idle logs (reclaimSlack). The commit then overwrites
// zeros, and its fdatasync flushes data without a journal commit. This
// commit pays for the zeros; the next ones until they run out do not.
// Nothing fails if it does: the commit appends past the end as before.
// sf.mu is held.
func (s *Store) preallocate(sf *sessionFile, l *recordlog.File, next int64) {
	budget := s.opts.PreallocBytes
	size, alloc := l.Size(), l.Alloc()
	if budget <= 0 || alloc-size >= next || next > maxLogSlack {
		return
	}
	end := size + next + min(size/2, maxLogSlack)
	end = (end + preallocBlock - 1) / preallocBlock * preallocBlock
	n := end - alloc
	if free := budget - s.slack.Load(); n > free {
		s.reclaimSlack(sf, n-free)
		n = min(n, budget-s.slack.Load())
	}
	if alloc+n < size+next {
		return
	}
	// Reserved while the zeros are written, so two commits at once cannot
	// both spend the last of the budget.
	if s.slack.Add(n) > budget {
		s.slack.Add(-n)
		return
	}
	defer s.slack.Add(-n)
	l.CountSlack(&s.slack)
	if err := l.Preallocate(n, s.faultAt("prealloc.")); err != nil {
		s.log.Warn("could not write zeros ahead of a log's end; the commit appends", "path", l.Path(), "error", err)
	}
}

// reclaimSlack trims the zeros ahead of the least recently used open logs
// (recordlog.File.Trim) other than sf's, until need bytes are freed or
// reclaimScan logs were looked at. A log busy right now is passed over.
// sf.mu is held.
func (s *Store) reclaimSlack(sf *sessionFile, need int64) {
	s.lruMu.Lock()
	defer s.lruMu.Unlock()
	start := s.slack.Load()
	seen := 0
	for e := s.lru.Back(); e != nil && seen < reclaimScan && start-s.slack.Load() < need; e = e.Prev() {
		seen++
		victim := e.Value.(*sessionFile)
		if victim == sf || !victim.mu.TryLock() {
			continue
		}
		if !victim.compacting && victim.log != nil {
			if err := victim.log.Trim(); err != nil {
				s.log.Warn("could not trim the zeros ahead of an idle log", "path", victim.path, "error", err)
			}
		}
		victim.mu.Unlock()
	}
}

// zeroTail reports whether the session log l ends in zeros from valid, the
// end of its last intact commit, on: zeros written ahead of its end that
// no commit overwrote, which are a clean end, not a torn tail. It cuts
// them off (not synced: zeros a crash brings back are a clean end again),
// so the store's budget of zeros ahead counts only what it wrote since it
// opened. A tail that is not all zeros (a torn commit, then zeros; zeros,
// then anything) is left to the rules for torn and damaged tails.
func (s *Store) zeroTail(l *recordlog.File, valid int64) bool {
	zero, err := recordlog.Zeros(l, valid, l.Size())
	if err != nil || !zero {
		return false
	}
	if err := l.Truncate(valid); err != nil {
		s.log.Warn("could not cut the zeros off a log's end; appends overwrite them", "path", l.Path(), "error", err)
	}
	return true
}
