package vfs

import "syscall"

// noAtime is the open flag that leaves a file's atime alone (see OpenNoAtime).
const noAtime = syscall.O_NOATIME
