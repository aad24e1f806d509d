package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// verifyPage is how many session or workflow ids Verify reads per query,
// so its memory does not grow with the database.
const verifyPage = 256

// Verify checks what the database holds for every session and workflow
// (session.Checker), and changes nothing. For a session, in one snapshot:
// its head decodes; its commit rows decode and their generations run from
// 1 to the session row's generation without a gap; its message and trace
// rows sit at positions 0 to the head's counts less one; data_bytes (the
// limit's accounting) is the sum of those rows' bytes; the bytes of each of
// its artifacts are in blobs, every chunk in order, and hash to the
// recorded SHA-256; and blob_refs protects them from collection. A
// workflow's row must decode and carry its own id and owner. Each session is read in its own read-only transaction, a
// page of ids at a time, so a large database is checked in bounded memory
// and without holding one snapshot for the whole pass.
//
// A Problem's Path is "postgres:" and the table where the damage is (so a
// reader tells it from a file store's path, which repair could salvage),
// State is corrupt (or unreadable when a row does not decode), Offset is
// -1, and Generation is the session row's generation.
func (s *Store) Verify(ctx context.Context) (*session.VerifyReport, error) {
	rep := &session.VerifyReport{Problems: []session.Problem{}, Quarantine: []string{}}
	var after string
	for {
		var ids []string
		rows, err := s.pool.Query(ctx, "SELECT id FROM sessions WHERE id > $1 ORDER BY id LIMIT $2", after, verifyPage)
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			return nil, mapErr(err, "pgstore.Verify")
		}
		for _, id := range ids {
			var found []session.Problem
			var bytes int64
			err := s.read(ctx, "pgstore.Verify "+quote(id), func(tx pgx.Tx) error {
				var err error
				found, bytes, err = verifySession(ctx, tx, id)
				return err
			})
			if err != nil {
				return nil, err
			}
			if found == nil && bytes < 0 {
				continue // deleted since the page was read
			}
			rep.Sessions++
			rep.Bytes += bytes
			rep.Problems = append(rep.Problems, found...)
		}
		if len(ids) < verifyPage {
			break
		}
		after = ids[len(ids)-1]
	}
	after = ""
	for {
		type wfRow struct {
			id, sessionID string
			data          []byte
		}
		var page []wfRow
		rows, err := s.pool.Query(ctx, "SELECT id, session_id, data FROM workflows WHERE id > $1 ORDER BY id LIMIT $2", after, verifyPage)
		if err == nil {
			page, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (wfRow, error) {
				var w wfRow
				err := r.Scan(&w.id, &w.sessionID, &w.data)
				return w, err
			})
		}
		if err != nil {
			return nil, mapErr(err, "pgstore.Verify")
		}
		for _, w := range page {
			rep.Workflows++
			rep.Bytes += int64(len(w.data))
			bad := func(state, format string, args ...any) {
				rep.Problems = append(rep.Problems, session.Problem{Kind: "workflow", ID: w.id, Path: TablePath + "workflows", State: state,
					Offset: -1, Size: int64(len(w.data)), Message: fmt.Sprintf(format, args...)})
			}
			wf, err := decodeWorkflow(w.data)
			switch {
			case err != nil:
				bad(StateUnreadable, "its row does not decode: %v", err)
			case wf.WorkflowID != w.id:
				bad(StateCorrupt, "its row holds workflow %q", wf.WorkflowID)
			case wf.SessionID != w.sessionID:
				bad(StateCorrupt, "its row names session %q, its session_id column %q", wf.SessionID, w.sessionID)
			}
		}
		if len(page) < verifyPage {
			break
		}
		after = page[len(page)-1].id
	}
	rep.OK = len(rep.Problems) == 0
	return rep, nil
}

// The states of a Problem found on PostgreSQL, as the file store names
// them, and the prefix of its Path, before the table's name.
const (
	TablePath       = "postgres:"
	StateCorrupt    = "corrupt"
	StateUnreadable = "unreadable"
)

