package fsstore

import (
	"context"

	"github.com/cairn-dev/cairn/session"
)

// CheckpointSession returns the id of the session that holds runID's loop
// checkpoint, answering from the index alone: what Checkpoint answers,
// without reading and decoding the checkpoint from the log. The engine
// asks it on every checkpoint to find the run's session.
func (s *Store) CheckpointSession(ctx context.Context, runID string) (string, error) {
	if err := session.ValidateID("run", runID); err != nil {
		return "", err
	}
	var sid string
	_, err := s.findRun(runID, func(sf *sessionFile) bool {
		if sf.t.ckpts[runID] != nil {
			sid = sf.t.sessionID
		}
		return sid != ""
	})
	if err == nil && sid == "" {
		err = session.Errorf(session.CodeNoCheckpoint, "run %q has no checkpoint", runID)
	}
	return sid, err
}
