package fsstore

import (
	"context"

	"github.com/cairn-dev/cairn/session"
)

// ArtifactsByID returns, with their data, the artifacts of ids that the
// session holds, in the order of ids, skipping the ids it does not hold,
// all from one generation. Each costs a map lookup and its own records,
// whatever the session holds. fit is asked about each artifact with its
// metadata (Size set) before its data is read; the page stops at the first
// one it refuses. Next is how many of ids the page covers.
func (s *Store) ArtifactsByID(ctx context.Context, id string, ids []string, fit func(session.Artifact) bool) (session.Page[session.Artifact], error) {
	for _, a := range ids {
		if err := session.ValidateID("artifact", a); err != nil {
			return session.Page[session.Artifact]{}, err
		}
	}
	sf, fr, err := s.reading(id)
	if err != nil {
		return session.Page[session.Artifact]{}, err
	}
	defer sf.mu.Unlock()
	t := sf.t
	out := make([]session.Artifact, 0, len(ids))
	next := int64(0)
	for _, aid := range ids {
		a, ok := t.arts.at[aid]
		if !ok {
			next++
			continue
		}
		var v session.Artifact
		if a.legacy {
			// A legacy element holds the artifact whole, data included.
			err = fr.elems([]item{a.hdr}, false, func(_ int, raw []byte) error { return decodeRaw(raw, &v) })
			if v.Size < int64(len(v.Data)) {
				v.Size = int64(len(v.Data))
			}
		} else {
			err = fr.decodeFrame(a.hdr, &v)
		}
		if err != nil {
			return session.Page[session.Artifact]{}, err
		}
		if !fit(v) {
			break
		}
		if !a.legacy && a.hasDat {
			rec, rerr := fr.frame(a.data)
			if rerr != nil {
				return session.Page[session.Artifact]{}, rerr
			}
			v.Data = rec.Payload
		}
		out = append(out, v)
		next++
	}
	return session.Page[session.Artifact]{Generation: t.gen, Total: int64(len(t.arts.order)), Next: next, Items: out}, nil
}
