package pgstore

import (
	"context"

	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// ArtifactsByID returns, with their bytes, the artifacts of ids that the
// session holds, in the order of ids, skipping the ids it does not hold,
// all from one generation: the session's row, then the chunks of the
// artifacts that fit in one query on blobs' primary key, in one read-only
// snapshot (the engine's generic path reads the head twice, and again when
// a commit lands in between). fit is asked about each artifact with its
// metadata (Size set) before its bytes are read; the page stops at the
// first one it refuses. Next is how many of ids the page covers. The
// artifacts' metadata is in the head, so its decode still grows with the
// session's artifacts; the bytes read are only the named ones'.
func (s *Store) ArtifactsByID(ctx context.Context, id string, ids []string, fit func(session.Artifact) bool) (session.Page[session.Artifact], error) {
	var p session.Page[session.Artifact]
	if err := session.ValidateID("session", id); err != nil {
		return p, err
	}
	for _, a := range ids {
		if err := session.ValidateID("artifact", a); err != nil {
			return p, err
		}
	}
	err := s.read(ctx, "pgstore.ArtifactsByID "+quote(id), func(tx pgx.Tx) error {
		h, err := s.headOf(ctx, tx, id)
		if err != nil {
			return err
		}
		all := h.st.Snapshot.Artifacts
		at := make(map[string]int, len(all))
		for i, a := range all {
			at[a.ID] = i
		}
		items := make([]session.Artifact, 0, len(ids))
		next := int64(0)
		for _, aid := range ids {
			i, ok := at[aid]
			if ok && !fit(all[i]) {
				break
			}
			if ok {
				items = append(items, all[i])
			}
			next++
		}
		if err := s.fillData(ctx, tx, items); err != nil {
			return err
		}
		p = session.Page[session.Artifact]{Generation: uint64(h.gen), Total: int64(len(all)), Next: next, Items: items}
		return nil
	})
	return p, err
}
