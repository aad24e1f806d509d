package fsstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/session"
)

// ensureDir makes dir a real 0700 directory (atomicfile.EnsureDir); a
// symlink or other file in its place is invalid_argument.
func ensureDir(dir string) error {
	err := atomicfile.EnsureDir(dir)
	if errors.Is(err, atomicfile.ErrNotDir) {
		return session.Errorf(session.CodeInvalidArgument, "%v; the store refuses links out of .cairn", err)
	}
	return err
}

// createFile writes data to a new file at final crash-safely: a temp file in
// the same directory (O_EXCL, 0600), write, fsync, rename, fsync the
// directory. On any error the temp file is removed and final is left as it
// was. It returns the file, open for reading and writing at final.
func (s *Store) createFile(final string, data []byte) (*os.File, error) {
	tmp := atomicfile.TempName(final)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|atomicfile.OpenFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", tmp, err)
	}
	fail := func(step string, err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("%s %s: %w", step, tmp, err)
	}
	if err := s.fault(FaultCreateWrite); err != nil {
		_, _ = f.Write(data[:len(data)/2])
		return fail("write", err)
	}
	if _, err := f.Write(data); err != nil {
		return fail("write", err)
	}
	err = s.fault(FaultCreateSync)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fail("sync", err)
	}
	err = s.fault(FaultCreateRename)
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		return fail("rename", err)
	}
	err = s.fault(FaultCreateAfterRename)
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(final))
	}
	if err != nil {
		// The name may or may not be durable; take it back so a failed
		// create never surfaces later.
		f.Close()
		if rmErr := os.Remove(final); rmErr == nil {
			_ = atomicfile.SyncDir(filepath.Dir(final))
		}
		return nil, fmt.Errorf("sync dir of %s: %w", final, err)
	}
	return f, nil
}

// appendCommit appends one framed commit at offset size of f and makes it
// durable with one fdatasync. On failure it truncates f back to size; if even
// that fails, the returned broken error says the file must not be written
// again until the store is reopened.
func (s *Store) appendCommit(f *os.File, size int64, data []byte) (err error, broken error) {
	defer func() {
		if err == nil {
			return
		}
		terr := f.Truncate(size)
		if terr == nil {
			terr = atomicfile.Fdatasync(f)
		}
		if terr != nil {
			broken = fmt.Errorf("rollback of a failed commit to %s failed (%v); reopen the store", f.Name(), terr)
		}
	}()
	if err := s.fault(FaultCommitWrite); err != nil {
		_, _ = f.WriteAt(data[:len(data)/2], size)
		return fmt.Errorf("write %s: %w", f.Name(), err), nil
	}
	if _, err := f.WriteAt(data, size); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err), nil
	}
	if err := s.fault(FaultCommitAfterWrite); err != nil {
		return fmt.Errorf("write %s: %w", f.Name(), err), nil
	}
	err = s.fault(FaultCommitSync)
	if err == nil {
		err = atomicfile.Fdatasync(f)
	}
	if err != nil {
		return fmt.Errorf("fdatasync %s: %w", f.Name(), err), nil
	}
	if err := s.fault(FaultCommitAfterSync); err != nil {
		return fmt.Errorf("after sync %s: %w", f.Name(), err), nil
	}
	return nil, nil
}

// readAll reads the first size bytes of f.
func readAll(f *os.File, size int64) ([]byte, error) {
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if int64(n) != size {
		return nil, fmt.Errorf("read %s: %d of %d bytes: %v", f.Name(), n, size, err)
	}
	return data, nil
}
