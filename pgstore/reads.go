package pgstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// headRow is a session's row: its head and counts.
type headRow struct {
	gen, msgs, traces int64
	st                *session.State
}

func (s *Store) headOf(ctx context.Context, tx pgx.Tx, id string) (headRow, error) {
	var h headRow
	var b []byte
	err := tx.QueryRow(ctx, "SELECT generation, head, message_count, trace_count FROM sessions WHERE id = $1", id).Scan(&h.gen, &b, &h.msgs, &h.traces)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, session.Errorf(session.CodeNotFound, "session %q not found", id)
	}
	if err != nil {
		return h, err
	}
	h.st, err = decodeHead(b)
	return h, err
}

func (h headRow) summary() session.Summary {
	sum := session.Summarize(h.st, 0)
	sum.MessageCount, sum.TraceCount = h.msgs, h.traces
	return sum
}

// Stat describes the session from its row.
func (s *Store) Stat(ctx context.Context, id string) (session.Summary, error) {
	_, sum, err := s.Head(ctx, id)
	return sum, err
}

// Head returns the latest generation without messages, artifacts and
// traces: one indexed row.
func (s *Store) Head(ctx context.Context, id string) (*session.State, session.Summary, error) {
	if err := session.ValidateID("session", id); err != nil {
		return nil, session.Summary{}, err
	}
	var h headRow
	err := s.read(ctx, "pgstore.Head "+quote(id), func(tx pgx.Tx) error {
		var err error
		h, err = s.headOf(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, session.Summary{}, err
	}
	sum := h.summary()
	h.st.Snapshot.Messages, h.st.Snapshot.Artifacts, h.st.Snapshot.Traces = []session.Value{}, nil, nil
	return h.st, sum, nil
}

// List describes every session, ordered by id (byte order, as Go sorts).
func (s *Store) List(ctx context.Context) ([]session.Summary, error) {
	out := []session.Summary{}
	err := s.read(ctx, "pgstore.List", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT generation, head, message_count, trace_count FROM sessions ORDER BY id COLLATE "C"`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h headRow
			var b []byte
			if err := rows.Scan(&h.gen, &b, &h.msgs, &h.traces); err != nil {
				return err
			}
			if h.st, err = decodeHead(b); err != nil {
				return err
			}
			out = append(out, h.summary())
		}
		return rows.Err()
	})
	return out, err
}

// Load replays the session's commit rows up to generation at (0: the
// latest) and fills in artifact bytes from blobs.
func (s *Store) Load(ctx context.Context, id string, at uint64) (*session.State, error) {
	if err := session.ValidateID("session", id); err != nil {
		return nil, err
	}
	st := &session.State{}
	err := s.read(ctx, "pgstore.Load "+quote(id), func(tx pgx.Tx) error {
		var cur int64
		err := tx.QueryRow(ctx, "SELECT generation FROM sessions WHERE id = $1", id).Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) {
			return session.Errorf(session.CodeNotFound, "session %q not found", id)
		}
		if err != nil {
			return err
		}
		if at == 0 {
			at = uint64(cur)
		}
		if at > uint64(cur) {
			return session.Errorf(session.CodeNotFound, "session %q has no generation %d (latest is %d)", id, at, cur)
		}
		rows, err := tx.Query(ctx, "SELECT generation, committed_at, changes FROM commits WHERE session_id = $1 AND generation <= $2 ORDER BY generation", id, int64(at))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var gen int64
			var when time.Time
			var b []byte
			if err := rows.Scan(&gen, &when, &b); err != nil {
				return err
			}
			var steps []step
			if err := decMode.Unmarshal(b, &steps); err != nil {
				return session.Wrap(session.CodeCorrupt, err, "generation %d does not decode", gen)
			}
			for _, sp := range steps {
				sp.C.RestoreCheckpoints = sp.Restore
				session.Apply(st, id, sp.C, uint64(gen), when)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if st.Snapshot == nil {
			return session.Errorf(session.CodeNotFound, "session %q has no generation %d", id, at)
		}
		return s.fillData(ctx, tx, st.Snapshot.Artifacts)
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// fillData reads the bytes of the artifacts in list from blobs.
func (s *Store) fillData(ctx context.Context, tx pgx.Tx, list []session.Artifact) error {
	var shas []string
	for _, a := range list {
		if a.SHA256 != "" && a.Size > 0 {
			shas = append(shas, a.SHA256)
		}
	}
	if len(shas) == 0 {
		return nil
	}
	data := map[string][]byte{}
	rows, err := tx.Query(ctx, "SELECT sha256, data FROM blobs WHERE sha256 = ANY($1) ORDER BY sha256, n", shas)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var sha string
		var b []byte
		if err := rows.Scan(&sha, &b); err != nil {
			return err
		}
		data[sha] = append(data[sha], b...)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range list {
		a := &list[i]
		if a.SHA256 == "" || a.Size == 0 {
			continue
		}
		b, ok := data[a.SHA256]
		if !ok || int64(len(b)) != a.Size {
			return session.Errorf(session.CodeCorrupt, "artifact %q: %d of its %d bytes are in the database", a.ID, len(b), a.Size)
		}
		a.Data = b
	}
	return nil
}

// page reads a page of q over a list of total items whose first item added
// after q.SinceGeneration is at since, from rows that yield the items from
// the page's start in order, with their sizes.
func page[T any](q session.Query, gen uint64, total, since int64, fetch func(from, to, limit int64, each func(T, int64) bool) error) (session.Page[T], error) {
	from, to := q.Bounds(total, since)
	limit := to - from
	if q.Limit > 0 {
		limit = min(limit, q.Limit)
	}
	items := []T{}
	var bytes int64
	err := fetch(from, to, limit, func(v T, size int64) bool {
		if len(items) > 0 && q.MaxBytes > 0 && bytes+size > q.MaxBytes {
			return false
		}
		items, bytes = append(items, v), bytes+size
		return true
	})
	n := int64(len(items))
	return session.Page[T]{Generation: gen, Total: total, From: from, Next: from + n, More: from+n < to, Items: items}, err
}

// Messages returns a page of the session's messages: one range scan of
// the messages index.
func (s *Store) Messages(ctx context.Context, id string, q session.Query) (session.Page[session.Value], error) {
	var p session.Page[session.Value]
	if err := session.ValidateID("session", id); err != nil {
		return p, err
	}
	if err := q.Check(); err != nil {
		return p, err
	}
	err := s.read(ctx, "pgstore.Messages "+quote(id), func(tx pgx.Tx) error {
		gen, total, err := s.counts(ctx, tx, id, "message_count")
		if err != nil {
			return err
		}
		since, err := s.since(ctx, tx, "messages", id, total, q)
		if err != nil {
			return err
		}
		p, err = page(q, gen, total, since, func(from, to, limit int64, each func(session.Value, int64) bool) error {
			rows, err := tx.Query(ctx, "SELECT data FROM messages WHERE session_id = $1 AND idx >= $2 AND idx < $3 ORDER BY idx LIMIT $4", id, from, to, limit)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var b []byte
				if err := rows.Scan(&b); err != nil {
					return err
				}
				if !each(session.Value(b), int64(len(b))) {
					break
				}
			}
			return rows.Err()
		})
		return err
	})
	return p, err
}

func (s *Store) counts(ctx context.Context, tx pgx.Tx, id, col string) (uint64, int64, error) {
	var gen, n int64
	err := tx.QueryRow(ctx, "SELECT generation, "+col+" FROM sessions WHERE id = $1", id).Scan(&gen, &n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, session.Errorf(session.CodeNotFound, "session %q not found", id)
	}
	return uint64(gen), n, err
}

// since finds the index of the first item of table added after
// q.SinceGeneration (items are added in generation order).
func (s *Store) since(ctx context.Context, tx pgx.Tx, table, id string, total int64, q session.Query) (int64, error) {
	if q.SinceGeneration == 0 {
		return 0, nil
	}
	var at *int64
	err := tx.QueryRow(ctx, "SELECT min(idx) FROM "+table+" WHERE session_id = $1 AND generation > $2", id, int64(q.SinceGeneration)).Scan(&at)
	if err != nil || at == nil {
		return total, err
	}
	return *at, nil
}

// Traces returns a page of the session's traces.
func (s *Store) Traces(ctx context.Context, id string, q session.Query) (session.Page[session.Trace], error) {
	var p session.Page[session.Trace]
	if err := session.ValidateID("session", id); err != nil {
		return p, err
	}
	if err := q.Check(); err != nil {
		return p, err
	}
	err := s.read(ctx, "pgstore.Traces "+quote(id), func(tx pgx.Tx) error {
		gen, total, err := s.counts(ctx, tx, id, "trace_count")
		if err != nil {
			return err
		}
		since, err := s.since(ctx, tx, "traces", id, total, q)
		if err != nil {
			return err
		}
		p, err = page(q, gen, total, since, func(from, to, limit int64, each func(session.Trace, int64) bool) error {
			rows, err := tx.Query(ctx, "SELECT data FROM traces WHERE session_id = $1 AND idx >= $2 AND idx < $3 ORDER BY idx LIMIT $4", id, from, to, limit)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var b []byte
				var t session.Trace
				if err := rows.Scan(&b); err != nil {
					return err
				}
				if err := decMode.Unmarshal(b, &t); err != nil {
					return session.Wrap(session.CodeCorrupt, err, "a trace does not decode")
				}
				if !each(t, session.TraceSize(t)) {
					break
				}
			}
			return rows.Err()
		})
		return err
	})
	return p, err
}

// Artifacts returns the named artifacts (all when ids is nil) from the
// head, with their bytes from blobs when withData.
func (s *Store) Artifacts(ctx context.Context, id string, ids []string, withData bool) (session.Page[session.Artifact], error) {
	var p session.Page[session.Artifact]
	if err := session.ValidateID("session", id); err != nil {
		return p, err
	}
	err := s.read(ctx, "pgstore.Artifacts "+quote(id), func(tx pgx.Tx) error {
		h, err := s.headOf(ctx, tx, id)
		if err != nil {
			return err
		}
		all := h.st.Snapshot.Artifacts
		for _, a := range ids {
			if !slices.ContainsFunc(all, func(x session.Artifact) bool { return x.ID == a }) {
				return session.Errorf(session.CodeNotFound, "session %q holds no artifact %q", id, a)
			}
		}
		items := []session.Artifact{}
		for _, a := range all {
			if ids == nil || slices.Contains(ids, a.ID) {
				items = append(items, a)
			}
		}
		if withData {
			if err := s.fillData(ctx, tx, items); err != nil {
				return err
			}
		}
		p = session.Page[session.Artifact]{Generation: uint64(h.gen), Total: int64(len(all)), Next: int64(len(items)), Items: items}
		return nil
	})
	return p, err
}

// RunEvents returns a page of a run's traces and kept checkpoints, in
// commit order (a commit's traces before its checkpoint).
func (s *Store) RunEvents(ctx context.Context, id, runID string, q session.Query) (session.Page[session.RunEvent], error) {
	var p session.Page[session.RunEvent]
	if err := session.ValidateID("run", runID); err != nil {
		return p, err
	}
	if err := session.ValidateID("session", id); err != nil {
		return p, err
	}
	if err := q.Check(); err != nil {
		return p, err
	}
	err := s.read(ctx, "pgstore.RunEvents "+quote(id), func(tx pgx.Tx) error {
		gen, _, err := s.counts(ctx, tx, id, "trace_count")
		if err != nil {
			return err
		}
		var events []session.RunEvent
		rows, err := tx.Query(ctx, `SELECT 0 AS kind, generation, idx, data FROM traces WHERE session_id = $1 AND run_id = $2
			UNION ALL SELECT 1, generation, 0, data FROM run_checkpoints WHERE session_id = $1 AND run_id = $2
			ORDER BY 2, 1, 3`, id, runID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind, g, idx int64
			var b []byte
			if err := rows.Scan(&kind, &g, &idx, &b); err != nil {
				return err
			}
			ev := session.RunEvent{Generation: uint64(g)}
			if kind == 0 {
				ev.Kind, ev.Trace = session.EventTrace, &session.Trace{}
				err = decMode.Unmarshal(b, ev.Trace)
			} else {
				ev.Kind, ev.Checkpoint = session.EventCheckpoint, &session.LoopCheckpoint{}
				err = decMode.Unmarshal(b, ev.Checkpoint)
			}
			if err != nil {
				return session.Wrap(session.CodeCorrupt, err, "a run event does not decode")
			}
			events = append(events, ev)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		since, _ := slices.BinarySearchFunc(events, q.SinceGeneration+1, func(e session.RunEvent, g uint64) int {
			switch {
			case e.Generation < g:
				return -1
			case e.Generation > g:
				return 1
			}
			return 0
		})
		p, err = page(q, gen, int64(len(events)), int64(since), func(from, to, limit int64, each func(session.RunEvent, int64) bool) error {
			for _, ev := range events[from:min(from+limit, to)] {
				if !each(ev, session.EventSize(ev)) {
					break
				}
			}
			return nil
		})
		return err
	})
	return p, err
}

// Copy creates dst from src (at generation at, 0: the latest) without its
// loop checkpoints, with then applied, as generation 1 of dst.
func (s *Store) Copy(ctx context.Context, src, dst string, at uint64, then *session.Change) (session.CommitResult, error) {
	if err := session.ValidateID("session", dst); err != nil {
		return session.CommitResult{}, err
	}
	st, err := s.Load(ctx, src, at)
	if err != nil {
		return session.CommitResult{}, err
	}
	snap := *st.Snapshot
	snap.CreatedAt = time.Time{} // a copy is a new session, created now
	changes := []*session.Change{{Replace: &snap}}
	if then != nil {
		changes = append(changes, then)
	}
	return s.commit(ctx, dst, changes, session.CommitOptions{MustNotExist: true}, "pgstore.Copy "+quote(src)+" to "+quote(dst))
}
