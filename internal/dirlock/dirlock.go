//go:build linux || darwin

// Package dirlock holds a store directory's single-writer lock in a way that
// cannot be lost silently.
//
// A lock file alone can be: delete it under a running writer and a second
// writer creates a new one, locks it and serves the same store. So the lock
// is a flock on the directory itself, taken through a descriptor held for
// the life of the Lock, and a file can no longer be deleted out from under
// it. The directory can still be renamed away (or a parent of it) and a new
// one made in its place, which a second writer could lock; so Check, called
// before and after every write a writer acknowledges, compares the identity
// (device and inode) of the directory's path, and of the other paths that
// matter (Pin), with what was locked. The directory's path is walked
// whole at every check (a parent of it may have been renamed); once it
// names the locked directory, the paths inside it are looked up in it
// through the descriptor, one name each. A writer whose check fails has lost
// its lock: Check fails from then on, and the writer must stop
// acknowledging writes.
//
// On Linux an inotify watch of those paths lets Check skip its stats
// while nothing they look at has changed (watch_linux.go): one read(2)
// instead of a stat of each path, and a full check at least once a second
// for what inotify does not report.
//
// The lock file (LOCK) is kept as well: it holds the holder's pid for the
// error a second writer gets, and older builds, which lock only the file,
// are kept out by it. Check puts it back, locked, when it is missing.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// ErrHeld is wrapped by the *HeldError Acquire returns when another holder
// has the lock.
var ErrHeld = errors.New("dirlock: held by another process")

// ErrLost is wrapped by the *LostError Check returns once the lock is lost.
var ErrLost = errors.New("dirlock: lock lost")

// HeldError reports that another open of the directory holds its lock.
type HeldError struct {
	Path string // the lock file
	PID  int    // the holder's pid, 0 if unknown
}

func (e *HeldError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s is held by another process (pid %d)", e.Path, e.PID)
	}
	return fmt.Sprintf("%s is held by another process (pid unknown)", e.Path)
}

// Unwrap returns ErrHeld.
func (e *HeldError) Unwrap() error { return ErrHeld }

// LostError reports that the directory this process locked is no longer
// the one its path names.
type LostError struct {
	Dir    string // the locked directory's path
	Reason string // what happened
}

func (e *LostError) Error() string {
	return fmt.Sprintf("the writer lock on %s is lost: %s; this process takes no more writes there "+
		"(writes it acknowledged before are in the directory it locked). Stop it, make sure no other process "+
		"serves %s, and start it again", e.Dir, e.Reason, e.Dir)
}

// Unwrap returns ErrLost.
func (e *LostError) Unwrap() error { return ErrLost }

// fileID is what makes a file the same file: device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *syscall.Stat_t) fileID { return fileID{uint64(st.Dev), uint64(st.Ino)} }

// statID returns the identity of the file path names (at Acquire and Pin).
func statID(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return idOf(&st), nil
}

func fstatID(f *os.File) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	return idOf(&st), nil
}

// target is a path Check stats and the identity it must have. An entry
// of the locked directory (its path the directory's path, a slash and one
// name) is looked up by that name relative to the directory's descriptor,
// which Check has just found its path names: the same file a walk of the
// whole path reaches, for one lookup instead of the walk. Any other path
// is walked whole. name is NUL-terminated and made once, so a Check
// copies no path and allocates nothing.
type target struct {
	path string
	at   int   // the descriptor name is relative to, or atFdcwd
	name *byte // NUL-terminated
	id   fileID
}

// target returns path's target with identity id.
func (l *Lock) target(path string, id fileID) (target, error) {
	t := target{path: path, at: atFdcwd, id: id}
	rel := path
	if name, ok := strings.CutPrefix(path, l.dir+"/"); ok && name != "" && name != "." && name != ".." && !strings.Contains(name, "/") {
		t.at, rel = l.dirFd, name
	}
	var err error
	t.name, err = syscall.BytePtrFromString(rel)
	return t, err
}

// check returns why t's path no longer names the file it named, or "".
func (t *target) check(what string) string {
	var st syscall.Stat_t
	if err := statAt(t, &st); err != nil {
		return fmt.Sprintf("%s is gone (%v)", t.path, err)
	} else if idOf(&st) != t.id {
		return fmt.Sprintf("%s was removed or renamed and %s made in its place", t.path, what)
	}
	return ""
}