// verifySession checks session id inside tx, a read-only snapshot. It
// returns the problems found and the bytes read; bytes is -1 (and no
// problems) when the session is gone.
func verifySession(ctx context.Context, tx pgx.Tx, id string) ([]session.Problem, int64, error) {
	var gen, msgs, traces, data int64
	var head []byte
	err := tx.QueryRow(ctx, "SELECT generation, head, message_count, trace_count, data_bytes FROM sessions WHERE id = $1", id).
		Scan(&gen, &head, &msgs, &traces, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, 0, err
	}
	problems := []session.Problem{}
	bytes := int64(len(head))
	bad := func(table, state, format string, args ...any) {
		problems = append(problems, session.Problem{Kind: "session", ID: id, Path: TablePath + table, State: state, Offset: -1,
			Generation: uint64(gen), Message: fmt.Sprintf(format, args...)})
	}

	// Commit rows: Load replays them, so each must decode and none may
	// be missing.
	rows, err := tx.Query(ctx, "SELECT generation, changes FROM commits WHERE session_id = $1 ORDER BY generation", id)
	if err != nil {
		return nil, 0, err
	}
	next, gaps, undecoded := int64(1), 0, 0
	var firstGap string
	var b []byte
	var g int64
	_, err = pgx.ForEachRow(rows, []any{&g, &b}, func() error {
		bytes += int64(len(b))
		if g != next && gaps == 0 {
			firstGap = fmt.Sprintf("generation %d follows %d", g, next-1)
		}
		if g != next {
			gaps++
		}
		next = g + 1
		var steps []step
		if err := decMode.Unmarshal(b, &steps); err != nil {
			if undecoded == 0 {
				bad("commits", StateUnreadable, "the commit row of generation %d does not decode: %v", g, err)
			}
			undecoded++
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if gaps > 0 {
		bad("commits", StateCorrupt, "commit rows are not contiguous (%s; %d gaps)", firstGap, gaps)
	}
	if next-1 != gen {
		bad("commits", StateCorrupt, "the last commit row is generation %d, the session row says %d", next-1, gen)
	}

	// Message and trace rows: positions 0..count-1, and their bytes are
	// the session's data_bytes.
	var rowBytes int64
	for _, t := range []struct {
		table string
		want  int64
	}{{"messages", msgs}, {"traces", traces}} {
		var n, lo, hi, sum int64
		err := tx.QueryRow(ctx, "SELECT count(*), coalesce(min(idx), 0), coalesce(max(idx), -1), coalesce(sum(length(data)), 0) FROM "+
			t.table+" WHERE session_id = $1", id).Scan(&n, &lo, &hi, &sum)
		if err != nil {
			return nil, 0, err
		}
		bytes += sum
		rowBytes += sum
		if n != t.want || (n > 0 && (lo != 0 || hi != n-1)) {
			bad(t.table, StateCorrupt, "%d %s rows at positions %d..%d; the head counts %d (positions 0..%d)", n, t.table, lo, hi, t.want, t.want-1)
		}
	}
	if rowBytes != data {
		bad("sessions", StateCorrupt, "data_bytes is %d; the message and trace rows hold %d bytes", data, rowBytes)
	}

	st, err := decodeHead(head)
	if err != nil {
		bad("sessions", StateUnreadable, "the head does not decode: %v", err)
		return problems, bytes, nil
	}
	if st.Snapshot == nil {
		return problems, bytes, nil
	}
	checked := map[string]bool{}
	for _, a := range st.Snapshot.Artifacts {
		if a.SHA256 == "" || a.Size == 0 || checked[a.SHA256] {
			continue
		}
		checked[a.SHA256] = true
		n, msg, err := verifyBlob(ctx, tx, a)
		if err != nil {
			return nil, 0, err
		}
		bytes += n
		if msg != "" {
			bad("blobs", StateCorrupt, "artifact %q (sha256 %s): %s", a.ID, a.SHA256, msg)
			continue
		}
		var refs bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM blob_refs WHERE sha256 = $1 AND session_id IN ($2, ''))", a.SHA256, id).Scan(&refs); err != nil {
			return nil, 0, err
		}
		if !refs {
			bad("blob_refs", StateCorrupt, "artifact %q (sha256 %s): no blob_refs row keeps its bytes from collection", a.ID, a.SHA256)
		}
	}
	return problems, bytes, nil
}

// verifyBlob reads a's chunks in order, one row at a time, and says what
// is wrong with them ("" when nothing is) and how many bytes it read.
func verifyBlob(ctx context.Context, tx pgx.Tx, a session.Artifact) (int64, string, error) {
	rows, err := tx.Query(ctx, "SELECT n, data FROM blobs WHERE sha256 = $1 ORDER BY n", a.SHA256)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	var size int64
	var n, want int32
	var chunk []byte
	missing := ""
	_, err = pgx.ForEachRow(rows, []any{&n, &chunk}, func() error {
		if n != want && missing == "" {
			missing = fmt.Sprintf("chunk %d is missing", want)
		}
		want = n + 1
		size += int64(len(chunk))
		h.Write(chunk)
		return nil
	})
	if err != nil {
		return 0, "", err
	}
	switch sum := hex.EncodeToString(h.Sum(nil)); {
	case size == 0:
		return 0, "its bytes are not in the database", nil
	case missing != "":
		return size, missing, nil
	case size != a.Size:
		return size, fmt.Sprintf("its chunks hold %d bytes, the artifact %d", size, a.Size), nil
	case !strings.EqualFold(sum, a.SHA256):
		return size, fmt.Sprintf("its %d bytes hash to %s", size, sum), nil
	}
	return size, "", nil
}

// Repair is refused on PostgreSQL (session.Checker): the database keeps
// its own rows whole (its WAL, checksums, backups and PITR are the tools
// for damage there), and the salvage Repair does is the file store's,
// which cuts a log back to its last intact record; rows have no such
// tail. Verify still reports what does not check.
func (s *Store) Repair(ctx context.Context, req session.RepairRequest) (*session.RepairReport, error) {
	return nil, session.Errorf(session.CodeInvalidArgument,
		"repair: applies to the file store; on PostgreSQL, damage is repaired with PostgreSQL's own tools (WAL, backups, point-in-time recovery), and verify reports what does not check")
}
