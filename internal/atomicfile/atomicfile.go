// Package atomicfile holds cairn's crash-safe file primitives: WriteFile
// replaces a small file so that, after it returns nil, a crash leaves
// either the old content or the new one, never a mix, and the new name is
// durable (it relies on rename(2) being atomic and fsyncs the directory
// after the rename, a step many implementations skip). CreateFile does the
// same for a new file and returns it open under its final name; Temp is
// the step-by-step form both are built on, for a caller (compaction) that
// writes more between the first sync and the rename. SyncDir, Fdatasync,
// EnsureDir and OpenFlags are the pieces the append-only record logs
// (internal/recordlog) are built from.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cairn-dev/cairn/internal/vfs"
)

// TempPrefix starts the name of every temp file TempName makes, so
// recovery code can recognise and remove leftovers of a crash.
const TempPrefix = ".tmp-"

// OpenFlags are added to every open of a file cairn writes: never through a
// symlink, never inherited by a child process.
const OpenFlags = syscall.O_NOFOLLOW | syscall.O_CLOEXEC

// ErrNotDir is wrapped by EnsureDir's error when something other than a
// directory (a symlink, a file) stands where the directory should be.
var ErrNotDir = errors.New("not a real directory")

// TempName returns a fresh temp file name beside final, starting with
// TempPrefix.
func TempName(final string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(filepath.Dir(final), TempPrefix+filepath.Base(final)+"."+hex.EncodeToString(b[:]))
}

// SyncDir fsyncs a directory so the names created, renamed or removed in it
// are durable.
func SyncDir(dir string) error { return SyncDirFS(vfs.OS, dir) }

// SyncDirFS is SyncDir on fsys.
func SyncDirFS(fsys vfs.FS, dir string) error { return fsys.SyncDir(dir) }

// Fdatasync flushes f's data and the metadata needed to read it back
// (vfs.Fdatasync).
func Fdatasync(f *os.File) error { return vfs.Fdatasync(f) }

// EnsureDir makes dir a real 0700 directory: it creates it (and syncs its
// parent) when missing, and restores 0700 when its mode differs. A symlink
// or any other kind of file in its place is an error wrapping ErrNotDir.
func EnsureDir(dir string) error { return EnsureDirFS(vfs.OS, dir) }

// EnsureDirFS is EnsureDir on fsys.
func EnsureDirFS(fsys vfs.FS, dir string) error {
	fi, err := fsys.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := fsys.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Dir(dir), err)
		}
		fi, err = fsys.Lstat(dir)
	}
	switch {
	case err != nil:
		return fmt.Errorf("stat %s: %w", dir, err)
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: %w", dir, ErrNotDir)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: %w", dir, ErrNotDir)
	case fi.Mode().Perm() != 0o700:
		if err := fsys.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("chmod %s: %w", dir, err)
		}
	}
	return nil
}

// Steps of a Temp's life, passed to its fault hook so tests can fail each
// one as if the system call had failed (see NewTemp).
const (
	StepWrite       = "write"
	StepSync        = "sync"
	StepRename      = "rename"
	StepAfterRename = "after-rename"
)

// Temp is a new file being written under a temp name beside its final name.
// Nothing but Temp ever knows the temp name: Commit renames it into place
// and hands back the file under its final name, and Abort removes
// it, so no error or file a caller keeps can name a file that is gone.
type Temp struct {
	fs    vfs.FS
	f     vfs.File
	tmp   string
	final string
	fault func(step string) error
	done  bool
}

// NewTemp creates a temp file beside final (O_EXCL, perm), open for
// reading and writing. fault, when not nil, is called before each step
// (StepWrite, StepSync, StepRename, StepAfterRename); a non-nil error fails
// that step as if the system call had (a failing write leaves half its
// bytes behind).
func NewTemp(final string, perm os.FileMode, fault func(step string) error) (*Temp, error) {
	return NewTempFS(vfs.OS, final, perm, fault)
}

