// Package procs probes and restarts the processes a session recorded
// (session.Runtime): dev servers, watchers, databases the work depended on.
// A recorded process is a way to bring something back, never a claim that
// it is alive: cairn keeps the command, cwd, environment variable names,
// port and health check, and this package finds out, right now, what state
// each one is in.
//
// It serves the runtime record of docs/DESIGN.md §2.1 (session.Runtime); it
// is not named runtime so that it does not shadow the standard library's.
//
// # Guarantees
//
//   - Probe is bounded: each process gets one health check with the given
//     timeout, all processes concurrently, and a health command that
//     outlives it is killed with its process group.
//   - HTTP health checks go to loopback only (127.0.0.0/8, ::1,
//     "localhost"). Anything else is refused with ErrNotLoopback before any
//     connection is made; the dialer re-checks every address it connects
//     to, "localhost" is dialled as 127.0.0.1 then ::1 without a DNS
//     lookup, no proxy is used and redirects are not followed.
//   - Restart never starts a process whose health check passes now, nor a
//     second copy while something accepts connections on its recorded
//     port. It starts the command detached (its own session and process
//     group, stdin from /dev/null, stdout and stderr appended to a log
//     file), then proves it healthy or kills the whole process group it
//     started (SIGTERM, then SIGKILL) and says why, naming the last
//     failure.
//   - Environment values are never read into anything this package
//     returns or writes: a process inherits the environment as it is, and
//     only the names of recorded keys that are missing are reported.
//
// # Caveats
//
//   - A command health check cannot tell "not running" from "unhealthy" on
//     its own: when it fails and a port is recorded, the port decides
//     (nothing listening: not_running); otherwise it is unhealthy.
//   - A process with no health check and no port can be started but not
//     proven up; Restart reports its state as unknown.
//   - Killing a process group reaches every process that stayed in it.
//     A descendant that left the group (setsid, or a daemonizing
//     double-fork) is out of reach. Between the group leader being reaped
//     and the group being signalled, its id could in theory be reused; the
//     window is one poll interval.
//   - Restart keeps one goroutine per started process waiting for it, so it
//     is reaped when it exits; if the caller exits first, the process lives
//     on (it is in its own session) and init reaps it.
package procs
