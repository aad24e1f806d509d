package session

import "context"

// Checker is served by a store that can check what it keeps (the file
// store, pgstore) and salvage a damaged log where it can (the file store;
// pgstore refuses Repair with invalid_argument). The engine serves verify
// and repair through it; a store without it has nothing to check.
type Checker interface {
	// Verify reads and checks every record of every log the store keeps.
	Verify(ctx context.Context) (*VerifyReport, error)
	// Repair salvages a log the store does not serve, as req says: it
	// only plans unless req.Apply is set.
	Repair(ctx context.Context, req RepairRequest) (*RepairReport, error)
}

// VerifyReport is what Verify found. OK is true when there are no
// problems; files kept in quarantine are listed but are not problems.
type VerifyReport struct {
	OK        bool      `json:"ok"`
	Sessions  int       `json:"sessions"`  // session logs checked
	Workflows int       `json:"workflows"` // workflow logs checked
	Manifests int       `json:"manifests"` // manifest files checked
	Bytes     int64     `json:"bytes"`     // bytes read and checked
	Problems  []Problem `json:"problems"`
	// Quarantine lists the files in the store's quarantine folder:
	// damaged logs a repair or a delete moved aside, trimmed torn tails.
	Quarantine []string `json:"quarantine"`
	// Secrets is the content scan, when verify was asked for it
	// (VerifyRequest.Secrets). What it finds is not damage: OK does not
	// count it.
	Secrets *SecretScan `json:"secrets,omitempty"`
}

// Problem is one file Verify found that is not served, or does not check.
type Problem struct {
	Kind  string `json:"kind"` // "session", "workflow" or "manifest"
	ID    string `json:"id"`   // the session or workflow id ("" when unknown)
	Path  string `json:"path"`
	State string `json:"state"` // corrupt, schema_unsupported or unreadable
	// Offset is where the intact data ends (-1 when unknown), Size the
	// file's size.
	Offset int64 `json:"offset"`
	Size   int64 `json:"size"`
	// Generation is the last generation (for a workflow, the last commit)
	// that reads back intact.
	Generation uint64 `json:"generation"`
	Message    string `json:"message"`
}

// RepairRequest names what to repair: a session or a workflow.
type RepairRequest struct {
	SessionID  string `json:"session_id,omitempty"`
	WorkflowID string `json:"workflow_id,omitempty"`
	// Apply writes the repair. Without it, Repair only says what it
	// would keep and what it could not, and writes nothing.
	Apply bool `json:"apply,omitempty"`
}

// RepairReport says what a repair keeps and what it cannot keep.
type RepairReport struct {
	Kind  string `json:"kind"` // "session" or "workflow"
	ID    string `json:"id"`
	Path  string `json:"path"`
	State string `json:"state"` // the state before the repair
	// Applied is true when the repair was written.
	Applied bool `json:"applied"`
	// Generation is the generation the repaired session is at (for a
	// workflow, the number of commits kept); 0 when nothing can be kept
	// and the log is only moved aside.
	Generation uint64 `json:"generation"`
	// KeptBytes and LostBytes divide the original log: what the repaired
	// log holds, and what it cannot.
	KeptBytes int64 `json:"kept_bytes"`
	LostBytes int64 `json:"lost_bytes"`
	// Lost explains, one line each, what could not be kept and why.
	Lost []string `json:"lost"`
	// Steps lists, for a workflow, the steps the repaired log records as
	// done.
	Steps []string `json:"steps,omitempty"`
	// Quarantine is where the original bytes are kept (after Apply), or
	// will be.
	Quarantine string `json:"quarantine"`
}
