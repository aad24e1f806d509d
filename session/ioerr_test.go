package session_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/session"
)

func TestFileError(t *testing.T) {
	const log = "/w/.cairn/sessions/s-a b.log"
	tmp := "/w/.cairn/sessions/" + atomicfile.TempPrefix + "s-a b.log.cd110f749e47"
	if got := atomicfile.TempName(log); !strings.HasPrefix(got, "/w/.cairn/sessions/"+atomicfile.TempPrefix+"s-a b.log.") || len(got) != len(tmp) {
		t.Fatalf("atomicfile.TempName(%q) = %q: FileError no longer recognises temp names", log, got)
	}
	write := func(errno syscall.Errno) error {
		return fmt.Errorf("write %s (new): %w", log, &fs.PathError{Op: "write", Path: tmp, Err: errno})
	}
	for _, tc := range []struct {
		name  string
		err   error
		code  session.Code
		msg   string
		errno syscall.Errno
	}{
		{"enospc", write(syscall.ENOSPC), session.CodeNoSpace, "op s: no space left on the device holding " + log, syscall.ENOSPC},
		{"edquot", write(syscall.EDQUOT), session.CodeNoSpace, "op s: disk quota exceeded on the device holding " + log, syscall.EDQUOT},
		{"efbig", write(syscall.EFBIG), session.CodeNoSpace, "op s: " + log + " would pass the largest file size allowed (the file system's, or the process's RLIMIT_FSIZE)", syscall.EFBIG},
		{"erofs create", fmt.Errorf("create temp file for %s: %w", log, &fs.PathError{Op: "open", Path: tmp, Err: syscall.EROFS}), session.CodeInternal, "op s: the file system holding " + log + " is read-only", syscall.EROFS},
		{"eacces", write(syscall.EACCES), session.CodeInternal, "op s: permission denied on " + log, syscall.EACCES},
		{"eperm rename", fmt.Errorf("rename into %s: %w", log, &os.LinkError{Op: "rename", Old: tmp, New: log, Err: syscall.EPERM}), session.CodeInternal, "op s: permission denied on " + log, syscall.EPERM},
		{"eio rename", fmt.Errorf("rename into %s: %w", log, &os.LinkError{Op: "rename", Old: tmp, New: log, Err: syscall.EIO}), session.CodeInternal, "op s: rename into " + log + ": rename " + log + " " + log + ": input/output error", syscall.EIO},
		{"coded internal", session.Wrap(session.CodeInternal, write(syscall.ENOSPC), "read"), session.CodeNoSpace, "op s: no space left on the device holding " + log, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := session.FileError(tc.err, log, "op %s", "s")
			var se *session.Error
			if !errors.As(err, &se) || se.Code != tc.code || se.Message != tc.msg {
				t.Fatalf("FileError = %#v\nwant code %s, message %q", err, tc.code, tc.msg)
			}
			if strings.Contains(err.Error(), atomicfile.TempPrefix) {
				t.Errorf("the message names a temp file: %v", err)
			}
			if !errors.Is(err, tc.errno) || !errors.Is(err, session.SentinelOf(tc.code)) {
				t.Errorf("%v: not errors.Is %v and its sentinel", err, tc.errno)
			}
		})
	}
	if err := session.FileError(nil, log, "op"); err != nil {
		t.Errorf("FileError(nil) = %v", err)
	}
	tooLarge := session.Errorf(session.CodeTooLarge, "big")
	if err := session.FileError(tooLarge, log, "op"); err != tooLarge {
		t.Errorf("a coded error was rewritten: %v", err)
	}
}
