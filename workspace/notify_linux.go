//go:build linux

package workspace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/fsnotify/fsnotify"
)

// The tracker reads its own inotify instance on Linux so that Sync can tell,
// without a cookie round trip, that nothing is in flight. fsnotify hides its
// descriptor, and its reader can hold events it has read but not yet sent;
// no check from outside can see those. Here every stage an event passes
// through is observable:
//
//  1. queued in the kernel: FIONREAD on the descriptor counts its bytes.
//     inotify queues an event inside the system call that caused it (write
//     calls fsnotify_modify before it returns, creat, unlink and rename
//     likewise), so a change that returned to its writer before Sync was
//     called is queued, or already read, when Sync checks;
//  2. being read: the reader sets reading before its read(2) and clears it
//     only after counting what that read produced in sent;
//  3. sent but not yet applied: the loop adds to Tracker.handled only after
//     applying a batch, so sent > handled while any is pending.
//
// settled checks them in that order: FIONREAD, then reading, then sent
// against handled. An event not in the queue at the first check was taken
// by a read that began before it; that read has either not counted yet
// (reading is still set at the second check) or has counted (sent includes
// it at the third, and handled reaches sent only once it is applied).
// Everything else falls back to the cookie.

// inotifyMask is what each directory watch asks for: the events fsnotify's
// default watch asks for (Create, Write, Remove, Rename, Chmod).
const inotifyMask = syscall.IN_CREATE | syscall.IN_MODIFY | syscall.IN_DELETE | syscall.IN_DELETE_SELF |
	syscall.IN_MOVED_TO | syscall.IN_MOVED_FROM | syscall.IN_MOVE_SELF | syscall.IN_ATTRIB

// cookieMask is what the watch on .cairn asks for: the unlink of a Sync
// cookie, which is the cookie event waited for (cookieOp), so nothing of a
// cookie is left in flight once its Sync returns. Writes to other files
// there (the daemon's log) raise no event.
const cookieMask = syscall.IN_DELETE

// cookieOp is the event of a Sync cookie that releases its Sync.
const cookieOp = fsnotify.Remove

// fionread is FIONREAD, which the syscall package names TIOCINQ (the same
// request number on every Linux architecture).
const fionread = syscall.TIOCINQ

type inotifyNotifier struct {
	f  *os.File // nonblocking, registered with the runtime poller
	rc syscall.RawConn
	// keep is a second descriptor of the inotify instance, closed after
	// f without waiting (see Close).
	keep int

	mu    sync.Mutex // held across inotify_add_watch and the map update, so the reader never sees a wd it cannot name
	paths map[int32]string
	wds   map[string]int32

	events    chan fsnotify.Event
	errors    chan error
	done      chan struct{} // closed by Close
	exited    chan struct{} // closed when the reader has returned
	closeOnce sync.Once

	reading atomic.Bool   // the reader is inside a read(2) or has not yet counted what it read
	sent    atomic.Uint64 // events and errors the reader has produced (counted before they are sent)
}

func newNotifier(buffer int) (notifier, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	keep, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		syscall.Close(fd)
		return nil, fmt.Errorf("inotify: dup: %w", errno)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		syscall.Close(int(keep))
		return nil, fmt.Errorf("inotify: %w", err)
	}
	n := &inotifyNotifier{
		f: f, rc: rc, keep: int(keep), paths: map[int32]string{}, wds: map[string]int32{},
		events: make(chan fsnotify.Event, buffer), errors: make(chan error),
		done: make(chan struct{}), exited: make(chan struct{}),
	}
	go n.read()
	return n, nil
}

func (n *inotifyNotifier) Events() <-chan fsnotify.Event { return n.events }
func (n *inotifyNotifier) Errors() <-chan error          { return n.errors }

func (n *inotifyNotifier) Add(path string) error { return n.add(path, inotifyMask) }

func (n *inotifyNotifier) AddCookieDir(path string) error { return n.add(path, cookieMask) }

