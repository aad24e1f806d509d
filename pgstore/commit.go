package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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
	cached, useCache := s.heads.get(id)
	for {
		token := make([]byte, 16)
		rand.Read(token)
		var res session.CommitResult
		var gen uint64
		committing := false
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return res, mapErr(err, "%s", op)
		}
		var final *pgx.Batch
		var next sessionRow
		fromCache := useCache
		if fromCache {
			// One round trip: BEGIN, the fence, the guarded move of the
			// session row from the cached generation, the rest, COMMIT.
			res, gen, final, next, err = s.build(id, changes, opts, token, cached)
			if err == nil {
				final.QueuedQueries = append(beginFenced(opts.Fence).QueuedQueries, final.QueuedQueries...)
			}
		} else {
			res, gen, final, next, err = s.apply(ctx, conn, id, changes, opts, token)
		}
		if err == nil {
			committing = true
			err = conn.SendBatch(ctx, final).Close()
		}
		if err != nil && !conn.Conn().IsClosed() {
			// Whatever failed, the transaction may still be open (or
			// aborted): end it so the connection goes back clean. The
			// pool closes a connection that is not idle anyway.
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
		conn.Release()
		if err == nil {
			if next.data >= 0 {
				s.heads.put(id, next)
			} else {
				s.heads.drop(id) // a cut: the row alone knows its bytes
			}
			if opts.Notify != nil {
				s.wake()
			}
			return res, nil
		}
		s.heads.drop(id)
		if fromCache && (isLostRace(err) || session.CodeOf(err) != session.CodeInternal) {
			// The cached row may be stale (another writer moved the
			// session, or the checks failed against an old head): read
			// the row and decide again, without counting a lost race.
			if !unreachable(err) {
				useCache = false
				continue
			}
		}
		useCache = false
		if isLostRace(err) {
			err = errLostRace
		}
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
				if opts.Notify != nil {
					s.wake()
				}
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

// putBlobs queues the chunks of list's artifact bytes on batch.
func putBlobs(batch *pgx.Batch, list []session.Artifact) {
	for _, a := range list {
		if len(a.Data) == 0 || a.SHA256 == "" {
			continue
		}
		for n := 0; n*ChunkSize < len(a.Data); n++ {
			chunk := a.Data[n*ChunkSize : min((n+1)*ChunkSize, len(a.Data))]
			batch.Queue("INSERT INTO blobs (sha256, n, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", a.SHA256, n, chunk)
		}
	}
}

// refBlobs queues, when changes name artifact bytes, the shared side of
// the collection lock and the session's references to those bytes. Held to
// the commit's end, the lock keeps Collect from deleting the chunks this
// commit finds already there (and so does not write again) before its
// references are visible; see collectBlobs.
func refBlobs(batch *pgx.Batch, id string, changes []*session.Change) {
	var shas []string
	add := func(list []session.Artifact) {
		for _, a := range list {
			if a.SHA256 != "" && (a.Size > 0 || len(a.Data) > 0) {
				shas = append(shas, a.SHA256)
			}
		}
	}
	for _, c := range changes {
		if c.Replace != nil {
			add(c.Replace.Artifacts)
		}
		add(c.AppendArtifacts)
		add(c.PutArtifacts)
	}
	if len(shas) == 0 {
		return
	}
	batch.Queue("SELECT pg_advisory_xact_lock_shared($1)", collectLock)
	batch.Queue("INSERT INTO blob_refs (sha256, session_id) SELECT DISTINCT unnest($1::text[]), $2 ON CONFLICT DO NOTHING", shas, id)
}

// beginFenced starts a batch that opens the transaction and, under a
// fence, renews the lease or aborts with the guard's division by zero
// (the caller then reads the lease to say who holds it).
func beginFenced(f *session.Fence) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	if f != nil {
		b.Queue("WITH u AS ("+fenceSQL+" RETURNING 1) SELECT 1 / count(*) FROM u", fenceArgs(f)...)
	}
	return b
}

// isLostRace reports the guard of the final batch (1/0 when the session
// row did not move) firing.
func isLostRace(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22012"
}