// NewTempFS is NewTemp on fsys.
func NewTempFS(fsys vfs.FS, final string, perm os.FileMode, fault func(step string) error) (*Temp, error) {
	tmp := TempName(final)
	f, err := vfs.OpenNoAtime(fsys, tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|OpenFlags, perm)
	if err != nil {
		return nil, fmt.Errorf("create temp file for %s: %w", final, err)
	}
	return &Temp{fs: fsys, f: f, tmp: tmp, final: final, fault: fault}, nil
}

func (t *Temp) step(name string) error {
	if t.fault == nil {
		return nil
	}
	return t.fault(name)
}

// WriteAt writes p at off of the temp file.
func (t *Temp) WriteAt(p []byte, off int64) error {
	if err := t.step(StepWrite); err != nil {
		_, _ = t.f.WriteAt(p[:len(p)/2], off)
		return fmt.Errorf("write %s (new): %w", t.final, err)
	}
	if _, err := t.f.WriteAt(p, off); err != nil {
		return fmt.Errorf("write %s (new): %w", t.final, err)
	}
	return nil
}

// Presync is Sync for content no guarantee needs durable when the name
// appears (vfs.File.Presync): zeros written ahead so that later writes
// over them change neither the file's size nor its blocks.
func (t *Temp) Presync() error {
	if err := t.f.Presync(); err != nil {
		return fmt.Errorf("sync %s (new): %w", t.final, err)
	}
	return nil
}

// Sync makes the temp file's content durable (vfs.File.Sync: fdatasync).
func (t *Temp) Sync() error {
	err := t.step(StepSync)
	if err == nil {
		err = t.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("sync %s (new): %w", t.final, err)
	}
	return nil
}

// Commit renames the temp file over the final name, fsyncs the directory
// and returns the file under its final name (the temp's descriptor
// is closed). The caller must have synced what it wrote.
//
// If the rename fails, the temp file is removed and Commit returns a nil
// file. If the rename happened but the directory sync failed, Commit
// returns the file and the error: the new name may not be durable, and
// the caller decides whether to take it back or stop writing.
func (t *Temp) Commit() (vfs.File, error) { return t.commit(t.fs.Rename) }

func (t *Temp) commit(rename func(tmp, final string) error) (vfs.File, error) {
	f, err := t.rename(rename)
	if f == nil {
		return nil, err
	}
	err = t.step(StepAfterRename)
	if err == nil {
		err = t.fs.SyncDir(filepath.Dir(t.final))
	}
	if err != nil {
		return f, fmt.Errorf("sync directory of %s: %w", t.final, err)
	}
	return f, nil
}

// Rename is Commit without the directory sync: the new name is durable
// only once the caller syncs the directory, which one sync after several
// renames into one directory does for them all.
func (t *Temp) Rename() (vfs.File, error) { return t.rename(t.fs.Rename) }

func (t *Temp) rename(rename func(tmp, final string) error) (vfs.File, error) {
	err := t.step(StepRename)
	if err == nil {
		err = rename(t.tmp, t.final)
	}
	if err != nil {
		t.Abort()
		return nil, fmt.Errorf("rename into %s: %w", t.final, err)
	}
	t.done = true
	return reopen(t.f, t.final)
}

// reopen returns the file old refers to under the name final, through a
// duplicate of its descriptor (vfs.File.Dup), and closes old. No new open
// is needed: the rename moved the very file old refers to.
func reopen(old vfs.File, final string) (vfs.File, error) {
	defer old.Close()
	f, err := old.Dup(final)
	if err != nil {
		return nil, fmt.Errorf("reopen %s: %w", final, err)
	}
	return f, nil
}

// Abort closes and removes the temp file. It does nothing after a
// successful rename, so it is safe to defer.
func (t *Temp) Abort() {
	if t.done {
		return
	}
	t.done = true
	t.f.Close()
	t.fs.Remove(t.tmp)
}

