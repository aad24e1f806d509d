//go:build !linux

package vfs

// noAtime is 0 where there is no O_NOATIME.
const noAtime = 0
