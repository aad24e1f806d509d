package engine

// This file holds what the engine needs from its surroundings. The
// requests, results and events it serves are package api's.

import (
	"context"

	"github.com/cairn-dev/cairn/session"
)

// Workspace is the workspace tracker the engine consults when it has one
// (Options.Workspace): it records a manifest with every commit, names the
// files changed since a generation on ResumeSession, and the files touched
// after a run's last checkpoint on ResumeRun. *workspace.Tracker
// implements it.
type Workspace interface {
	// RecordManifest records the workspace's manifest now and returns its
	// reference.
	RecordManifest(ctx context.Context) (session.ManifestRef, error)
	// DiffFiles lists the files added, modified and deleted between the
	// manifest from and the manifest to (nil: the workspace now).
	DiffFiles(ctx context.Context, from session.ManifestRef, to *session.ManifestRef) (added, modified, deleted []string, err error)
}