func valuesBytes(vs []session.Value) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// apply opens the commit's transaction on conn and reads the session's
// row, in one round trip, and returns the commit's result and generation
// and the batch that writes it and commits, the second and last round
// trip. The row is read FOR UPDATE, so writers of one session queue on it
// rather than race.
func (s *Store) apply(ctx context.Context, conn *pgxpool.Conn, id string, changes []*session.Change, opts session.CommitOptions, token []byte) (session.CommitResult, uint64, *pgx.Batch, sessionRow, error) {
	var res session.CommitResult
	var cur, msgs, traces, data int64
	var head []byte
	first := &pgx.Batch{}
	first.Queue("BEGIN")
	// The lease, first: its row lock orders this commit against a
	// takeover, and a fence that fails writes nothing.
	if opts.Fence != nil {
		first.Queue(fenceSQL, fenceArgs(opts.Fence)...)
	}
	first.Queue("SELECT generation, head, message_count, trace_count, data_bytes FROM sessions WHERE id = $1 FOR UPDATE", id)
	br := conn.SendBatch(ctx, first)
	_, err := br.Exec()
	fenced := true
	if err == nil && opts.Fence != nil {
		var ct pgconn.CommandTag
		ct, err = br.Exec()
		fenced = ct.RowsAffected() == 1
	}
	if err == nil {
		err = br.QueryRow().Scan(&cur, &head, &msgs, &traces, &data)
	}
	if cerr := br.Close(); err == nil || errors.Is(err, pgx.ErrNoRows) {
		if cerr != nil {
			err = cerr
		}
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return res, 0, nil, sessionRow{}, err
	}
	if !fenced {
		return res, 0, nil, sessionRow{}, fenceRefused(ctx, conn, opts.Fence)
	}
	return s.build(id, changes, opts, token, sessionRow{gen: cur, head: head, msgs: msgs, traces: traces, data: data})
}

// sessionRow is a session's row as a commit reads it (or as this store last
// wrote it).
type sessionRow struct {
	gen, msgs, traces int64
	// data is the bytes of the session's message and trace rows; -1 after
	// a commit that cut messages (the row subtracts their bytes itself),
	// which is never cached.
	data int64
	head []byte
}

