package dirlock

import "syscall"

const sysFstatat = syscall.SYS_FSTATAT
