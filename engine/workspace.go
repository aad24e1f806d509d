package engine

import (
	"context"
	"slices"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/procs"
	"github.com/cairn-dev/cairn/session"
)

// stamp records the workspace manifest in c (and in its loop checkpoint),
// when the engine tracks a workspace. A tracker failure never fails the
// commit: the generation is then saved without a manifest, and its drift
// is later reported as not tracked, with the reason.
func (e *Engine) stamp(ctx context.Context, c *session.Change) {
	if e.ws == nil {
		return
	}
	ref, err := e.ws.RecordManifest(ctx)
	if err != nil {
		e.log.Warn("recording the workspace manifest failed; committing without it", "error", err)
		return
	}
	if c.Replace != nil {
		c.Replace.Files = &ref // a replace carries its own files record
	} else {
		c.Files = &ref
	}
	if c.Checkpoint != nil {
		r := ref
		c.Checkpoint.Files = &r
	}
}

// drift compares the manifest from with the workspace now.
func (e *Engine) drift(ctx context.Context, from *session.ManifestRef) api.Drift {
	switch {
	case e.ws == nil:
		return untracked("workspace tracking is off")
	case from == nil || from.ID == "":
		return untracked("this generation was saved without a workspace manifest")
	}
	added, modified, deleted, err := e.ws.DiffFiles(ctx, *from, nil)
	if err != nil {
		return untracked("the manifest of this generation cannot be compared: " + err.Error())
	}
	d := api.Drift{Tracked: true, Added: nonNil(added), Modified: nonNil(modified), Deleted: nonNil(deleted)}
	if from.Inexact {
		d.Reason = inexactDrift
	}
	return d
}

// inexactDrift is the Reason of a drift measured from an inexact manifest.
const inexactDrift = "the manifest of this generation was recorded while the workspace tracker was polling (inotify watch limit reached); files changed shortly before the save may be listed too"

// touched lists every path of d once, sorted.
func touched(d api.Drift) []string {
	out := slices.Concat(d.Added, d.Modified, d.Deleted)
	slices.Sort(out)
	return nonNil(slices.Compact(out))
}

// probeProcesses runs the health check of every recorded process, now and
// concurrently, bounded by the probe timeout. A process that was running
// when the session was saved is never assumed to be running still.
func (e *Engine) probeProcesses(ctx context.Context, rt *session.Runtime) []api.ProcessState {
	if rt == nil || len(rt.Processes) == 0 {
		return []api.ProcessState{}
	}
	if e.probe < 0 {
		out := make([]api.ProcessState, len(rt.Processes))
		for i, p := range rt.Processes {
			out[i] = api.ProcessState{Name: p.Name, State: procs.StateUnknown, Detail: "health checks are off"}
		}
		return out
	}
	if e.root != "" {
		rt = procs.Rooted(rt, e.root)
	}
	return procs.Probe(ctx, rt, e.probe)
}

// untracked is the drift of a generation whose files cannot be compared,
// and why: not "no changes", which would be a claim.
func untracked(reason string) api.Drift {
	return api.Drift{Reason: reason, Added: []string{}, Modified: []string{}, Deleted: []string{}}
}
