package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// step is one change as a commit row keeps it. RestoreCheckpoints is not
// part of a Change's encoding, so it travels beside it.
type step struct {
	C       *session.Change          `cbor:"1,keyasint"`
	Restore []session.LoopCheckpoint `cbor:"2,keyasint,omitempty"`
}

// errLostRace is a commit whose session moved between its read and its
// update; without an expected generation it is tried again.
var errLostRace = errors.New("pgstore: the session moved during the commit")

// Commit applies c as the session's next generation in one transaction.
func (s *Store) Commit(ctx context.Context, id string, c *session.Change, opts session.CommitOptions) (session.CommitResult, error) {
	if err := session.ValidateID("session", id); err != nil {
		return session.CommitResult{}, err
	}
	if !opts.Normalized {
		if err := session.Normalize(c); err != nil {
			return session.CommitResult{}, err
		}
	}
	return s.commit(ctx, id, []*session.Change{c}, opts, "pgstore.Commit "+quote(id))
}

func quote(id string) string { return `"` + id + `"` }

// commit applies changes, in order, as one new generation.
func (s *Store) commit(ctx context.Context, id string, changes []*session.Change, opts session.CommitOptions, op string) (session.CommitResult, error) {
	cas := opts.ExpectGeneration != nil || opts.MustNotExist
	for {
		token := make([]byte, 16)
		rand.Read(token)
		var res session.CommitResult
		var gen uint64
		committing := false
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return res, mapErr(err, "%s", op)
		}
		res, gen, err = s.apply(ctx, tx, id, changes, opts, token)
		if err == nil {
			committing = true
			err = tx.Commit(ctx)
		}
		tx.Rollback(context.Background())
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, errLostRace) && !cas:
			continue
		case errors.Is(err, errLostRace):
			return res, session.Errorf(session.CodeConflict, "%s: the session moved during the commit", op)
		case committing && unreachable(err):
			// COMMIT was sent and its answer lost: read the generation
			// back rather than guess.
			if landed, rerr := s.landed(ctx, id, gen, token); rerr == nil && landed {
				return res, nil
			} else if rerr == nil {
				return res, session.Wrap(api.CodeUnavailable, err, "%s: the database went away; the commit did not land", op)
			}
			return res, session.Wrap(api.CodeUnavailable, err, "%s: the database went away during COMMIT and cannot be asked whether generation %d landed", op, gen)
		}
		return res, mapErr(err, "%s", op)
	}
}

// landed reports whether the commit with token is generation gen of id.
func (s *Store) landed(ctx context.Context, id string, gen uint64, token []byte) (bool, error) {
	var got []byte
	err := s.pool.QueryRow(ctx, "SELECT token FROM commits WHERE session_id = $1 AND generation = $2", id, int64(gen)).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return string(got) == string(token), nil
}

func encode(v any) ([]byte, error) { return encMode.Marshal(v) }

func decodeHead(b []byte) (*session.State, error) {
	st := &session.State{}
	if err := decMode.Unmarshal(b, st); err != nil {
		return nil, session.Wrap(session.CodeCorrupt, err, "pgstore: a session head does not decode")
	}
	return st, nil
}

// stripData returns a copy of list without artifact bytes (they go to
// blobs, by their SHA-256).
func stripData(list []session.Artifact) []session.Artifact {
	if list == nil {
		return nil
	}
	out := make([]session.Artifact, len(list))
	for i, a := range list {
		a.Data = nil
		out[i] = a
	}
	return out
}