// Create is Commit for a file that did not exist before: when the rename
// happened but the directory sync failed, it takes the new name back
// (removes it), so on any error final is left as it was. The removal is
// not synced: a crash before the directory's next sync may bring the file
// back, but whole (its content was synced before the rename), so what
// surfaces is at worst a complete, unacknowledged creation.
//
// Create never replaces what is at final: whatever is there (a file, a
// directory, a link that appeared after the caller looked) stays, and
// Create fails with an error wrapping fs.ErrExist.
func (t *Temp) Create() (vfs.File, error) {
	f, err := t.commit(t.renameNoReplace)
	if err != nil && f != nil {
		f.Close()
		_ = t.fs.Remove(t.final)
		return nil, err
	}
	return f, err
}

// CreateFile writes data to a new file at final crash-safely (a Temp:
// write, fsync, rename, fsync the directory; Temp.Create) and returns it
// open for reading and writing under final's name. fault is as for
// NewTemp.
func CreateFile(final string, data []byte, perm os.FileMode, fault func(step string) error) (vfs.File, error) {
	return CreateFileFS(vfs.OS, final, data, perm, fault)
}

// CreateFileFS is CreateFile on fsys.
func CreateFileFS(fsys vfs.FS, final string, data []byte, perm os.FileMode, fault func(step string) error) (vfs.File, error) {
	t, err := NewTempFS(fsys, final, perm, fault)
	if err != nil {
		return nil, err
	}
	defer t.Abort()
	if err := t.WriteAt(data, 0); err != nil {
		return nil, err
	}
	if err := t.Sync(); err != nil {
		return nil, err
	}
	return t.Create()
}

// WriteFile replaces path with data: a temp file in the same directory
// (O_EXCL, perm), write, fsync, close, rename over path, fsync the
// directory. It refuses to replace a symlink or anything but a regular
// file. On error the temp file is removed and path is left as it was
// (except that, when only the directory sync failed, path may hold the
// new content).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFileFS(vfs.OS, path, data, perm)
}

// WriteFileFS is WriteFile on fsys.
func WriteFileFS(fsys vfs.FS, path string, data []byte, perm os.FileMode) error {
	return writeFile(fsys, path, data, perm, true)
}

// WriteFileDeferDirSyncFS is WriteFileFS without the directory sync: the
// content is durable when it returns, the name only once the caller syncs
// the directory (for a caller that creates several files in one directory
// and needs one sync for them all).
func WriteFileDeferDirSyncFS(fsys vfs.FS, path string, data []byte, perm os.FileMode) error {
	return writeFile(fsys, path, data, perm, false)
}

func writeFile(fsys vfs.FS, path string, data []byte, perm os.FileMode, syncDir bool) error {
	if fi, err := fsys.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("atomicfile: %s is not a regular file (a symlink?); refusing to replace it", path)
	}
	t, err := NewTempFS(fsys, path, perm, nil)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer t.Abort()
	if err := t.WriteAt(data, 0); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err := t.Sync(); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	commit := t.Commit
	if !syncDir {
		commit = t.Rename
	}
	f, err := commit()
	if f != nil {
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	return nil
}

// ReadAt reads back what was written to the temp file.
func (t *Temp) ReadAt(p []byte, off int64) (int, error) { return t.f.ReadAt(p, off) }

// renameNoReplace moves tmp to final unless something is at final. A hard
// link is the portable atomic way to do it (link(2) fails with EEXIST);
// where the file system has no hard links, a check just before the rename
// still keeps anything that was there first.
func (t *Temp) renameNoReplace(tmp, final string) error {
	err := t.fs.Link(tmp, final)
	switch {
	case err == nil:
		// The temp name is only a second name for the new file; if it
		// cannot go, it is a stale temp file, which Open removes.
		_ = t.fs.Remove(tmp)
		return nil
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s already exists; refusing to replace it: %w", final, fs.ErrExist)
	}
	if _, lerr := t.fs.Lstat(final); lerr == nil {
		return fmt.Errorf("%s already exists; refusing to replace it: %w", final, fs.ErrExist)
	}
	return t.fs.Rename(tmp, final)
}
