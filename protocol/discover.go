package protocol

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/internal/layout"
)

// Discover finds the workspace for start (the current directory when
// empty) as git finds a repository: the nearest folder at or above start
// that holds .cairn/, else the nearest one that holds .git (a repository
// root, where a workspace is made on first use), else start itself. The
// result is canonical (see Workspace). found reports whether it holds
// .cairn/ already, so that a command that only reads can say there is no
// workspace instead of making one.
func Discover(start string) (ws string, found bool, err error) {
	dir, err := Workspace(start)
	if err != nil {
		return "", false, fmt.Errorf("protocol.Discover: %w", err)
	}
	repo := ""
	for d := dir; ; {
		if fi, err := os.Stat(layout.StateDir(d)); err == nil && fi.IsDir() {
			return d, true, nil
		}
		if repo == "" {
			// .git is a directory in a checkout, a file in a worktree.
			if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
				repo = d
			}
		}
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	if repo != "" {
		return repo, false, nil
	}
	return dir, false, nil
}
