// Package layout owns the names of cairn's state directory in a workspace,
// <workspace>/.cairn, and of everything cairn keeps in it. Every package
// that reads or writes there takes its paths from here:
//
//	.cairn/                 0700; its .gitignore holds "*"; flock'd by the store's writer
//	  .gitignore
//	  LOCK                  the session store's writer lock (fsstore)
//	  sessions/             one record log per session (fsstore)
//	  workflows/            one record log per workflow (fsstore)
//	  manifests/            workspace manifests and their own LOCK (workspace)
//	  quarantine/           damaged logs and trimmed tails, kept, never read (fsstore)
//	  .cookie-*             Sync cookies, created and removed at once (workspace)
//	  cairnd.sock           the daemon's socket (daemon, protocol)
//	  cairnd.addr           the socket's path when the default one is too long
//	  cairnd.log            an autostarted daemon's standard error (protocol)
//	  logs/                 output of processes cairn restarts (procs)
//
// What is inside sessions/, workflows/ and manifests/ belongs to the
// package named beside each.
package layout

import "path/filepath"

// Names inside a workspace and inside Dir.
const (
	// Dir is the workspace's cairn directory, relative to the workspace.
	Dir = ".cairn"

	GitignoreName  = ".gitignore"
	LockName       = "LOCK"
	SessionsName   = "sessions"
	WorkflowsName  = "workflows"
	ManifestsName  = "manifests"
	QuarantineName = "quarantine"
	// CookiePrefix starts the name of every Sync cookie file in Dir.
	CookiePrefix  = ".cookie-"
	SocketName    = "cairnd.sock"
	AddrFileName  = "cairnd.addr"
	DaemonLogName = "cairnd.log"
	LogsName      = "logs"
)

// StateDir returns <workspace>/.cairn.
func StateDir(workspace string) string { return filepath.Join(workspace, Dir) }

// Gitignore returns <workspace>/.cairn/.gitignore.
func Gitignore(workspace string) string { return in(workspace, GitignoreName) }

// Lock returns <workspace>/.cairn/LOCK, the session store's writer lock.
func Lock(workspace string) string { return in(workspace, LockName) }

// Sessions returns <workspace>/.cairn/sessions.
func Sessions(workspace string) string { return in(workspace, SessionsName) }

// Workflows returns <workspace>/.cairn/workflows.
func Workflows(workspace string) string { return in(workspace, WorkflowsName) }

// Manifests returns <workspace>/.cairn/manifests.
func Manifests(workspace string) string { return in(workspace, ManifestsName) }

// Quarantine returns <workspace>/.cairn/quarantine, where the session
// store keeps the bytes of damaged logs it will not read.
func Quarantine(workspace string) string { return in(workspace, QuarantineName) }

// Socket returns <workspace>/.cairn/cairnd.sock, the daemon's default
// socket path.
func Socket(workspace string) string { return in(workspace, SocketName) }

// AddrFile returns <workspace>/.cairn/cairnd.addr, which holds the socket
// path when the default one is too long for sun_path.
func AddrFile(workspace string) string { return in(workspace, AddrFileName) }

// DaemonLog returns <workspace>/.cairn/cairnd.log.
func DaemonLog(workspace string) string { return in(workspace, DaemonLogName) }

// Logs returns <workspace>/.cairn/logs, where restarted processes' output
// goes.
func Logs(workspace string) string { return in(workspace, LogsName) }

func in(workspace, name string) string { return filepath.Join(workspace, Dir, name) }
