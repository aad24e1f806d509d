// Package workspace keeps a live index of a workspace's file tree, records
// a manifest of it with each session generation, and reports what changed
// since a manifest: drift on resume, and the files a run touched after its
// last checkpoint.
//
// # What it guarantees
//
//   - The index (path -> size, mtime, ctime, mode; a content hash computed
//     lazily and cached by (size, mtime, ctime)) matches the tree after
//     Sync: every change made before Sync was called is in it. In watching
//     mode on Linux, Sync returns at once when nothing is in flight: no
//     bytes queued on the tracker's inotify descriptor (FIONREAD), no read
//     of it under way, and every event read already applied (inotify queues
//     an event inside the system call that made the change, so a change
//     that returned before Sync was called is in one of those stages; see
//     notify_linux.go). Otherwise, and always on other platforms, it
//     creates and removes a cookie file in .cairn/ and waits for its event
//     (one inotify instance delivers events in order); if the cookie is not
//     seen in time, it rescans. In polling mode it waits for a pass that
//     starts after it was called.
//   - Watching is recursive: a directory that appears gets its watch before
//     it is read, so names created before the watch existed are found by
//     the read and later ones by events (mkdir -p a/b/c && touch a/b/c/f is
//     seen). Events are hints: every path they name is lstat'ed and the
//     index made to agree, so renames, deletes and editor save patterns end
//     in the same state as a fresh scan.
//   - On an inotify queue overflow (fsnotify.ErrEventOverflow) the tree is
//     rescanned and the overflow counted. When inotify watches run out
//     (ENOSPC from inotify_add_watch) or inotify is unavailable, the
//     tracker polls instead and Status names the limit to raise
//     (fs.inotify.max_user_watches, or fs.inotify.max_user_instances).
//   - Polling never holds the tracker lock across a walk: a pass reads 64
//     directories without it, then applies them under it in one hold. Its
//     CPU budget: a background pass starts at most every
//     Options.PollInterval and works at most Options.PollDuty (10%) of
//     wall time, sleeping after each slice nine times as long as the slice
//     took, so an idle tracker costs at most about a tenth of one core
//     whatever the tree's size; the index then lags the tree by up to one
//     pass. RecordManifest does not wait for a pass: in polling mode its
//     reference has Inexact set. Sync, Changes and Diff against the tree
//     run an unthrottled pass of their own (still without the lock), so
//     drift stays exact. The walk checks the stop signal before every
//     directory, so Close returns within one directory's read.
//   - Symlinks are recorded as links with their target string and never
//     followed: scans and hashing go through an os.Root of the workspace,
//     which refuses to resolve a path out of it, and a link is never
//     descended into or watched.
//   - RecordManifest is durable when it returns: the manifest's delta since
//     the previous one is appended to .cairn/manifests/log-*.bin and
//     fdatasync'd (a large delta is written as a new base file instead:
//     temp file, fsync, rename, fsync directory). Open trims a torn tail.
//     Storage grows with what changes, not with tree size times manifests.
//   - Diff(from, nil) is exact even if no tracker ran since from was
//     recorded: Open rebuilds the index with a full scan, and every file
//     whose (size, mtime, ctime) differs from its record is hashed again.
//
// # Caveats
//
//   - Tested on Linux only (inotify, read through the standard syscall
//     package; flock, fdatasync). It builds for darwin, where fsnotify
//     watches through kqueue and every Sync uses a cookie; that is untested.
//   - Ignore rules: built-in .git, .cairn, node_modules, target,
//     __pycache__ (directories at any depth; .git and .cairn also as files),
//     the root .gitignore (re-read when it changes) and Options.Ignore.
//     Nested .gitignore files, core.excludesFile and .git/info/exclude are
//     not read. Ignored directories are never watched; the one exception is
//     .cairn itself (not its subdirectories), watched for Sync cookies
//     (on Linux for deletions only, so the daemon's log raises no events).
//   - Directories are indexed but not reported: Changes, Diff and
//     subscribers name files, symlinks and other non-directories.
//   - The hash cache trusts (size, mtime, ctime). A file hashed within
//     two seconds of its last change is marked racy and hashed again before
//     it is trusted, since a second write inside the file system's
//     timestamp granularity can leave all three unchanged. For the same
//     reason an event for a file whose stat is unchanged but racy counts
//     as a change, so the next manifest hashes it again.
//   - inotify_add_watch follows a symlink in the last path component: if a
//     directory is replaced by a symlink between the lstat that found it
//     and the watch, the watch may land on the link's target. Events from it
//     are still resolved through the os.Root, so nothing outside the
//     workspace enters the index, but the watch is wasted until the next
//     rescan of that directory.
//   - Clocks are per instance: after a restart every earlier clock gets a
//     fresh-instance answer. Use manifests (Diff) across restarts.
//   - The deletion history behind Changes is bounded
//     (Options.MaxDeletions); a clock older than what was dropped gets a
//     fresh-instance answer.
//   - A file that cannot be read (permissions) is left out of manifests and
//     reported as modified by Diff(from, nil).
//   - Manifests are never deleted; nothing collects those no session
//     references any more.
//   - One tracker per workspace writes manifests (an advisory lock on the
//     .cairn/manifests directory itself and on its LOCK file, see
//     internal/dirlock); a second Open returns ErrLocked, even with LOCK
//     deleted. A tracker whose manifests directory was renamed away and
//     replaced records no more manifests (dirlock.ErrLost).
//
// # Hash
//
// Content hashes are SHA-256 from the standard library. On the benchmark
// tree (100,000 files of 100-600 bytes) hashing is bound by open/read
// system calls, not by the hash: SHA-256 runs at over 1 GB/s here, so a
// faster hash would not change the figures.
package workspace
