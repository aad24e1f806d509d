package workspace

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/cairn-dev/cairn/internal/vfs"
)

// Defaults for Options fields left zero.
const (
	// DefaultPollInterval is how often the polling fallback starts a pass
	// over the tree (a pass that runs longer starts the next one when it
	// ends).
	DefaultPollInterval = 2 * time.Second
	// DefaultPollDuty is the share of wall time the polling fallback's scan
	// may work: after each slice of directories it sleeps nine times as
	// long as the slice took, so an idle tracker over any tree costs at
	// most about a tenth of one core.
	DefaultPollDuty = 0.10
	// DefaultCookieTimeout bounds how long Sync waits for its cookie event
	// before it falls back to a full rescan.
	DefaultCookieTimeout = 5 * time.Second
	// DefaultEventBuffer is the capacity of the tracker's events channel. A larger
	// buffer lets bursts drain from the kernel queue while the tracker is
	// busy, which makes IN_Q_OVERFLOW rarer.
	DefaultEventBuffer = 8192
	// DefaultMaxDeletions is how many deletions the tracker remembers for
	// Changes. When more are recorded the oldest half is dropped and clocks
	// older than what was dropped get a fresh-instance answer.
	DefaultMaxDeletions = 1 << 16
)

// Options configure a Tracker. The zero value is ready to use.
type Options struct {
	// Ignore lists extra ignore patterns in .gitignore syntax, applied after
	// the built-in rules and the root .gitignore (so a "!pattern" here can
	// re-include what .gitignore excluded, but never .git or .cairn).
	Ignore []string

	// Logger receives warnings (polling fallback, overflow rescans) and
	// debug detail. Nil discards them.
	Logger hclog.Logger

	// PollInterval is the period of the polling fallback's passes.
	PollInterval time.Duration

	// PollDuty, in (0, 1], bounds the share of wall time the polling
	// fallback's background scan works (see DefaultPollDuty). Scans that
	// a caller waits for (Sync, Changes, Diff against the tree) are not
	// throttled.
	PollDuty float64

	// CookieTimeout bounds how long Sync waits for its cookie event.
	CookieTimeout time.Duration

	// EventBuffer is the capacity of the tracker's events channel.
	EventBuffer int

	// MaxDeletions bounds the deletion history kept for Changes.
	MaxDeletions int

	// ForcePolling skips inotify entirely, as if it were unavailable.
	ForcePolling bool

	// WatchLimit, when positive, makes the tracker behave as if the kernel
	// refused more than WatchLimit directory watches with ENOSPC
	// (fs.inotify.max_user_watches exhausted). It exists so tests can
	// trigger the polling fallback without changing the sysctl (cairnd's
	// hidden --test-watch-limit flag sets it); leave it zero in production.
	WatchLimit int

	// HashWorkers bounds the goroutines hashing files in parallel for
	// RecordManifest and Diff; zero means GOMAXPROCS.
	HashWorkers int

	// pollHook, when set (tests only), is called by the polling fallback
	// before each directory it reads, outside the lock.
	pollHook func(rel string)

	// noFastSync, when set (tests and benchmarks only), makes every Sync
	// in watching mode take the cookie round trip.
	noFastSync bool

	// FS is the file system the manifest store's files are reached
	// through, its lock excepted. Nil means vfs.OS; power-cut tests pass
	// one that models what a crash keeps.
	FS vfs.FS
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.PollDuty <= 0 || o.PollDuty > 1 {
		o.PollDuty = DefaultPollDuty
	}
	if o.CookieTimeout <= 0 {
		o.CookieTimeout = DefaultCookieTimeout
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = DefaultEventBuffer
	}
	if o.MaxDeletions <= 0 {
		o.MaxDeletions = DefaultMaxDeletions
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	return o
}