// build makes the batch that writes the commit on top of row and commits:
// first the guarded move of the session row, then the rest, then COMMIT.
// It also returns the new head, for the cache.
func (s *Store) build(id string, changes []*session.Change, opts session.CommitOptions, token []byte, row sessionRow) (session.CommitResult, uint64, *pgx.Batch, sessionRow, error) {
	var res session.CommitResult
	cur, head, msgs, traces, data := row.gen, row.head, row.msgs, row.traces, row.data
	cut := false // messages deleted: the row subtracts their bytes
	var err error
	if err := session.CheckExpect(id, uint64(cur), opts); err != nil {
		return res, 0, nil, sessionRow{}, err
	}
	st := &session.State{}
	if cur > 0 {
		if st, err = decodeHead(head); err != nil {
			return res, 0, nil, sessionRow{}, err
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
			return res, 0, nil, sessionRow{}, err
		}
	}
	gen := uint64(cur) + 1
	// timestamptz keeps microseconds: round now so that a replay of the
	// commit row gives the very times the head has.
	now := time.Now().UTC().Truncate(time.Microsecond)
	steps := make([]step, 0, len(changes))
	batch := &pgx.Batch{}
	refBlobs(batch, id, changes)
	for _, c := range changes {
		if c.Replace != nil {
			putBlobs(batch, c.Replace.Artifacts)
		}
		putBlobs(batch, c.AppendArtifacts)
		putBlobs(batch, c.PutArtifacts)
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
			msgs, traces, data = 0, 0, 0
		}
		if c.TruncateMessages != nil && *c.TruncateMessages < msgs {
			msgs = *c.TruncateMessages
			batch.Queue(`UPDATE sessions SET data_bytes = data_bytes -
				(SELECT coalesce(sum(length(data)), 0) FROM messages WHERE session_id = $1 AND idx >= $2) WHERE id = $1`, id, msgs)
			batch.Queue("DELETE FROM messages WHERE session_id = $1 AND idx >= $2", id, msgs)
			cut = true
		}
		if len(appendMsgs) > 0 {
			batch.Queue(`INSERT INTO messages (session_id, idx, generation, data)
				SELECT $1, $2 + u.o - 1, $3, u.d FROM unnest($4::bytea[]) WITH ORDINALITY AS u(d, o)`,
				id, msgs, int64(gen), valuesBytes(appendMsgs))
			msgs += int64(len(appendMsgs))
			for _, m := range appendMsgs {
				data += int64(len(m))
			}
		}
		if len(appendTraces) > 0 {
			runs, datas := make([]string, len(appendTraces)), make([][]byte, len(appendTraces))
			for i, t := range appendTraces {
				b, err := encode(t)
				if err != nil {
					return res, 0, nil, sessionRow{}, err
				}
				runs[i], datas[i] = t.RunID, b
				data += int64(len(b))
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
		// A run this commit ends (completed, failed, or interrupted: then
		// superseded by a resume) is never written again, so its lease
		// goes with the commit that ends it, or it would stay forever.
		var ended []string
		for _, r := range c.UpsertRuns {
			if r.Status != session.RunRunning {
				ended = append(ended, session.LeaseKeyRun(r.RunID))
			}
		}
		if len(ended) > 0 {
			batch.Queue("DELETE FROM leases WHERE key = ANY($1)", ended)
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
				return res, 0, nil, sessionRow{}, err
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
		return res, 0, nil, sessionRow{}, err
	}
	if s.maxSession > 0 && !cut {
		// The session's live bytes: its message and trace rows, its
		// artifacts' bytes and its head. A commit that only cuts back is
		// always taken, so a session at its limit can still shrink.
		live := data + int64(len(headB))
		for _, a := range st.Snapshot.Artifacts {
			live += a.Size
		}
		if live > s.maxSession && addsData(changes) {
			return res, 0, nil, sessionRow{}, session.Errorf(session.CodeTooLarge,
				"session %q would hold %d live bytes, past its limit of %d bytes (truncate messages or delete artifacts first, or raise the limit)",
				id, live, s.maxSession)
		}
	}
	rec, err := encode(steps)
	if err != nil {
		return res, 0, nil, sessionRow{}, err
	}
	// The compare-and-swap: the session row moves from the generation
	// read above to the next, or this commit lost a race and writes
	// nothing: when no row moves the guard divides by zero, which aborts
	// the transaction before its COMMIT (isLostRace). The row lock taken
	// by the read makes that rare (a session two hosts create at once);
	// the WHERE keeps it true across hosts regardless. It comes first, so
	// the rest of the batch runs only once the session row is this
	// commit's.
	final := &pgx.Batch{}
	if cur == 0 {
		final.Queue(`WITH u AS (INSERT INTO sessions (id, generation, head, message_count, trace_count, updated_at, data_bytes)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING RETURNING 1) SELECT 1 / count(*) FROM u`,
			id, int64(gen), headB, msgs, traces, now, data)
	} else {
		final.Queue(`WITH u AS (UPDATE sessions SET generation = $2, head = $3, message_count = $4, trace_count = $5, updated_at = $6,
			data_bytes = $8
			WHERE id = $1 AND generation = $7 RETURNING 1) SELECT 1 / count(*) FROM u`,
			id, int64(gen), headB, msgs, traces, now, cur, data)
	}
	final.QueuedQueries = append(final.QueuedQueries, batch.QueuedQueries...)
	batch = final
	batch.Queue("INSERT INTO commits (session_id, generation, token, committed_at, changes) VALUES ($1, $2, $3, $4, $5)", id, int64(gen), token, now, rec)
	if opts.Notify != nil {
		// Written in the commit's transaction, so only if it commits;
		// listeners read a session's events in commit order. The wake-up
		// is sent after the commit, not in it (see waker).
		if p := opts.Notify(gen); p != "" {
			batch.Queue(eventSQL, p)
		}
	}
	batch.Queue("COMMIT")
	return session.CommitResult{Generation: gen, MessageCount: msgs, BytesWritten: int64(len(headB) + len(rec))}, gen, batch,
		sessionRow{gen: int64(gen), msgs: msgs, traces: traces, head: headB, data: known(data, cut)}, nil
}

// known is a session's data bytes after a commit: -1 after a cut, when
// only the row knows.
func known(data int64, cut bool) int64 {
	if cut {
		return -1
	}
	return data
}

// addsData reports whether changes add to a session (anything beyond
// truncating messages, deleting artifacts and dropping checkpoints).
func addsData(changes []*session.Change) bool {
	for _, c := range changes {
		if c.Replace != nil || c.Checkpoint != nil || len(c.RestoreCheckpoints) > 0 {
			return true
		}
		cut := *c
		cut.TruncateMessages, cut.DeleteArtifacts, cut.DropCheckpoints = nil, nil, nil
		if cut.HasDelta() {
			return true
		}
	}
	return false
}
