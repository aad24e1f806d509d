package vfs

const sysStatx = 291
