package pgstore

import (
	"context"
	"errors"

	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// Delete removes the session, its loop checkpoints, the workflows it owns
// and its references to artifact bytes, in one transaction (Collect
// removes the bytes no other session refers to).
func (s *Store) Delete(ctx context.Context, id string) error {
	if err := session.ValidateID("session", id); err != nil {
		return err
	}
	s.heads.drop(id)
	return s.tx(ctx, "pgstore.Delete "+quote(id), func(tx pgx.Tx) error {
		ct, err := tx.Exec(ctx, "DELETE FROM sessions WHERE id = $1", id)
		if err != nil {
			return err
		}
		if ct.RowsAffected() == 0 {
			return session.Errorf(session.CodeNotFound, "session %q not found", id)
		}
		b := &pgx.Batch{}
		for _, table := range []string{"commits", "messages", "traces", "checkpoints", "run_checkpoints", "runs", "workflows", "blob_refs"} {
			b.Queue("DELETE FROM "+table+" WHERE session_id = $1", id)
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// FindRun returns the session that records runID: one that holds a
// checkpoint of it, else one whose runs list it.
func (s *Store) FindRun(ctx context.Context, runID string) (string, error) {
	if err := session.ValidateID("run", runID); err != nil {
		return "", err
	}
	var id string
	err := s.pool.QueryRow(ctx, `SELECT session_id FROM (
		SELECT session_id, 0 AS o FROM checkpoints WHERE run_id = $1
		UNION ALL SELECT session_id, 1 FROM runs WHERE run_id = $1) r ORDER BY o LIMIT 1`, runID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", session.Errorf(session.CodeNotFound, "run %q not found", runID)
	}
	return id, mapErr(err, "pgstore.FindRun %q", runID)
}

// Checkpoint returns the latest loop checkpoint of runID: one indexed row.
func (s *Store) Checkpoint(ctx context.Context, runID string) (*session.LoopCheckpoint, error) {
	if err := session.ValidateID("run", runID); err != nil {
		return nil, err
	}
	var b []byte
	err := s.pool.QueryRow(ctx, "SELECT data FROM checkpoints WHERE run_id = $1 LIMIT 1", runID).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, session.Errorf(session.CodeNoCheckpoint, "run %q has no checkpoint", runID)
	}
	if err != nil {
		return nil, mapErr(err, "pgstore.Checkpoint %q", runID)
	}
	cp := &session.LoopCheckpoint{}
	if err := decMode.Unmarshal(b, cp); err != nil {
		return nil, session.Wrap(session.CodeCorrupt, err, "pgstore.Checkpoint %q: does not decode", runID)
	}
	return cp, nil
}

func decodeWorkflow(b []byte) (*session.Workflow, error) {
	w := &session.Workflow{}
	if err := decMode.Unmarshal(b, w); err != nil {
		return nil, session.Wrap(session.CodeCorrupt, err, "a workflow checkpoint does not decode")
	}
	return w, nil
}

// Workflow returns the checkpoint of workflowID.
func (s *Store) Workflow(ctx context.Context, id string) (*session.Workflow, error) {
	if err := session.ValidateID("workflow", id); err != nil {
		return nil, err
	}
	var b []byte
	err := s.pool.QueryRow(ctx, "SELECT data FROM workflows WHERE id = $1", id).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, session.Errorf(session.CodeNotFound, "workflow %q not found", id)
	}
	if err != nil {
		return nil, mapErr(err, "pgstore.Workflow %q", id)
	}
	return decodeWorkflow(b)
}

// Workflows returns the checkpoints of the workflows sessionID owns, by id.
func (s *Store) Workflows(ctx context.Context, sessionID string) ([]*session.Workflow, error) {
	if err := session.ValidateID("session", sessionID); err != nil {
		return nil, err
	}
	out := []*session.Workflow{}
	err := s.read(ctx, "pgstore.Workflows "+quote(sessionID), func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT data FROM workflows WHERE session_id = $1 ORDER BY id COLLATE "C"`, sessionID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return err
			}
			w, err := decodeWorkflow(b)
			if err != nil {
				return err
			}
			out = append(out, w)
		}
		return rows.Err()
	})
	return out, err
}

// SaveStep records a completed step in one transaction, under the
// workflow row's lock, so steps saved at once from several hosts all stay.
func (s *Store) SaveStep(ctx context.Context, wid, sessionID string, st session.StepRecord) error {
	return s.saveStep(ctx, wid, sessionID, st, nil)
}

// SaveStepFenced is SaveStep under f, checked in the same transaction.
func (s *Store) SaveStepFenced(ctx context.Context, wid, sessionID string, st session.StepRecord, f session.Fence) error {
	return s.saveStep(ctx, wid, sessionID, st, &f)
}

func (s *Store) saveStep(ctx context.Context, wid, sessionID string, st session.StepRecord, f *session.Fence) error {
	if err := session.NormalizeStep(wid, &st); err != nil {
		return err
	}
	return s.tx(ctx, "pgstore.SaveStep "+quote(wid), func(tx pgx.Tx) error {
		if err := fence(ctx, tx, f); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO workflows (id, session_id, data) VALUES ($1, $2, '') ON CONFLICT (id) DO NOTHING", wid, sessionID); err != nil {
			return err
		}
		var b []byte
		if err := tx.QueryRow(ctx, "SELECT data FROM workflows WHERE id = $1 FOR UPDATE", wid).Scan(&b); err != nil {
			return err
		}
		w := &session.Workflow{SchemaVersion: session.SchemaVersion, WorkflowID: wid, SessionID: sessionID, Steps: []session.StepRecord{}}
		if len(b) > 0 {
			var err error
			if w, err = decodeWorkflow(b); err != nil {
				return err
			}
		}
		session.ApplyStep(w, st)
		out, err := encode(w)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE workflows SET data = $2 WHERE id = $1", wid, out)
		return err
	})
}

// DeleteWorkflow removes the workflow checkpoint.
func (s *Store) DeleteWorkflow(ctx context.Context, id string) error {
	if err := session.ValidateID("workflow", id); err != nil {
		return err
	}
	return s.tx(ctx, "pgstore.DeleteWorkflow "+quote(id), func(tx pgx.Tx) error {
		ct, err := tx.Exec(ctx, "DELETE FROM workflows WHERE id = $1", id)
		if err == nil && ct.RowsAffected() == 0 {
			err = session.Errorf(session.CodeNotFound, "workflow %q not found", id)
		}
		return err
	})
}
