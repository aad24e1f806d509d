package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/storeopen"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/workspace"
)

// ErrAlreadyRunning is returned by Run when another process holds the
// workspace's store lock. The error names the holder's pid when known and
// wraps the store's *session.LockedError.
var ErrAlreadyRunning = errors.New("daemon: workspace already served")

// RunOptions configure Run.
type RunOptions struct {
	// Workspace is the directory to serve; "" means the current directory.
	Workspace string
	// Logger receives the daemon's log; nil discards it.
	Logger hclog.Logger
	// Version is reported to clients.
	Version string
	// MaxMessageSize, IdleTimeout, ShutdownTimeout, AnswerBudget and
	// FrameTimeout: see Config.
	MaxMessageSize  int64
	IdleTimeout     time.Duration
	ShutdownTimeout time.Duration
	AnswerBudget    int64
	FrameTimeout    time.Duration
	// Store tunes the file store.
	Store fsstore.Options
	// StoreURL, when set, is a postgres:// URL: the daemon serves that
	// database (pgstore) instead of the workspace's file store. The
	// workspace lock, index and manifests stay in the workspace.
	StoreURL string
	// NoWorkspaceTracking turns the workspace tracker off.
	NoWorkspaceTracking bool
	// WatchLimit is workspace.Options.WatchLimit: tests set it (cairnd's
	// hidden --test-watch-limit) to force the polling fallback.
	WatchLimit int
}

// Run serves a workspace until ctx ends (graceful shutdown, then nil), the
// idle timeout fires (likewise), or a failure. In order it: opens the store,
// which takes the single-instance lock (failing with ErrAlreadyRunning);
// binds the socket, removing a stale one; serves; and on the way out closes
// the socket, then the engine and its store.
func Run(ctx context.Context, opts RunOptions) error {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	ws, err := protocol.Workspace(opts.Workspace)
	if err != nil {
		return fmt.Errorf("daemon.Run: %w", err)
	}
	sopts := opts.Store
	if sopts.Logger == nil {
		sopts.Logger = log.Named("store")
	}
	store, release, err := storeopen.Open(ctx, ws, opts.StoreURL, sopts, log.Named("store"))
	if err != nil {
		var le *session.LockedError
		if errors.As(err, &le) {
			if le.PID > 0 {
				return fmt.Errorf("%w: workspace %s is served by cairnd pid %d: %w", ErrAlreadyRunning, ws, le.PID, err)
			}
			return fmt.Errorf("%w: workspace %s is locked by another process: %w", ErrAlreadyRunning, ws, err)
		}
		return fmt.Errorf("daemon.Run: open store: %w", err)
	}
	// Opening read every log once; hand what that allocated back to the
	// system now rather than whenever the runtime next gets round to it,
	// so an idle daemon's footprint is its indexes.
	debug.FreeOSMemory()
	// The workspace tracker is best effort: a daemon that cannot watch
	// (or index) the tree still serves, and reports drift as not tracked.
	var files *workspace.Tracker
	eopts := engine.Options{Logger: log.Named("engine"), Root: ws, MaxReplyBytes: opts.MaxMessageSize}
	if !opts.NoWorkspaceTracking {
		tr, terr := workspace.Open(ws, workspace.Options{Logger: log.Named("workspace"), WatchLimit: opts.WatchLimit})
		if terr != nil {
			log.Warn("workspace tracking is off: the tracker could not start", "error", terr)
		} else {
			files, eopts.Workspace = tr, tr
			if st := tr.Status(); st.Warning != "" {
				log.Warn("workspace tracking degraded", "mode", st.Mode, "warning", st.Warning)
			}
		}
	}
	eng := engine.New(store, eopts)
	defer release() // after the engine has closed the store
	defer func() {
		if cerr := eng.Close(); cerr != nil {
			log.Error("closing the store failed", "error", cerr)
		}
		if files != nil {
			if cerr := files.Close(); cerr != nil {
				log.Error("closing the workspace tracker failed", "error", cerr)
			}
		}
	}()
	ln, err := Listen(ws)
	if err != nil {
		return fmt.Errorf("daemon.Run: %w", err)
	}
	defer ln.Close()
	srv, err := NewServer(Config{
		Workspace:       ws,
		Backend:         engine.Served{Engine: eng},
		Logger:          log,
		Version:         opts.Version,
		MaxMessageSize:  opts.MaxMessageSize,
		IdleTimeout:     opts.IdleTimeout,
		ShutdownTimeout: opts.ShutdownTimeout,
		AnswerBudget:    opts.AnswerBudget,
		FrameTimeout:    opts.FrameTimeout,
		Files:           files,
	})
	if err != nil {
		return fmt.Errorf("daemon.Run: %w", err)
	}
	log.Info("serving", "workspace", ws, "socket", ln.Path, "pid", os.Getpid(), "version", opts.Version)
	err = srv.Serve(ctx, ln)
	if err != nil && !errors.Is(err, ErrServerClosed) {
		return fmt.Errorf("daemon.Run: %w", err)
	}
	log.Info("stopped")
	return nil
}
