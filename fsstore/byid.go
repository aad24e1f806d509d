package fsstore

import (
	"context"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// ArtifactsByID returns, with their data, the artifacts of ids that the
// session holds, in the order of ids, skipping the ids it does not hold,
// all from one generation. Each costs a map lookup and its own records,
// whatever the session holds. fit is asked about each artifact with its
// metadata (Size set) before its data is read; the page stops at the first
// one it refuses. Next is how many of ids the page covers.
func (s *Store) ArtifactsByID(ctx context.Context, id string, ids []string, fit func(session.Artifact) bool) (session.Page[session.Artifact], error) {
	sf, fr, err := s.readingArtifacts(id, ids)
	if err != nil {
		return session.Page[session.Artifact]{}, err
	}
	defer sf.mu.Unlock()
	t := sf.t
	// The records of the present artifacts, in the order named: read in
	// spans, so that a header and its data, and the artifacts one commit
	// wrote together (a checkpoint's records), cost one pread.
	its := make([]item, 0, 2*len(ids))
	for _, aid := range ids {
		if a, ok := t.arts.at[aid]; ok {
			its = append(its, a.hdr)
			if !a.legacy && a.hasDat {
				its = append(its, a.data)
			}
		}
	}
	var sp span
	k := 0
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
			var rec recordlog.Record
			if rec, err = fr.spanFrame(&sp, its[k:]); err == nil {
				err = decodeRecord(fr, rec, a.hdr, &v)
			}
		}
		k++
		if err != nil {
			return session.Page[session.Artifact]{}, err
		}
		if !fit(v) {
			break
		}
		if !a.legacy && a.hasDat {
			rec, rerr := fr.spanFrame(&sp, its[k:])
			if rerr != nil {
				return session.Page[session.Artifact]{}, rerr
			}
			v.Data = rec.Payload
			k++
		}
		out = append(out, v)
		next++
	}
	return session.Page[session.Artifact]{Generation: t.gen, Total: int64(len(t.arts.order)), Next: next, Items: out}, nil
}

// decodeRecord decodes a record read at it into v, as decodeFrame does.
func decodeRecord(fr frameReader, rec recordlog.Record, it item, v any) error {
	if err := decMode.Unmarshal(rec.Payload, v); err != nil {
		return session.Wrap(session.CodeInternal, err, "decode %q record of %s at %d", rec.Kind, fr.path, it.off())
	}
	return nil
}
