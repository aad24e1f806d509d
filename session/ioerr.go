package session

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"syscall"
)

// tempPrefix starts the name of every temp file cairn writes beside a file
// it replaces or creates (internal/atomicfile.TempPrefix; a test keeps the
// two equal).
const tempPrefix = ".tmp-"

// FileError returns err, the failure of a write to the file at path (a
// session's or workflow's log, a manifest), as a coded error whose message
// is the formatted operation, ": ", and a plain account naming path:
//
//   - ENOSPC, EDQUOT and EFBIG are CodeNoSpace: the file system is full,
//     the quota spent, or the file would pass the largest size allowed
//     (RLIMIT_FSIZE gives EFBIG);
//   - EROFS says the file system is read-only, EACCES and EPERM that
//     permission is denied on path; both stay CodeInternal, as no other
//     code means them (protocol/PROTOCOL.md §7 says why);
//   - any other failure is CodeInternal with the cause's text.
//
// No message names a temp file: the temp files beside path are gone when
// the write fails, so their names are replaced with path. The cause stays
// reachable through errors.Is and errors.As (for a classified errno, as a
// *fs.PathError on path). An err that already has a code other than
// CodeInternal (too_large, invalid_argument …) is returned as it is; nil
// gives nil.
func FileError(err error, path, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if CodeOf(err) != CodeInternal {
		return err
	}
	op := fmt.Sprintf(format, args...)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		code, plain := CodeInternal, ""
		switch errno {
		case syscall.ENOSPC:
			code, plain = CodeNoSpace, "no space left on the device holding "+path
		case syscall.EDQUOT:
			code, plain = CodeNoSpace, "disk quota exceeded on the device holding "+path
		case syscall.EFBIG:
			code, plain = CodeNoSpace, path+" would pass the largest file size allowed (the file system's, or the process's RLIMIT_FSIZE)"
		case syscall.EROFS:
			plain = "the file system holding " + path + " is read-only"
		case syscall.EACCES, syscall.EPERM:
			plain = "permission denied on " + path
		}
		if plain != "" {
			return &Error{Code: code, Message: op + ": " + plain, Err: &fs.PathError{Op: "write", Path: path, Err: errno}}
		}
	}
	return &Error{Code: CodeInternal, Message: op + ": " + withoutTemps(err.Error(), path), Err: err}
}

// withoutTemps replaces in msg the name of every temp file beside path
// (tempPrefix, the base name of a file in path's directory, "." and hex
// digits) with path.
func withoutTemps(msg, path string) string {
	re := regexp.MustCompile(regexp.QuoteMeta(filepath.Join(filepath.Dir(path), tempPrefix)) + `[^/]*?\.[0-9a-f]{12}\b`)
	return re.ReplaceAllLiteralString(msg, path)
}
