//go:build !(linux && (amd64 || arm64))

package vfs

import "os"

// sameFileNoTimes is not available here: SameFileAt uses lstat.
func sameFileNoTimes(string, os.FileInfo) (same, ok bool, err error) { return false, false, nil }