func (n *inotifyNotifier) add(path string, mask uint32) error {
	path = filepath.Clean(path)
	n.mu.Lock()
	defer n.mu.Unlock()
	var wd int
	var errno error
	if err := n.rc.Control(func(fd uintptr) { wd, errno = syscall.InotifyAddWatch(int(fd), path, mask) }); err != nil {
		return fmt.Errorf("inotify_add_watch %s: %w", path, err)
	}
	if errno != nil {
		return fmt.Errorf("inotify_add_watch %s: %w", path, errno)
	}
	w := int32(wd)
	if old, ok := n.paths[w]; ok && old != path && n.wds[old] == w {
		// The same directory under a new name (it was moved): one name
		// per watch, the newest.
		delete(n.wds, old)
	}
	n.paths[w] = path
	n.wds[path] = w
	return nil
}

func (n *inotifyNotifier) Remove(path string) error {
	path = filepath.Clean(path)
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.wds[path]
	if !ok {
		return fmt.Errorf("inotify: %s: %w", path, fsnotify.ErrNonExistentWatch)
	}
	delete(n.wds, path)
	delete(n.paths, w)
	var errno error
	_ = n.rc.Control(func(fd uintptr) { _, errno = syscall.InotifyRmWatch(int(fd), uint32(w)) })
	if errno != nil {
		// EINVAL: the kernel dropped it already (directory deleted).
		return fmt.Errorf("inotify_rm_watch %s: %w", path, errno)
	}
	return nil
}

func (n *inotifyNotifier) Close() error {
	var err error
	n.closeOnce.Do(func() {
		close(n.done)
		// Wakes the reader parked in the poller; its next read fails.
		// The instance lives on in n.keep, so this close is quick.
		err = n.f.Close()
		<-n.exited
		// Closing an inotify instance's last descriptor waits in the
		// kernel for a grace period (synchronize_srcu: milliseconds on
		// an idle machine) before it returns. Nothing depends on that
		// wait (the reader has stopped, no event is read again), so
		// closeLater takes it, and a workspace closes without it.
		closeLater(n.keep)
	})
	return err
}

// lastClose holds the inotify descriptors left to close (closeLater).
var lastClose struct {
	mu      sync.Mutex
	fds     []int
	running bool
}

// closeLater closes fd on a goroutine that closes the queued descriptors
// one at a time and returns when none is left: workspaces closed in a
// burst leave one thread waiting in the kernel, not one each.
func closeLater(fd int) {
	lastClose.mu.Lock()
	lastClose.fds = append(lastClose.fds, fd)
	start := !lastClose.running
	lastClose.running = true
	lastClose.mu.Unlock()
	if start {
		go closeQueued()
	}
}

func closeQueued() {
	for {
		lastClose.mu.Lock()
		if len(lastClose.fds) == 0 {
			lastClose.running = false
			lastClose.mu.Unlock()
			return
		}
		fd := lastClose.fds[0]
		lastClose.fds = lastClose.fds[1:]
		lastClose.mu.Unlock()
		_ = syscall.Close(fd)
	}
}

// settled: see the comment at the top of this file. The order of the three
// checks is what makes it exact.
func (n *inotifyNotifier) settled(handled uint64) bool {
	var queued int32
	var errno syscall.Errno
	if err := n.rc.Control(func(fd uintptr) { queued, errno = queuedBytes(fd) }); err != nil || errno != 0 || queued != 0 {
		return false
	}
	if n.reading.Load() {
		return false
	}
	return n.sent.Load() == handled
}

// queuedBytes is FIONREAD on the inotify descriptor fd: the size of the
// events queued in the kernel and not yet read.
func queuedBytes(fd uintptr) (int32, syscall.Errno) {
	var queued int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, fionread, uintptr(unsafe.Pointer(&queued)))
	return queued, errno
}

// rawItem is one event or error produced by a read, in kernel order.
type rawItem struct {
	ev  fsnotify.Event
	err error
}

