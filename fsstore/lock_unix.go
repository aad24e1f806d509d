//go:build linux || darwin

package fsstore

import (
	"errors"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/internal/dirlock"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/session"
)

// acquireLock takes the store's writer lock (internal/dirlock): a flock on
// the state directory dir itself, and on its LOCK file, which holds this
// process's pid. The sessions and workflows directories are made and
// pinned (made through ensureDir, the store's FS), so the lock's check also fails when one of them is replaced,
// and watched (dirlock's Watch) so that checks can skip their stats while
// nothing there changed.
// When another open holds the lock (another process, or another Open in
// this one) it returns a *session.LockedError naming the holder's pid.
func acquireLock(dir, sessionsDir, flowsDir string, ensureDir func(string) error, log hclog.Logger) (*dirlock.Lock, error) {
	l, err := dirlock.Acquire(dir, layout.LockName, log)
	var held *dirlock.HeldError
	if errors.As(err, &held) {
		return nil, &session.LockedError{Path: held.Path, PID: held.PID}
	}
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "fsstore.Open: lock")
	}
	for _, d := range []string{sessionsDir, flowsDir} {
		if err := ensureDir(d); err != nil {
			l.Release()
			return nil, wrapOpen(err)
		}
	}
	if err := l.Pin(sessionsDir, flowsDir); err != nil {
		l.Release()
		return nil, session.Wrap(session.CodeInternal, err, "fsstore.Open: lock")
	}
	// A commit checks the lock and its log's path (guard.go); with the
	// watch, while nothing changed there, one read(2) instead of five stats.
	if err := l.Watch(); err != nil {
		log.Debug("the writer lock's checks stat on every commit", "reason", err)
	}
	return l, nil
}

func releaseLock(l *dirlock.Lock) error { return l.Release() }
