package procs

import "errors"

// States of a recorded process, as Probe reports them.
const (
	// StateNotRunning: nothing answers: connection refused, nothing
	// listening on the recorded port.
	StateNotRunning = "not_running"
	// StateHealthy: the health check passed.
	StateHealthy = "healthy"
	// StateUnhealthy: something answers, but with the wrong status or exit
	// code, or not within the timeout.
	StateUnhealthy = "unhealthy"
	// StateUnknown: there is no way to tell (no health check to run, a
	// health check that cannot run or is refused, a cancelled probe).
	StateUnknown = "unknown"
)

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrNotLoopback is returned (wrapped in an invalid_argument error)
	// for an HTTP health check whose URL is not on loopback. Nothing is
	// dialled.
	ErrNotLoopback = errors.New("procs: health check URL is not on loopback")
	// ErrTimeout is returned by Restart when the started process's health
	// check did not pass in time; the process group was killed.
	ErrTimeout = errors.New("procs: health check did not pass in time")
	// ErrExited is returned by Restart when the started process exited with
	// a failure before its health check passed.
	ErrExited = errors.New("procs: process exited before its health check passed")
	// ErrPortBusy is returned by Restart when the recorded port already
	// accepts connections but the health check does not pass: starting a
	// second copy would only collide. Nothing was started.
	ErrPortBusy = errors.New("procs: recorded port already in use")
)