func (s *Store) putBlobs(ctx context.Context, tx pgx.Tx, list []session.Artifact) error {
	for _, a := range list {
		if len(a.Data) == 0 || a.SHA256 == "" {
			continue
		}
		batch := &pgx.Batch{}
		for n := 0; n*ChunkSize < len(a.Data); n++ {
			chunk := a.Data[n*ChunkSize : min((n+1)*ChunkSize, len(a.Data))]
			batch.Queue("INSERT INTO blobs (sha256, n, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", a.SHA256, n, chunk)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
	}
	return nil
}

func valuesBytes(vs []session.Value) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// apply writes the commit inside tx and returns its result and generation.
func (s *Store) apply(ctx context.Context, tx pgx.Tx, id string, changes []*session.Change, opts session.CommitOptions, token []byte) (session.CommitResult, uint64, error) {
	var res session.CommitResult
	// The lease, first: its row lock orders this commit against a
	// takeover, and a fence that fails writes nothing.
	if err := fence(ctx, tx, opts.Fence); err != nil {
		return res, 0, err
	}
	var cur, msgs, traces int64
	var head []byte
	err := tx.QueryRow(ctx, "SELECT generation, head, message_count, trace_count FROM sessions WHERE id = $1", id).Scan(&cur, &head, &msgs, &traces)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return res, 0, err
	}
	if err := session.CheckExpect(id, uint64(cur), opts); err != nil {
		return res, 0, err
	}
	st := &session.State{}
	if cur > 0 {
		if st, err = decodeHead(head); err != nil {
			return res, 0, err
		}
		has := func(a string) bool {
			for _, x := range st.Snapshot.Artifacts {
				if x.ID == a {
					return true
				}
			}
			return false
		}
		if err := session.CheckEdits(id, changes[0], msgs, has); err != nil {
			return res, 0, err
		}
	}
	gen := uint64(cur) + 1
	// timestamptz keeps microseconds: round now so that a replay of the
	// commit row gives the very times the head has.
	now := time.Now().UTC().Truncate(time.Microsecond)
	steps := make([]step, 0, len(changes))
	batch := &pgx.Batch{}
	for _, c := range changes {
		if c.Replace != nil {
			if err := s.putBlobs(ctx, tx, c.Replace.Artifacts); err != nil {
				return res, 0, err
			}
		}
		if err := s.putBlobs(ctx, tx, c.AppendArtifacts); err != nil {
			return res, 0, err
		}
		if err := s.putBlobs(ctx, tx, c.PutArtifacts); err != nil {
			return res, 0, err
		}
		sc := *c // what Apply sees: no messages, traces or artifact bytes
		sc.AppendMessages, sc.AppendTraces, sc.TruncateMessages = nil, nil, nil
		sc.AppendArtifacts, sc.PutArtifacts = stripData(c.AppendArtifacts), stripData(c.PutArtifacts)
		kept := sc // what the commit row keeps: messages and traces too
		kept.AppendMessages, kept.AppendTraces, kept.TruncateMessages = c.AppendMessages, c.AppendTraces, c.TruncateMessages
		appendMsgs, appendTraces := c.AppendMessages, c.AppendTraces
		if c.Replace != nil {
			r := *c.Replace
			r.Artifacts = stripData(r.Artifacts)
			kr := r
			kept.Replace = &kr
			appendMsgs, appendTraces = r.Messages, r.Traces
			r.Messages, r.Traces = nil, nil
			sc.Replace = &r
			batch.Queue("DELETE FROM messages WHERE session_id = $1", id)
			batch.Queue("DELETE FROM traces WHERE session_id = $1", id)
			batch.Queue("DELETE FROM runs WHERE session_id = $1", id)
			msgs, traces = 0, 0
		}
		if c.TruncateMessages != nil && *c.TruncateMessages < msgs {
			msgs = *c.TruncateMessages
			batch.Queue("DELETE FROM messages WHERE session_id = $1 AND idx >= $2", id, msgs)
		}
		if len(appendMsgs) > 0 {
			batch.Queue(`INSERT INTO messages (session_id, idx, generation, data)
				SELECT $1, $2 + u.o - 1, $3, u.d FROM unnest($4::bytea[]) WITH ORDINALITY AS u(d, o)`,
				id, msgs, int64(gen), valuesBytes(appendMsgs))
			msgs += int64(len(appendMsgs))
		}
		if len(appendTraces) > 0 {
			runs, datas := make([]string, len(appendTraces)), make([][]byte, len(appendTraces))
			for i, t := range appendTraces {
				b, err := encode(t)
				if err != nil {
					return res, 0, err
				}
				runs[i], datas[i] = t.RunID, b
			}
			batch.Queue(`INSERT INTO traces (session_id, idx, generation, run_id, data)
				SELECT $1, $2 + u.o - 1, $3, u.r, u.d FROM unnest($4::text[], $5::bytea[]) WITH ORDINALITY AS u(r, d, o)`,
				id, traces, int64(gen), runs, datas)
			traces += int64(len(appendTraces))
		}
		sc.RestoreCheckpoints = c.RestoreCheckpoints
		session.Apply(st, id, &sc, gen, now)
		st.Snapshot.Messages, st.Snapshot.Traces = []session.Value{}, nil
		if c.Checkpoint != nil {
			st.Checkpoints[c.Checkpoint.RunID].MessageCount = msgs
		}
		var runIDs []string
		if c.Replace != nil {
			for _, r := range c.Replace.Runs {
				runIDs = append(runIDs, r.RunID)
			}
		}
		for _, r := range c.UpsertRuns {
			runIDs = append(runIDs, r.RunID)
		}
		if len(runIDs) > 0 {
			batch.Queue("INSERT INTO runs (session_id, run_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING", id, runIDs)
		}
		if len(c.DropCheckpoints) > 0 {
			batch.Queue("DELETE FROM checkpoints WHERE session_id = $1 AND run_id = ANY($2)", id, c.DropCheckpoints)
			batch.Queue("DELETE FROM run_checkpoints WHERE session_id = $1 AND run_id = ANY($2)", id, c.DropCheckpoints)
		}
		recorded := make([]string, 0, len(c.RestoreCheckpoints)+1)
		for _, cp := range c.RestoreCheckpoints {
			recorded = append(recorded, cp.RunID)
		}
		if c.Checkpoint != nil {
			recorded = append(recorded, c.Checkpoint.RunID)
		}
		for _, run := range recorded {
			b, err := encode(st.Checkpoints[run])
			if err != nil {
				return res, 0, err
			}
			batch.Queue(`INSERT INTO checkpoints (session_id, run_id, data) VALUES ($1, $2, $3)
				ON CONFLICT (session_id, run_id) DO UPDATE SET data = excluded.data`, id, run, b)
			batch.Queue(`INSERT INTO run_checkpoints (session_id, run_id, generation, data) VALUES ($1, $2, $3, $4)
				ON CONFLICT (session_id, run_id, generation) DO UPDATE SET data = excluded.data`, id, run, int64(gen), b)
		}
		steps = append(steps, step{C: &kept, Restore: c.RestoreCheckpoints})
	}
	headB, err := encode(st)
	if err != nil {
		return res, 0, err
	}
	rec, err := encode(steps)
	if err != nil {
		return res, 0, err
	}
	// The compare-and-swap: the session row moves from the generation
	// read above to the next, or this commit lost a race and writes
	// nothing. It holds across hosts: PostgreSQL re-checks the WHERE
	// against the row a concurrent commit left.
	var tag int64
	if cur == 0 {
		ct, err := tx.Exec(ctx, `INSERT INTO sessions (id, generation, head, message_count, trace_count, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`, id, int64(gen), headB, msgs, traces, now)
		if err != nil {
			return res, 0, err
		}
		tag = ct.RowsAffected()
	} else {
		ct, err := tx.Exec(ctx, `UPDATE sessions SET generation = $2, head = $3, message_count = $4, trace_count = $5, updated_at = $6
			WHERE id = $1 AND generation = $7`, id, int64(gen), headB, msgs, traces, now, cur)
		if err != nil {
			return res, 0, err
		}
		tag = ct.RowsAffected()
	}
	if tag != 1 {
		return res, 0, errLostRace
	}
	batch.Queue("INSERT INTO commits (session_id, generation, token, committed_at, changes) VALUES ($1, $2, $3, $4, $5)", id, int64(gen), token, now, rec)
	if opts.Notify != nil {
		// Sent on COMMIT, and only if it commits: listeners get the
		// commits' payloads in the order the commits landed.
		if p := opts.Notify(gen); p != "" {
			batch.Queue("SELECT pg_notify($1, $2)", Channel, p)
		}
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return res, 0, err
	}
	return session.CommitResult{Generation: gen, MessageCount: msgs, BytesWritten: int64(len(headB) + len(rec))}, gen, nil
}
