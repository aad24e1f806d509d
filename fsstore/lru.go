package fsstore

import (
	"syscall"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// defaultMaxOpenLogs is a quarter of the process's open-file limit, at
// least 16 and at most 1024: the rest is left for sockets, the workspace
// watcher, workflow logs and the host.
func defaultMaxOpenLogs() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 256
	}
	return int(min(max(lim.Cur/4, 16), 1024))
}

// logFor returns sf's open log, reopening it when it was closed to bound
// open files, and marks it most recently used. sf.mu is held and the
// session exists on disk.
func (s *Store) logFor(sf *sessionFile) (*recordlog.File, error) {
	if sf.log == nil {
		l, err := recordlog.OpenAtFS(s.fs, sf.path, sf.size)
		if err != nil {
			return nil, session.Wrap(session.CodeInternal, err, "fsstore: reopen session log")
		}
		s.adoptLog(sf, l)
		return l, nil
	}
	s.lruMu.Lock()
	if sf.open != nil {
		s.lru.MoveToFront(sf.open)
	}
	s.lruMu.Unlock()
	return sf.log, nil
}

// adoptLog makes l sf's open log and closes the least recently used logs
// of other sessions past the limit. A session busy right now (its lock
// taken) is passed over: it will be closed on a later round, so the limit
// can be passed briefly by as many logs as sessions are in use at once.
// sf.mu is held.
func (s *Store) adoptLog(sf *sessionFile, l *recordlog.File) {
	sf.log = l
	s.lruMu.Lock()
	defer s.lruMu.Unlock()
	if sf.open == nil {
		sf.open = s.lru.PushFront(sf)
	} else {
		s.lru.MoveToFront(sf.open)
	}
	for e := s.lru.Back(); e != nil && s.lru.Len() > s.maxOpen; {
		prev := e.Prev()
		victim := e.Value.(*sessionFile)
		if victim != sf && victim.mu.TryLock() {
			if !victim.compacting && victim.log != nil {
				s.closeLogFile(victim.log)
				victim.log = nil
				s.lru.Remove(e)
				victim.open = nil
			}
			victim.mu.Unlock()
		}
		e = prev
	}
}

// closeLog closes sf's log if it is open. sf.mu is held.
func (s *Store) closeLog(sf *sessionFile) {
	if sf.log == nil {
		return
	}
	s.closeLogFile(sf.log)
	sf.log = nil
	s.lruMu.Lock()
	if sf.open != nil {
		s.lru.Remove(sf.open)
		sf.open = nil
	}
	s.lruMu.Unlock()
}

// adds reports whether c writes anything new, as opposed to only editing
// or dropping what is there.
func adds(c *session.Change) bool {
	if c.Replace != nil || c.Checkpoint != nil || len(c.RestoreCheckpoints) > 0 {
		return true
	}
	cut := *c
	cut.TruncateMessages, cut.DeleteArtifacts, cut.DropCheckpoints = nil, nil, nil
	return cut.HasDelta()
}
