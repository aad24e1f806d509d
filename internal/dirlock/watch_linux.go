//go:build linux

package dirlock

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// A watch lets Check skip its stats when nothing they look at can have
// changed since a check that passed: one read(2) of an inotify instance
// instead of a stat of each path (the directory's whole path, each pin,
// the lock file). It watches
//
//   - every parent of the locked directory and of each pin, for itself
//     being moved or deleted (selfMask): how a path stops naming what it
//     named without any name in the directory or a pin changing;
//   - the locked directory and each pin, for themselves and for names
//     made, removed or renamed in them (entryMask): the lock file, the
//     pins, and whatever the owner keeps in a pin (fsstore's session
//     logs, which it checks through Epoch).
//
// inotify queues an event inside the system call that caused it, so a
// rename that has returned to its caller before poll reads is in the queue
// (or read) by then: poll sees every change that a stat at the same moment
// would. What poll makes of an event:
//
//   - a name made, removed or renamed in a watched directory: the epoch
//     moves on, and the next Check (and the owner's next check of anything
//     it noted at an earlier epoch) stats again;
//   - anything else (a watched directory itself moved or deleted, a watch
//     gone, the filesystem unmounted, the queue overflowed): the watch is
//     off for good, and every Check stats, as without one. The watches may
//     no longer be on the directories the paths name.
//
// What inotify does not report, a filesystem mounted over one of the paths,
// the epoch catches by moving on by itself every refresh (a second): a
// Check stats at least that often. The watch is made only where it can be
// trusted: absolute paths with no symbolic link in them (replacing a link
// raises no event on what it points to), on local filesystems (on NFS
// inotify sees only this machine's changes), in a process that can make
// one more inotify instance; otherwise Check stats every time.
type watch struct {
	fd     int
	epoch  uint64        // starts at 1: a caller's zero never matches
	moved  time.Duration // when it last moved on (since clockBase)
	broken bool
	buf    [4096]byte // poll reads into it: nothing allocated

	watched map[string]bool // the paths watched (add), for itself at least
}

const (
	selfMask  = syscall.IN_MOVE_SELF | syscall.IN_DELETE_SELF | syscall.IN_ONLYDIR | syscall.IN_DONT_FOLLOW | syscall.IN_MASK_ADD
	entryMask = selfMask | syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO
	// offMask is what turns the watch off (see watch).
	offMask = syscall.IN_MOVE_SELF | syscall.IN_DELETE_SELF | syscall.IN_IGNORED | syscall.IN_UNMOUNT | syscall.IN_Q_OVERFLOW
)

// refresh is how often the epoch moves on with no event (a variable for
// tests).
var refresh = time.Second

// clockBase anchors the monotonic clock poll reads (time.Since of it
// allocates nothing).
var clockBase = time.Now()

// localFS are the filesystems (statfs f_type) whose changes inotify
// reports wherever they are made: ext2/3/4, xfs, btrfs, tmpfs, overlayfs,
// zfs, f2fs, bcachefs.
var localFS = map[int64]bool{
	0xEF53: true, 0x58465342: true, 0x9123683E: true, 0x01021994: true,
	0x794C7630: true, 0x2FC12FC1: true, 0xF2F52010: true, 0xCA451A4E: true,
}

// newWatch returns a watch of dir (entries and itself) and its parents,
// or nil with the reason it cannot have one.
func newWatch(dir string) (*watch, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &watch{fd: fd, epoch: 1, moved: time.Since(clockBase), watched: map[string]bool{}}
	if err := w.add(dir); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// add watches path for its entries and itself, and each of its parents
// for itself, up to the first one already watched (whose parents are).
func (w *watch) add(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return fmt.Errorf("%s is not a clean absolute path", path)
	}
	if real, err := filepath.EvalSymlinks(path); err != nil || real != path {
		return fmt.Errorf("%s has a symbolic link in it (%v)", path, err)
	}
	mask := uint32(entryMask)
	for p := path; p != "/"; p = filepath.Dir(p) {
		if p != path && w.watched[p] {
			return nil // and its parents: a pin's are its directory's
		}
		var fs syscall.Statfs_t
		if err := syscall.Statfs(p, &fs); err != nil {
			return fmt.Errorf("statfs %s: %w", p, err)
		}
		if !localFS[int64(fs.Type)] {
			return fmt.Errorf("%s is on a filesystem (type %#x) whose changes inotify may not see", p, fs.Type)
		}
		if _, err := syscall.InotifyAddWatch(w.fd, p, mask); err != nil {
			return fmt.Errorf("inotify_add_watch %s: %w", p, err)
		}
		w.watched[p] = true
		mask = selfMask
	}
	return nil
}

// poll reads what is queued and returns the epoch, or false when the
// watch is off (or there is none): then the caller must stat.
func (w *watch) poll() (uint64, bool) {
	if w == nil || w.broken {
		return 0, false
	}
	changed := false
	for {
		n, err := syscall.Read(w.fd, w.buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			break
		}
		if err != nil || n <= 0 {
			w.broken = true
			return 0, false
		}
		// struct inotify_event: wd, mask, cookie, len (uint32s), then len
		// bytes of name.
		for b := w.buf[:n]; len(b) >= syscall.SizeofInotifyEvent; {
			if binary.NativeEndian.Uint32(b[4:])&offMask != 0 {
				w.broken = true
				return 0, false
			}
			changed = true
			b = b[min(len(b), syscall.SizeofInotifyEvent+int(binary.NativeEndian.Uint32(b[12:]))):]
		}
	}
	if now := time.Since(clockBase); changed || now-w.moved >= refresh {
		w.epoch++
		w.moved = now
	}
	return w.epoch, true
}

// bump moves the epoch on (a pin added).
func (w *watch) bump() {
	if w != nil {
		w.epoch++
	}
}

// close gives the instance back. The close(2) runs on its own goroutine:
// closing an inotify instance that has watches waits for the kernel to
// free them (an RCU grace period, about 6 ms on the machine cairn is
// tested on), which neither Release nor its caller needs to wait for. The
// instance counts against fs.inotify.max_user_instances until then; the
// descriptor, closed on exec, is no one else's meanwhile.
func (w *watch) close() {
	if w != nil && w.fd >= 0 {
		go syscall.Close(w.fd)
		w.fd = -1
		w.broken = true
	}
}
