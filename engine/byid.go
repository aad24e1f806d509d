package engine

import (
	"context"
	"slices"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// artifactsByIDReader is a store that reads artifacts by id in one pass
// (fsstore): present ones in the order named, missing ones skipped, fit
// asked before each one's data is read.
type artifactsByIDReader interface {
	ArtifactsByID(ctx context.Context, sessionID string, ids []string, fit func(session.Artifact) bool) (session.Page[session.Artifact], error)
}

// byIDTries bounds how often the generic path re-reads when a commit lands
// between its metadata and data reads.
const byIDTries = 8

// ArtifactsByID returns, with their data, the named artifacts the session
// holds, in the order named, skipping ids it does not hold: a saver's
// "these records, if present" in one call. At most api.MaxArtifactIDs
// distinct ids; the answer stops before the artifact that would pass the
// reply size limit (Next says where to go on), and a first artifact that
// alone passes it is too_large.
func (e *Engine) ArtifactsByID(ctx context.Context, req api.ArtifactsByIDRequest) (api.ArtifactsByIDResult, error) {
	sid := req.SessionID
	if err := e.checkSession(sid); err != nil {
		return api.ArtifactsByIDResult{}, err
	}
	ids := req.ArtifactIDs
	if len(ids) > api.MaxArtifactIDs {
		return api.ArtifactsByIDResult{}, session.Errorf(session.CodeInvalidArgument,
			"artifactsByID: %d artifact ids, over the limit of %d per call; read them in several calls", len(ids), api.MaxArtifactIDs)
	}
	seen := make(map[string]struct{}, len(ids))
	for _, a := range ids {
		if err := session.ValidateID("artifact", a); err != nil {
			return api.ArtifactsByIDResult{}, err
		}
		if _, dup := seen[a]; dup {
			return api.ArtifactsByIDResult{}, session.Errorf(session.CodeInvalidArgument, "artifactsByID: artifact id %q is named twice", a)
		}
		seen[a] = struct{}{}
	}
	budget := e.maxReply() - replyEnvelope
	var used int64
	fit := func(a session.Artifact) bool {
		n := artifactSize(a, true)
		if used+n > budget {
			return false
		}
		used += n
		return true
	}
	var p session.Page[session.Artifact]
	var err error
	if r, ok := e.store.(artifactsByIDReader); ok {
		p, err = r.ArtifactsByID(ctx, sid, ids, fit)
	} else {
		p, err = e.artifactsByID(ctx, sid, ids, func() { used = 0 }, fit)
	}
	if err != nil {
		return api.ArtifactsByIDResult{}, wrapStore("ArtifactsByID", err)
	}
	if len(p.Items) == 0 && p.Next < int64(len(ids)) {
		return api.ArtifactsByIDResult{}, e.tooLarge("artifact %q of session %q is larger than a reply may be", ids[p.Next], sid)
	}
	return api.ArtifactsByIDResult{SessionID: sid, Generation: p.Generation, Artifacts: nonNil(p.Items), Next: p.Next}, nil
}

// artifactsByID is ArtifactsByID over any store: the metadata listing says
// which ids are present and their sizes, then one read fetches those that
// fit. Both must come from one generation, so a commit in between makes
// it read again.
func (e *Engine) artifactsByID(ctx context.Context, sid string, ids []string, reset func(), fit func(session.Artifact) bool) (session.Page[session.Artifact], error) {
	for try := 1; ; try++ {
		reset()
		meta, err := e.store.Artifacts(ctx, sid, nil, false)
		if err != nil {
			return meta, err
		}
		at := make(map[string]session.Artifact, len(meta.Items))
		for _, a := range meta.Items {
			at[a.ID] = a
		}
		var want []string
		next := int64(0)
		for _, id := range ids {
			a, ok := at[id]
			if ok && !fit(a) {
				break
			}
			if ok {
				want = append(want, id)
			}
			next++
		}
		if len(want) == 0 {
			return session.Page[session.Artifact]{Generation: meta.Generation, Total: meta.Total, Next: next, Items: []session.Artifact{}}, nil
		}
		p, err := e.store.Artifacts(ctx, sid, want, true)
		if err == nil && p.Generation == meta.Generation {
			// The store answers in the session's order; the caller's order
			// is the one named.
			pos := make(map[string]int, len(want))
			for i, id := range want {
				pos[id] = i
			}
			slices.SortFunc(p.Items, func(a, b session.Artifact) int { return pos[a.ID] - pos[b.ID] })
			p.Next = next
			return p, nil
		}
		if err != nil && session.CodeOf(err) != session.CodeNotFound || try == byIDTries {
			if err == nil {
				err = session.Errorf(session.CodeConflict, "artifactsByID: session %q kept changing while it was read; try again", sid)
			}
			return p, err
		}
	}
}
