package engine

import (
	"context"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/handoff"
	"github.com/cairn-dev/cairn/session"
)

// Handoff renders HANDOFF.md for the session's latest generation: the
// handoff record, runs, verification reports with their exact commands,
// the files changed in the session (between the manifests of its first and
// latest generations, when the workspace is tracked and the first
// generation is still kept), the git state, the restart path, risks and
// open decisions apart, and the next step. Whatever the session cannot
// prove is printed as unverified. Missing lists the required parts the
// handoff lacks (see handoff.Check).
func (e *Engine) Handoff(ctx context.Context, req api.HandoffRequest) (api.HandoffResult, error) {
	if err := e.checkSession(req.SessionID); err != nil {
		return api.HandoffResult{}, err
	}
	// The handoff renders runs, verifications, the handoff record and
	// files, never messages, artifacts or traces: the head is enough.
	st, _, err := e.store.Head(ctx, req.SessionID)
	if err != nil {
		return api.HandoffResult{}, wrapStore("Handoff", err)
	}
	snap := st.Snapshot
	files := e.sessionFiles(ctx, req.SessionID, snap)
	missing := handoff.Check(snap)
	md := handoff.Render(handoff.Input{
		Snapshot: snap,
		Files:    handoff.Files{Tracked: files.Tracked, Added: files.Added, Modified: files.Modified, Deleted: files.Deleted},
	})
	return api.HandoffResult{
		SessionID: req.SessionID, Generation: snap.Generation, Markdown: string(md),
		Complete: len(missing) == 0, Missing: nonNil(missing), Files: files,
	}, nil
}

// sessionFiles diffs the manifest of the session's first generation with
// that of latest.
func (e *Engine) sessionFiles(ctx context.Context, sid string, latest *session.Snapshot) api.Drift {
	switch {
	case e.ws == nil:
		return untracked("workspace tracking is off")
	case latest.Files == nil || latest.Files.ID == "":
		return untracked("the latest generation was saved without a workspace manifest")
	}
	// An earlier generation is Load's business; it costs generation 1.
	first, err := e.store.Load(ctx, sid, 1)
	if err != nil {
		return untracked("the session's first generation is no longer kept (compacted), so its files cannot be compared")
	}
	if first.Snapshot.Files == nil || first.Snapshot.Files.ID == "" {
		return untracked("the session's first generation was saved without a workspace manifest")
	}
	to := *latest.Files
	added, modified, deleted, err := e.ws.DiffFiles(ctx, *first.Snapshot.Files, &to)
	if err != nil {
		return untracked("the session's manifests cannot be compared: " + err.Error())
	}
	return api.Drift{Tracked: true, Added: nonNil(added), Modified: nonNil(modified), Deleted: nonNil(deleted)}
}
