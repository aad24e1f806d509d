package workspace

import "github.com/fsnotify/fsnotify"

// notifier is where the tracker's file system events come from: on Linux
// an inotify instance the tracker reads itself (notify_linux.go), elsewhere
// an fsnotify.Watcher (notify_other.go). Events and errors are hints the
// loop settles against the disk; their types are fsnotify's on every
// platform.
type notifier interface {
	// Add watches the directory path (not recursively). Adding a watched
	// path again is harmless. A kernel refusal is returned wrapping its
	// errno, so errors.Is(err, syscall.ENOSPC) detects the watch limit.
	Add(path string) error
	// AddCookieDir watches path for what Sync's cookies need (their
	// cookieOp events) and, where the backend can narrow a watch, nothing
	// else: files the daemon writes there (its log) then raise no events.
	AddCookieDir(path string) error
	// Remove drops path's watch; an error means it had none any more.
	Remove(path string) error
	// Close stops the reader and releases the watches; the channels are
	// closed once it returns.
	Close() error
	// Events and Errors deliver what was read. Both are closed when the
	// reader stops.
	Events() <-chan fsnotify.Event
	Errors() <-chan error
	// settled reports that every event the kernel queued before the call
	// has been read and delivered, and that the receiver has finished
	// handling all handled of the sent events and errors. A false answer
	// proves nothing (the caller falls back to a cookie); a true one must
	// be exact.
	settled(handled uint64) bool
}
