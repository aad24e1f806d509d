//go:build linux && amd64

package main

const sysStatx = 332