// read is the reader goroutine: it reads the descriptor, names each event
// by its watch, and sends events and errors in the order the kernel queued
// them, until Close.
func (n *inotifyNotifier) read() {
	defer func() {
		close(n.exited)
		close(n.errors)
		close(n.events)
	}()
	buf := make([]byte, syscall.SizeofInotifyEvent*4096)
	var items []rawItem
	for {
		var nr int
		var rerr error
		err := n.rc.Read(func(fd uintptr) bool {
			// Parks without touching reading when the queue is empty, so
			// an idle reader never makes settled say no; an event queued
			// after this check wakes the poller.
			if q, errno := queuedBytes(fd); errno == 0 && q == 0 {
				return false
			}
			n.reading.Store(true)
			for {
				nr, rerr = syscall.Read(int(fd), buf)
				if rerr != syscall.EINTR {
					break
				}
			}
			if rerr == syscall.EAGAIN {
				n.reading.Store(false)
				return false // wait until readable
			}
			return true
		})
		if err != nil {
			n.reading.Store(false)
			return // closed
		}
		items = items[:0]
		switch {
		case rerr != nil:
			items = append(items, rawItem{err: fmt.Errorf("inotify read: %w", rerr)})
		case nr < syscall.SizeofInotifyEvent:
			items = append(items, rawItem{err: errors.New("inotify read: short read")})
		default:
			items = n.parse(buf[:nr], items)
		}
		n.sent.Add(uint64(len(items)))
		n.reading.Store(false)
		for _, it := range items {
			if it.err != nil {
				select {
				case n.errors <- it.err:
				case <-n.done:
					return
				}
				continue
			}
			select {
			case n.events <- it.ev:
			case <-n.done:
				return
			}
		}
	}
}

// parse turns the raw events in b into items, naming each by its watch's
// path, as fsnotify's inotify backend does.
func (n *inotifyNotifier) parse(b []byte, items []rawItem) []rawItem {
	n.mu.Lock()
	defer n.mu.Unlock()
	ne := binary.NativeEndian
	for len(b) >= syscall.SizeofInotifyEvent {
		wd := int32(ne.Uint32(b[0:]))
		mask := ne.Uint32(b[4:])
		nameLen := int(ne.Uint32(b[12:]))
		if syscall.SizeofInotifyEvent+nameLen > len(b) {
			break
		}
		raw := b[syscall.SizeofInotifyEvent : syscall.SizeofInotifyEvent+nameLen]
		b = b[syscall.SizeofInotifyEvent+nameLen:]
		if mask&syscall.IN_Q_OVERFLOW != 0 {
			items = append(items, rawItem{err: fsnotify.ErrEventOverflow})
			continue
		}
		path, ok := n.paths[wd]
		if !ok {
			continue // a watch removed since the event was queued
		}
		if mask&(syscall.IN_IGNORED|syscall.IN_UNMOUNT) != 0 {
			// The kernel dropped the watch (directory deleted, file system
			// unmounted, or inotify_rm_watch).
			delete(n.paths, wd)
			if n.wds[path] == wd {
				delete(n.wds, path)
			}
			continue
		}
		name := path
		for len(raw) > 0 && raw[len(raw)-1] == 0 {
			raw = raw[:len(raw)-1]
		}
		if len(raw) > 0 {
			name += "/" + string(raw)
		}
		var op fsnotify.Op
		if mask&(syscall.IN_CREATE|syscall.IN_MOVED_TO) != 0 {
			op |= fsnotify.Create
		}
		if mask&(syscall.IN_DELETE|syscall.IN_DELETE_SELF) != 0 {
			op |= fsnotify.Remove
		}
		if mask&syscall.IN_MODIFY != 0 {
			op |= fsnotify.Write
		}
		if mask&(syscall.IN_MOVED_FROM|syscall.IN_MOVE_SELF) != 0 {
			op |= fsnotify.Rename
		}
		if mask&syscall.IN_ATTRIB != 0 {
			op |= fsnotify.Chmod
		}
		if op != 0 {
			items = append(items, rawItem{ev: fsnotify.Event{Name: name, Op: op}})
		}
	}
	return items
}
