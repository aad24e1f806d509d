package vfs

const sysStatx = 332
