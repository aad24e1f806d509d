// Package zerofile makes the data files of the benchmarks' floors: a file
// of zeros written through once and made durable, so that a later write
// into it is an overwrite whose fdatasync flushes data and no metadata.
package zerofile

import (
	"fmt"
	"os"
)

// Create creates (or truncates) path as size bytes of zeros, written and
// fsynced, and returns it open for reading and writing.
func Create(path string, size int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; left -= len(zeros) {
		if _, err := f.Write(zeros[:min(left, len(zeros))]); err != nil {
			f.Close()
			return nil, fmt.Errorf("write zeros: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("fsync: %w", err)
	}
	return f, nil
}
