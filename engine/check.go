package engine

import (
	"context"

	"github.com/cairn-dev/cairn/session"
)

// Verify checks every byte the store keeps, when it keeps any
// (session.Checker): every record of every session and workflow log. A
// store that keeps nothing on disk has nothing to check and reports so.
// With req.Secrets it also scans the content of every session the store
// serves for credential-shaped strings (session.ScanSecrets) and reports
// where they are; it changes nothing.
func (e *Engine) Verify(ctx context.Context, req session.VerifyRequest) (*session.VerifyReport, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	rep := &session.VerifyReport{OK: true, Problems: []session.Problem{}, Quarantine: []string{}}
	if c, ok := e.store.(session.Checker); ok {
		var err error
		if rep, err = c.Verify(ctx); err != nil {
			return nil, wrapStore("Verify", err)
		}
	}
	if req.Secrets {
		scan, err := e.scanSecrets(ctx)
		if err != nil {
			return nil, err
		}
		rep.Secrets = scan
	}
	if _, ok := e.store.(session.Checker); !ok {
		return rep, nil
	}
	if v, ok := e.ws.(ManifestVerifier); ok {
		n, bytes, problems := v.VerifyManifests()
		rep.Manifests += n
		rep.Bytes += bytes
		rep.Problems = append(rep.Problems, problems...)
		rep.OK = len(rep.Problems) == 0
	}
	return rep, nil
}

// ManifestVerifier is served by a Workspace whose manifests can be checked
// (workspace.Tracker): it returns how many files it checked, their bytes,
// and a problem for each one that does not check.
type ManifestVerifier interface {
	VerifyManifests() (files int, bytes int64, problems []session.Problem)
}

// Repair salvages a damaged session or workflow log (session.Checker), or
// says what it would keep when req.Apply is not set.
func (e *Engine) Repair(ctx context.Context, req session.RepairRequest) (*session.RepairReport, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if req.SessionID != "" {
		if err := session.ValidateID("session", req.SessionID); err != nil {
			return nil, err
		}
	}
	if req.WorkflowID != "" {
		if err := session.ValidateID("workflow", req.WorkflowID); err != nil {
			return nil, err
		}
	}
	c, ok := e.store.(session.Checker)
	if !ok {
		return nil, session.Errorf(session.CodeInvalidArgument, "repair: this store keeps nothing on disk to repair")
	}
	rep, err := c.Repair(ctx, req)
	if err != nil {
		return nil, wrapStore("Repair", err)
	}
	return rep, nil
}

// scanSecrets scans every session the store serves (a damaged one is
// verify's problem, not the scan's).
func (e *Engine) scanSecrets(ctx context.Context) (*session.SecretScan, error) {
	list, err := e.store.List(ctx)
	if err != nil {
		return nil, wrapStore("Verify", err)
	}
	ids := make([]string, 0, len(list))
	for _, s := range list {
		if s.State == "" {
			ids = append(ids, s.SessionID)
		}
	}
	scan, err := session.ScanSecrets(ctx, e.store, ids)
	if err != nil {
		return nil, wrapStore("Verify", err)
	}
	return scan, nil
}
