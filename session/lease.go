package session

import (
	"context"
	"time"
)

// Lease is a host's hold on a run or a workflow in a store that several
// hosts share. Token is its fencing token: it grows by one every time the
// lease changes holder, so a write fenced with an older token is refused.
type Lease struct {
	Key     string    `json:"key"`
	Holder  string    `json:"holder"`
	Token   int64     `json:"token"`
	Expires time.Time `json:"expires"`
}

// Fence ties a commit to a lease: the commit lands only while Holder holds
// Key with Token, and it renews the lease for TTL.
type Fence struct {
	Key    string
	Holder string
	Token  int64
	TTL    time.Duration
}

// LeaseKeyRun and LeaseKeyWorkflow name the lease of a run and of a
// workflow.
func LeaseKeyRun(runID string) string           { return "run:" + runID }
func LeaseKeyWorkflow(workflowID string) string { return "workflow:" + workflowID }

// Leaser is implemented by stores that hosts share (pgstore), where a run or
// a workflow may be picked up by another host. A store on one machine, whose
// single writer is the process that holds its lock, need not implement it.
type Leaser interface {
	// AcquireLease gives holder the lease on key for ttl and returns it.
	// A holder that already holds it keeps its token and is renewed. A
	// lease of another holder that has not expired is conflict, unless
	// takeover is set (the caller knows that holder is gone); taking a
	// lease from another holder increments its token, which fences out
	// every later write of the previous holder. Expiry is judged by the
	// store's clock, never the hosts'.
	AcquireLease(ctx context.Context, key, holder string, ttl time.Duration, takeover bool) (Lease, error)
	// LeaseOf returns the lease on key; not_found when there is none.
	LeaseOf(ctx context.Context, key string) (Lease, error)
	// RenewLeases extends every lease holder holds to ttl from now and
	// returns how many it renewed.
	RenewLeases(ctx context.Context, holder string, ttl time.Duration) (int, error)
	// ReleaseLease drops holder's lease on key (a finished run or
	// workflow); a lease held by another holder is left alone.
	ReleaseLease(ctx context.Context, key, holder string) error
	// ReleaseLeases drops every lease holder holds (a host that stops
	// cleanly), so other hosts may pick its runs up without a takeover.
	ReleaseLeases(ctx context.Context, holder string) error
	// SaveStepFenced is SaveStep that lands only under f (not_owner
	// otherwise, and nothing is written).
	SaveStepFenced(ctx context.Context, workflowID, owner string, rec StepRecord, f Fence) error
}

// Notifier is implemented by stores that hosts share, so that the events
// of a commit on one host reach subscribers on every host. A commit whose
// CommitOptions.Notify is set sends the payload Notify returns from inside
// its own transaction, so listeners get payloads in the order the commits
// landed and never one of a commit that did not.
type Notifier interface {
	// Notify sends payload to every listener now, outside any commit (for
	// events that are not a session's generation).
	Notify(ctx context.Context, payload string) error
	// Listen calls fn with every payload sent on the database, this
	// host's own included, in commit order, until ctx ends. lost is
	// called once it listens, and again whenever payloads may have been
	// missed: it reconnects when its connection is lost, and a store that
	// cannot deliver what was sent meanwhile calls lost once it is back.
	Listen(ctx context.Context, fn func(payload string), lost func()) error
}
