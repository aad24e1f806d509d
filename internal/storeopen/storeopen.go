// Package storeopen opens the session store a workspace is served from:
// its own file store, or a PostgreSQL database shared with other hosts.
// The daemon and libcairn's embedded mode both open their stores here, so
// they choose and lock the same way.
package storeopen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/dirlock"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
)

// storeOpenTimeout bounds connecting to a PostgreSQL store at start-up.
const storeOpenTimeout = 30 * time.Second

// Open opens the store of workspace ws (canonical): its file store
// when storeURL is empty, else the PostgreSQL database storeURL names.
// Either way the workspace's lock is held (by the file store itself, or
// here), so one process serves a workspace (and the daemon may remove a
// stale socket); the workspace index and manifests stay in the workspace.
// release, called after the store is closed, lets go of a lock taken here.
func Open(ctx context.Context, ws, storeURL string, sopts fsstore.Options, log hclog.Logger) (store session.Store, release func(), err error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if storeURL == "" {
		st, err := fsstore.Open(ws, sopts)
		if err != nil {
			return nil, nil, err
		}
		return st, func() {}, nil
	}
	if !pgstore.IsURL(storeURL) {
		return nil, nil, session.Errorf(session.CodeInvalidArgument, "store %q: want a postgres:// or postgresql:// URL (or none, for the workspace's file store)", storeURL)
	}
	dir := layout.StateDir(ws)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, session.Wrap(session.CodeInternal, err, "open store: %s", dir)
	}
	lock, err := dirlock.Acquire(dir, layout.LockName, log)
	var held *dirlock.HeldError
	if errors.As(err, &held) {
		return nil, nil, &session.LockedError{Path: held.Path, PID: held.PID}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	octx, cancel := context.WithTimeout(ctx, storeOpenTimeout)
	defer cancel()
	maxSession := sopts.MaxSessionBytes
	if maxSession <= 0 {
		maxSession = fsstore.DefaultMaxSessionBytes
	}
	st, err := pgstore.Open(octx, storeURL, pgstore.Options{MaxSessionBytes: maxSession})
	if err != nil {
		lock.Release()
		return nil, nil, err
	}
	log.Info("store is PostgreSQL", "database", st.URL())
	return st, func() { lock.Release() }, nil
}