// Lock is a held directory lock. Its methods are safe for concurrent use.
type Lock struct {
	dir   string
	dirF  *os.File
	dirFd int // dirF's descriptor, open until Release
	dirT  target
	log   hclog.Logger

	mu    sync.Mutex
	file  *os.File // the lock file, flocked, holding this pid
	lockT target   // the lock file's path, with file's identity
	pins  []target
	lost  error

	// w, when not nil, lets Check skip its stats while nothing can have
	// changed (watch_linux.go); quiet is its epoch at the last Check whose
	// stats passed. wErr says why there is no watch.
	w     *watch
	wErr  error
	quiet uint64
}

// Acquire takes the exclusive lock on dir (which must exist) and on the
// lock file name inside it, without waiting, and writes this process's pid
// into the lock file. When another open file description holds either (in
// this process or another), it returns a *HeldError naming the holder's
// pid. log receives the one error line a lost lock logs, and a warning
// when the lock file is put back; nil discards them.
func Acquire(dir, name string, log hclog.Logger) (*Lock, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	dirF, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	l := &Lock{dir: dir, dirF: dirF, dirFd: int(dirF.Fd()), log: log}
	lockPath := filepath.Join(dir, name)
	if err := flock(dirF); err != nil {
		dirF.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Path: lockPath, PID: readPID(lockPath)}
		}
		return nil, fmt.Errorf("flock %s: %w", dir, err)
	}
	dirID, err := fstatID(dirF)
	if err == nil {
		l.dirT, err = l.target(dir, dirID)
	}
	if err != nil {
		l.Release()
		return nil, fmt.Errorf("stat %s: %w", dir, err)
	}
	f, id, err := lockFile(lockPath)
	if err == nil {
		l.file = f
		if l.lockT, err = l.target(lockPath, id); err != nil {
			err = fmt.Errorf("lock %s: %w", lockPath, err)
		}
	}
	if err != nil {
		l.Release()
		return nil, err
	}
	l.wErr = errors.New("no watch asked for (Watch)")
	return l, nil
}

// lockFile opens (creating) and flocks the lock file at path and writes this
// process's pid into it.
func lockFile(path string) (*os.File, fileID, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fileID{}, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fileID{}, &HeldError{Path: path, PID: readPID(path)}
		}
		return nil, fileID{}, fmt.Errorf("flock %s: %w", path, err)
	}
	id, err := fstatID(f)
	if err != nil {
		f.Close()
		return nil, fileID{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, id, nil
}

func flock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// readPID reads the holder's pid from the lock file at path. The holder
// writes it just after taking the lock, so a racing reader may briefly see
// an empty file; retry a little.
func readPID(path string) int {
	for i := 0; i < 20; i++ {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
			return pid
		}
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// Pin records the identity of each path (directories the writer writes
// into by name) so Check also fails when one of them is replaced.
func (l *Lock) Pin(paths ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range paths {
		// Watched before its identity is taken: a change after the stat
		// is then an event.
		if l.w != nil {
			if err := l.w.add(p); err != nil {
				l.w.close()
				l.w, l.wErr = nil, err
			}
		}
		id, err := statID(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		t, err := l.target(p, id)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		l.pins = append(l.pins, t)
	}
	l.w.bump() // the next Check stats the new pins
	return nil
}

// Watch lets Check skip its stats while nothing they look at has changed:
// an inotify instance watching the directory, its pins (those pinned
// later too) and their parents (Linux only; see watch_linux.go). It costs
// the process one inotify instance, of the user's fs.inotify.
// max_user_instances. When it returns an error (no inotify, the limit
// reached, a path it cannot trust a watch for), Check stats every time, as
// without it.
func (l *Lock) Watch() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil || l.dirF == nil {
		return l.wErr
	}
	w, err := newWatch(l.dir)
	for i := 0; err == nil && i < len(l.pins); i++ {
		err = w.add(l.pins[i].path)
	}
	if err != nil {
		w.close()
		l.wErr = err
		return err
	}
	l.w, l.wErr = w, nil
	return nil
}

// Watching returns nil when Check can skip its stats while nothing they
// look at has changed (an inotify watch, Linux only; see watch_linux.go),
// or why it stats every time.
func (l *Lock) Watching() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return l.wErr
	}
	if _, ok := l.w.poll(); !ok {
		return errors.New("the watch saw a watched directory moved, deleted or unmounted, or lost events; every check stats")
	}
	return nil
}

