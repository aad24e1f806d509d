//go:build linux && arm64

package main

const sysStatx = 291
