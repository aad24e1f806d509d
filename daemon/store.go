package daemon

import (
	"context"
	"errors"
	"fmt"
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

// openStore opens the store a daemon serves: the workspace's file store,
// or the PostgreSQL database opts.StoreURL names. Either way the
// workspace's lock is held (by the file store itself, or here), so one
// daemon serves a workspace and Listen may remove a stale socket; the
// workspace index and manifests stay in the workspace. release, called
// after the store is closed, lets go of a lock taken here.
func openStore(ctx context.Context, ws string, opts RunOptions, sopts fsstore.Options, log hclog.Logger) (store session.Store, release func(), err error) {
	if opts.StoreURL == "" {
		st, err := fsstore.Open(ws, sopts)
		if err != nil {
			return nil, nil, err
		}
		return st, func() {}, nil
	}
	if !pgstore.IsURL(opts.StoreURL) {
		return nil, nil, session.Errorf(session.CodeInvalidArgument, "store %q: want a postgres:// or postgresql:// URL (or none, for the workspace's file store)", opts.StoreURL)
	}
	dir := layout.StateDir(ws)
	if err := ensurePrivateDir(dir); err != nil {
		return nil, nil, err
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
	st, err := pgstore.Open(octx, opts.StoreURL, pgstore.Options{})
	if err != nil {
		lock.Release()
		return nil, nil, err
	}
	log.Info("store is PostgreSQL", "database", st.URL())
	return st, func() { lock.Release() }, nil
}
