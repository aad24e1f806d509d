//go:build unix

package main

import (
	"os"
	"strings"
	"syscall"
)

// schedtraceNever is GODEBUG's schedtrace at its largest: a scheduler trace
// every 2^31-1 ms, i.e. one line on stderr per 24.8 days of the machine's
// uptime, and a fuller dump should the runtime die of a fatal error.
const schedtraceNever = "schedtrace=2147483647"

// keepSysmonAwake re-executes cairnd (same pid, arguments and environment)
// with schedtraceNever added to GODEBUG, unless GODEBUG sets schedtrace
// already; it returns only if it does not re-execute.
//
// The runtime's monitor thread (sysmon) goes into a deep sleep whenever
// every P is idle, which for a daemon is between any two requests; the
// next request's first system call wakes it, and it then polls every 20 us
// and only starts backing off after 1 ms. A daemon answering one agent
// turn every few hundred microseconds so paid for a dozen or more of those
// wake-ups per request: perf put sysmon at 16% of cairnd's CPU under
// lockstep agent turns. The runtime skips the deep sleep when schedtrace
// is set (runtime/proc.go, sysmon), and sysmon, with nothing to retake,
// backs off to its 10 ms period instead. cairnd's CPU per turn fell by a
// quarter to a third (docs/PERFORMANCE.md). The price: an idle cairnd's
// sysmon wakes every 10 ms rather than sleeping, and when every P is
// blocked in a system call after a quiet spell, a waiting goroutine may
// wait up to 10 ms for sysmon to take one back, once, before sysmon is
// back to 20 us. The runtime reads schedtrace only at start, hence the
// exec.
func keepSysmonAwake() {
	godebug, set := os.LookupEnv("GODEBUG")
	for _, kv := range strings.Split(godebug, ",") {
		if strings.HasPrefix(kv, "schedtrace=") {
			return // the operator's choice
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return // then without: a slower daemon, not a broken one
	}
	if set && godebug != "" {
		godebug += ","
	}
	env := []string{"GODEBUG=" + godebug + schedtraceNever}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") { // the first one would win
			env = append(env, kv)
		}
	}
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
}
