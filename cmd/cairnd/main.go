// Command cairnd serves one workspace's cairn store over the wire protocol
// (protocol/PROTOCOL.md) on the workspace's Unix socket. It only wires
// flags, logging and signals; the daemon package does the work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/daemon"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/version"
	"github.com/cairn-dev/cairn/protocol"
)

const usage = `usage: cairnd [flags]

cairnd serves the cairn store of one workspace on <workspace>/.cairn/cairnd.sock
(or the short path named in <workspace>/.cairn/cairnd.addr). One daemon per
workspace: a second one exits with status 3 naming the running pid.
SIGTERM or SIGINT stops it gracefully (exit 0), and so does --idle-timeout
when no client has been connected for that long. A client that starts
cairnd on demand passes --idle-timeout=10m (its own --idle-timeout can
override that, 0 keeps it running); started by hand, cairnd runs until
stopped unless given the flag.

flags:
`

func main() {
	keepSysmonAwake()
	fs := flag.NewFlagSet("cairnd", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); printVisibleDefaults(fs) }
	ws := fs.String("workspace", "", "workspace `dir` to serve (default: the current directory)")
	level := fs.String("log-level", "", "log level: trace, debug, info, warn, error (default: $CAIRN_LOG_LEVEL, else info)")
	idle := fs.Duration("idle-timeout", 0, "exit after no client has been connected for this `duration` (0: never)")
	maxMsg := fs.Int64("max-message-size", protocol.DefaultMaxMessageSize, "largest accepted message in `bytes`")
	budget := fs.Int64("answer-budget", 0, "`bytes` of answers queued or being written, across all connections; when an answer does not fit, the connection holding the most is closed (status 1008) (0: 256 MiB, or --max-message-size if larger; at least --max-message-size)")
	frameTimeout := fs.Duration("frame-timeout", daemon.DefaultFrameTimeout, "close a connection that sends part of a WebSocket frame and then nothing for this `duration` (idle connections between frames are never closed)")
	maxSession := fs.Int64("max-session-bytes", fsstore.DefaultMaxSessionBytes, "largest a session's live data may grow, in `bytes`: a save past it fails with too_large (edits that shrink a session are always taken)")
	storeURL := fs.String("store", "", "serve the sessions of this PostgreSQL database (a postgres:// `url`) instead of the workspace's .cairn folder; the workspace index and manifests stay local (default: $CAIRN_STORE)")
	journal := fs.Int64("journal-bytes", fsstore.DefaultJournalBytes, "size in `bytes` of the workspace journal, through which concurrent saves to different sessions share one write and one fdatasync (0: each save fdatasyncs its own session log)")
	noTrack := fs.Bool("no-track-files", false, "do not watch the workspace tree (drift is then reported as not tracked)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	// Hidden, for tests: forces the polling fallback past a watch budget
	// without changing fs.inotify.max_user_watches.
	watchLimit := fs.Int(hiddenWatchLimit, 0, "behave as if inotify refused more than this many directory watches (tests only)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cairnd: unexpected argument %q\n", fs.Arg(0))
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println("cairnd", version.Version)
		return
	}
	if *storeURL == "" {
		*storeURL = os.Getenv("CAIRN_STORE")
	}
	if *level == "" {
		*level = os.Getenv("CAIRN_LOG_LEVEL")
	}
	lvl := hclog.Info
	if *level != "" {
		if lvl = hclog.LevelFromString(*level); lvl == hclog.NoLevel {
			fmt.Fprintf(os.Stderr, "cairnd: unknown log level %q\n", *level)
			os.Exit(2)
		}
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "cairnd", Level: lvl, Output: os.Stderr})

	// Files the daemon creates are private; the socket's directory is 0700
	// anyway, this closes the window between bind and chmod.
	syscall.Umask(0o077)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	stopProfile := startProfile(log)
	err := daemon.Run(ctx, daemon.RunOptions{
		Workspace:       *ws,
		Logger:          log,
		Version:         version.Version,
		MaxMessageSize:  *maxMsg,
		IdleTimeout:     *idle,
		ShutdownTimeout: 10 * time.Second,
		AnswerBudget:    *budget,
		FrameTimeout:    *frameTimeout,
		Store:           storeOptions(*maxSession, *journal),
		StoreURL:        *storeURL,

		NoWorkspaceTracking: *noTrack,
		WatchLimit:          *watchLimit,
	})
	stopProfile()
	switch {
	case errors.Is(err, daemon.ErrAlreadyRunning):
		fmt.Fprintln(os.Stderr, "cairnd:", err)
		os.Exit(protocol.ExitAlreadyRunning)
	case err != nil:
		fmt.Fprintln(os.Stderr, "cairnd:", err)
		os.Exit(1)
	}
}

// hiddenWatchLimit names the test-only flag that usage leaves out.
const hiddenWatchLimit = "test-watch-limit"

// printVisibleDefaults prints the flags' defaults, leaving out the hidden
// test-only flag.
func printVisibleDefaults(fs *flag.FlagSet) {
	visible := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	visible.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != hiddenWatchLimit {
			visible.Var(f.Value, f.Name, f.Usage)
		}
	})
	visible.PrintDefaults()
}

// storeOptions are the session store's options. With a journal, a session
// log's appends are not fdatasynced one by one, so zeros written ahead of
// its end would save nothing.
func storeOptions(maxSession, journal int64) fsstore.Options {
	o := fsstore.Options{MaxSessionBytes: maxSession, JournalBytes: max(journal, 0)}
	if journal <= 0 {
		o.PreallocBytes = fsstore.DefaultPreallocBytes
	}
	return o
}
