//go:build !unix

package main

// keepSysmonAwake does nothing where there is no exec (see sysmon_unix.go).
func keepSysmonAwake() {}
