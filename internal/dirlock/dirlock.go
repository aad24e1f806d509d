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
// matter (Pin), with what was locked. A writer whose check fails has lost
// its lock: Check fails from then on, and the writer must stop
// acknowledging writes.
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

// statID returns the identity of the file path names.
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

type pin struct {
	path string
	id   fileID
}

// Lock is a held directory lock. Its methods are safe for concurrent use.
type Lock struct {
	dir   string
	dirF  *os.File
	dirID fileID
	name  string // the lock file's name in dir
	log   hclog.Logger

	mu     sync.Mutex
	file   *os.File // the lock file, flocked, holding this pid
	fileID fileID
	pins   []pin
	lost   error
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
	l := &Lock{dir: dir, dirF: dirF, name: name, log: log}
	lockPath := filepath.Join(dir, name)
	if err := flock(dirF); err != nil {
		dirF.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Path: lockPath, PID: readPID(lockPath)}
		}
		return nil, fmt.Errorf("flock %s: %w", dir, err)
	}
	if l.dirID, err = fstatID(dirF); err != nil {
		l.Release()
		return nil, fmt.Errorf("stat %s: %w", dir, err)
	}
	f, id, err := lockFile(lockPath)
	if err != nil {
		l.Release()
		return nil, err
	}
	l.file, l.fileID = f, id
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
		id, err := statID(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		l.pins = append(l.pins, pin{p, id})
	}
	return nil
}

// Check reports whether this process still holds the lock on the
// directory its path names. It stats the directory and each pinned path
// and compares them with what was locked: a few system calls, no I/O. A
// missing or replaced lock file is put back, locked; if another process
// has locked one there, the lock is lost. Once lost, Check returns the
// same *LostError for good, and the loss is logged once.
func (l *Lock) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if l.dirF == nil {
		return fmt.Errorf("dirlock: %s: lock released", l.dir)
	}
	if reason := l.moved(); reason != "" {
		return l.lose(reason)
	}
	lockPath := filepath.Join(l.dir, l.name)
	if id, err := statID(lockPath); err == nil && id == l.fileID {
		return nil
	}
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
	l.file, l.fileID = f, id
	return nil
}

// moved names the first locked or pinned path that no longer names the
// file it named when locked, or returns "".
func (l *Lock) moved() string {
	if id, err := statID(l.dir); err != nil {
		return fmt.Sprintf("%s is gone (%v)", l.dir, err)
	} else if id != l.dirID {
		return fmt.Sprintf("%s was removed or renamed and another directory made in its place", l.dir)
	}
	for _, p := range l.pins {
		if id, err := statID(p.path); err != nil {
			return fmt.Sprintf("%s is gone (%v)", p.path, err)
		} else if id != p.id {
			return fmt.Sprintf("%s was removed or renamed and another made in its place", p.path)
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
	return err
}
