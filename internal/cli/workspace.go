package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/protocol"
)

// errNoWorkspace is returned by the commands that only read when there is
// no workspace to read: they create nothing.
var errNoWorkspace = errors.New("not in a cairn workspace")

// noWorkspaceError says where cairn looked for a workspace.
type noWorkspaceError struct{ dir string }

func (e *noWorkspaceError) Error() string {
	return fmt.Sprintf("not in a cairn workspace: no .cairn folder in %s or above it (\"cairn init\" makes one)", e.dir)
}

func (e *noWorkspaceError) Unwrap() error { return errNoWorkspace }

// dirError is a workspace directory that cannot be used.
type dirError struct {
	what string
	err  error
}

// Error names the directory and what is wrong with it, without the
// operations that found it (those are in Unwrap, for --log-level debug).
func (e *dirError) Error() string {
	var pe *fs.PathError
	if errors.As(e.err, &pe) {
		return e.what + ": " + pe.Err.Error()
	}
	return e.what + ": " + e.err.Error()
}

func (e *dirError) Unwrap() error { return e.err }

// creates reports whether the command line makes a workspace where there
// is none: init on purpose, import and daemon start as writes that need
// one. Every other command reads, or acts on a session that must exist.
func creates(pos []string) bool {
	switch pos[0] {
	case "init", "import":
		return true
	case "daemon":
		return len(pos) == 2 && pos[1] == "start"
	}
	return false
}

// resolveWorkspace sets e.workspace to the workspace the command works on:
// --workspace as given, else the one Discover finds from the current
// directory. Unless the command creates one, a workspace without .cairn/
// is errNoWorkspace, and nothing is created.
func (e *env) resolveWorkspace(mayCreate bool) error {
	var ws string
	var found bool
	var err error
	if e.workspace != "" {
		if ws, err = protocol.Workspace(e.workspace); err != nil {
			return &dirError{what: "workspace " + e.workspace, err: err}
		}
		fi, serr := os.Stat(layout.StateDir(ws))
		found = serr == nil && fi.IsDir()
	} else if ws, found, err = protocol.Discover(""); err != nil {
		return &dirError{what: "the current directory", err: err}
	}
	e.workspace = ws
	if !found && !mayCreate && e.socket == "" {
		return &noWorkspaceError{dir: ws}
	}
	return nil
}

// initCmd makes the workspace's .cairn/ (cairnd fills it on first use).
func (e *env) initCmd() error {
	dir := layout.StateDir(e.workspace)
	_, err := os.Stat(dir)
	existed := err == nil
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if e.json {
		return e.printJSON(map[string]any{"workspace": e.workspace, "created": !existed})
	}
	if existed {
		fmt.Fprintf(e.stdout, "%s is a cairn workspace already\n", e.workspace)
	} else {
		fmt.Fprintf(e.stdout, "made a cairn workspace in %s\n", e.workspace)
	}
	return nil
}
