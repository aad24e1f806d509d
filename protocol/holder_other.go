//go:build !linux

package protocol

// processExe cannot tell a process's executable without /proc, so the
// embedded-holder check is Linux only; elsewhere Connect waits for a
// daemon as it would for one on its way out.
func processExe(int) (string, bool) { return "", false }