// Epoch returns a number that moves on whenever a name may have been
// made, removed or renamed in the locked directory or a pinned one, or
// one of them or a parent moved, and by itself at least once a second. An
// owner that found, by a stat, that a path in a pinned directory names
// what it should, with Epoch at e before that stat, need not stat it again
// while Epoch returns e. ok is false when the lock cannot tell (no watch,
// or the lock lost or released): then stat every time.
func (l *Lock) Epoch() (e uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil || l.dirF == nil {
		return 0, false
	}
	return l.w.poll()
}

// Check reports whether this process still holds the lock on the
// directory its path names. It stats the directory by its path, then each
// pinned path and the lock file, and compares them with what was locked:
// a few system calls, no I/O, nothing allocated. Those that are entries of
// the directory are looked up by name in the directory's descriptor once
// its path has been found to name it (target), not by walking their whole
// paths again. With a watch (Watching) it is one read(2) instead while no
// name in the directory or a pin has changed, nothing has moved, and the
// last full check is less than a second old. A missing or replaced lock
// file is put back, locked; if another process has locked one there, the
// lock is lost. Once lost, Check returns the same *LostError for good, and
// the loss is logged once.
func (l *Lock) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if l.dirF == nil {
		return fmt.Errorf("dirlock: %s: lock released", l.dir)
	}
	// The epoch is read before the stats: a change after it moves it on.
	e, watched := l.w.poll()
	if watched && e == l.quiet {
		return nil
	}
	if reason := l.moved(); reason != "" {
		return l.lose(reason)
	}
	var st syscall.Stat_t
	if err := statAt(&l.lockT, &st); err == nil && idOf(&st) == l.lockT.id {
		if watched {
			l.quiet = e
		}
		return nil
	}
	lockPath := l.lockT.path
	f, id, err := lockFile(lockPath)
	var held *HeldError
	switch {
	case errors.As(err, &held):
		return l.lose(fmt.Sprintf("its lock file %s was replaced, and another process (pid %d) holds the new one", lockPath, held.PID))
	case err != nil:
		// The directory is still ours and still locked: the missing pid
		// file costs only the pid in a second writer's error.
		l.log.Warn("cannot put back a removed lock file", "path", lockPath, "error", err)
		return nil
	}
	l.log.Warn("the lock file was removed or replaced under a running writer; put it back", "path", lockPath)
	_ = syscall.Flock(int(l.file.Fd()), syscall.LOCK_UN)
	l.file.Close()
	l.file, l.lockT.id = f, id
	return nil
}

// moved names the first locked or pinned path that no longer names the
// file it named when locked, or returns "". The directory's own path
// comes first: the entries of it that are looked up through its
// descriptor (target) name what their paths do only while it does.
func (l *Lock) moved() string {
	if r := l.dirT.check("another directory"); r != "" {
		return r
	}
	for i := range l.pins {
		if r := l.pins[i].check("another"); r != "" {
			return r
		}
	}
	return ""
}

func (l *Lock) lose(reason string) error {
	l.lost = &LostError{Dir: l.dir, Reason: reason}
	l.log.Error("writer lock lost; refusing every write from now on", "dir", l.dir, "reason", reason)
	return l.lost
}

// Release unlocks and closes the lock file and the directory.
func (l *Lock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.file != nil {
		_ = syscall.Flock(int(l.file.Fd()), syscall.LOCK_UN)
		err = l.file.Close()
		l.file = nil
	}
	if l.dirF != nil {
		_ = syscall.Flock(int(l.dirF.Fd()), syscall.LOCK_UN)
		if cerr := l.dirF.Close(); err == nil {
			err = cerr
		}
		l.dirF = nil
	}
	l.w.close()
	return err
}
