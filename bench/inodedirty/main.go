//go:build linux

// Command inodedirty measures what a commit's other file system calls do
// to its fdatasync on Linux: a loop of 8 KiB overwrites of zeros already
// written and synced (as fsstore's appends over its zeros ahead), each
// followed by fdatasync, with one of these before each write:
//
//	none          nothing
//	lstat         lstat of the file's path (as fsstore's checkLogFile did)
//	statx-ino     statx asking for the type and inode number only
//	              (vfs.SameFileAt, as checkLogFile; lstat off amd64/arm64)
//	pread         a 4 KiB pread of what the last write wrote (as a head read)
//	pread-noatime the same, the file opened with O_NOATIME
//
// With multigrain timestamps (Linux 6.13 and later; ext4 among others) a
// stat that asks for the times marks them queried, and the next write then
// gives the file a new fine-grained mtime: the inode changes on every
// write, where a coarse mtime changes once per clock tick. A read updates
// the atime under relatime whenever the mtime has moved past it. On ext4
// without a journal, fdatasync writes a changed inode's block too, a second
// device write per commit. Count them with
//
//	perf stat -e ext4:ext4_mark_inode_dirty go run ./bench/inodedirty -mode lstat
//
// Usage: go run ./bench/inodedirty [-dir DIR] [-n 2000] [-rounds 3] [-mode all|NAME,...]
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/internal/vfs"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "where the test file goes (its file system is measured)")
	n := flag.Int("n", 2000, "writes per run")
	rounds := flag.Int("rounds", 3, "rounds; each runs every mode")
	modes := flag.String("mode", "all", "comma-separated modes, or all")
	flag.Parse()
	all := []string{"none", "lstat", "statx-ino", "pread", "pread-noatime"}
	use := all
	if *modes != "all" {
		use = strings.Split(*modes, ",")
	}
	for r := 1; r <= *rounds; r++ {
		for _, m := range use {
			med, p90, err := run(*dir, m, *n)
			if err != nil {
				fmt.Fprintln(os.Stderr, "inodedirty:", err)
				os.Exit(1)
			}
			fmt.Printf("round %d  %-14s write+fdatasync median %4d us  p90 %4d us\n", r, m, med.Microseconds(), p90.Microseconds())
		}
	}
}

// run times n overwrites+fdatasync of a fresh file in dir, with mode's
// call before each write.
func run(dir, mode string, n int) (med, p90 time.Duration, err error) {
	const size = 8192
	flags := os.O_CREATE | os.O_RDWR | os.O_EXCL
	if mode == "pread-noatime" {
		flags |= syscall.O_NOATIME
	}
	path := fmt.Sprintf("%s/inodedirty-%d-%s", dir, os.Getpid(), mode)
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	if _, err := f.WriteAt(make([]byte, n*size), 0); err != nil {
		return 0, 0, err
	}
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = 'x'
	}
	rd := make([]byte, 4096)
	ts := make([]time.Duration, 0, n)
	for i := range n {
		switch mode {
		case "lstat":
			if _, err := os.Lstat(path); err != nil {
				return 0, 0, err
			}
		case "statx-ino":
			// What fsstore's checkLogFile calls: a statx of the type and
			// inode only.
			if _, err := vfs.SameFileAt(vfs.OS, path, fi); err != nil {
				return 0, 0, err
			}
		case "pread", "pread-noatime":
			if i > 0 {
				if _, err := f.ReadAt(rd, int64((i-1)*size)); err != nil {
					return 0, 0, err
				}
			}
		case "none":
		default:
			return 0, 0, fmt.Errorf("unknown mode %q", mode)
		}
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i*size)); err != nil {
			return 0, 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, 0, err
		}
		ts = append(ts, time.Since(t0))
	}
	slices.Sort(ts)
	return ts[n/2], ts[n*9/10], nil
}
