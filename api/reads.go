package api

import "github.com/cairn-dev/cairn/session"

// MessagesRequest reads a page of a session's messages: [From, To) by index
// (To 0: to the end), or the last Tail, or those added after generation
// SinceGeneration. Limit and MaxBytes cut the page short; a page holds at
// least one message when the range is not empty.
type MessagesRequest struct {
	SessionID       string `json:"session_id"`
	From            int64  `json:"from,omitempty"`
	To              int64  `json:"to,omitempty"`
	Tail            int64  `json:"tail,omitempty"`
	SinceGeneration uint64 `json:"since_generation,omitempty"`
	Limit           int64  `json:"limit,omitempty"`
	MaxBytes        int64  `json:"max_bytes,omitempty"`
}

// Query returns the store query of r.
func (r MessagesRequest) Query() session.Query {
	return session.Query{From: r.From, To: r.To, Tail: r.Tail, SinceGeneration: r.SinceGeneration, Limit: r.Limit, MaxBytes: r.MaxBytes}
}

// MessagesResult is a page of messages at Generation: the messages
// From..Next-1 of the session's Total. More says the queried range goes on
// from Next.
type MessagesResult struct {
	SessionID  string          `json:"session_id"`
	Generation uint64          `json:"generation"`
	Total      int64           `json:"total"`
	From       int64           `json:"from"`
	Next       int64           `json:"next"`
	More       bool            `json:"more"`
	Messages   []session.Value `json:"messages"`
}

// ArtifactRequest names one artifact of a session.
type ArtifactRequest struct {
	SessionID  string `json:"session_id"`
	ArtifactID string `json:"artifact_id"`
}

// ArtifactResult is one artifact with its data.
type ArtifactResult struct {
	SessionID  string           `json:"session_id"`
	Generation uint64           `json:"generation"`
	Artifact   session.Artifact `json:"artifact"`
}

// ArtifactsResult lists a session's artifacts without their data: id,
// kind, name, media type, run, sha256, size, path and metadata.
type ArtifactsResult struct {
	SessionID  string             `json:"session_id"`
	Generation uint64             `json:"generation"`
	Artifacts  []session.Artifact `json:"artifacts"`
}

// MaxArtifactIDs is the most ids one artifactsByID request may name.
const MaxArtifactIDs = 1024

// ArtifactsByIDRequest names up to MaxArtifactIDs distinct artifacts of a
// session, to read with their data in one call.
type ArtifactsByIDRequest struct {
	SessionID   string   `json:"session_id"`
	ArtifactIDs []string `json:"artifact_ids"`
}

// ArtifactsByIDResult holds, with their data, the named artifacts the
// session holds at Generation, in the order they were named; a named id
// the session does not hold is skipped. Next is how many of the named ids
// the answer covers: all of them, unless the next artifact would have
// passed the reply size limit, in which case the caller asks again for
// ArtifactIDs[Next:].
type ArtifactsByIDResult struct {
	SessionID  string             `json:"session_id"`
	Generation uint64             `json:"generation"`
	Artifacts  []session.Artifact `json:"artifacts"`
	Next       int64              `json:"next"`
}

// RunRequest names a run. SessionID, when set, must be the session that
// records it (else not_owner).
type RunRequest struct {
	RunID     string `json:"run_id"`
	SessionID string `json:"session_id,omitempty"`
}

// RunResult is one run with its latest loop checkpoint, when it has one.
// ResumedAs names the run that resumed it, if one did.
type RunResult struct {
	SessionID  string                  `json:"session_id"`
	Generation uint64                  `json:"generation"`
	Run        session.Run             `json:"run"`
	Checkpoint *session.LoopCheckpoint `json:"checkpoint,omitempty"`
	ResumedAs  string                  `json:"resumed_as,omitempty"`
}

// RunsResult lists a session's runs.
type RunsResult struct {
	SessionID  string        `json:"session_id"`
	Generation uint64        `json:"generation"`
	Runs       []session.Run `json:"runs"`
}

// RunEventsRequest reads a page of a run's events, from index From (or
// those committed after SinceGeneration), cut short by Limit and MaxBytes.
type RunEventsRequest struct {
	RunID           string `json:"run_id"`
	SessionID       string `json:"session_id,omitempty"`
	From            int64  `json:"from,omitempty"`
	SinceGeneration uint64 `json:"since_generation,omitempty"`
	Limit           int64  `json:"limit,omitempty"`
	MaxBytes        int64  `json:"max_bytes,omitempty"`
}

// Query returns the store query of r.
func (r RunEventsRequest) Query() session.Query {
	return session.Query{From: r.From, SinceGeneration: r.SinceGeneration, Limit: r.Limit, MaxBytes: r.MaxBytes}
}

// RunEventsResult is a page of a run's events: its traces and its kept loop
// checkpoints, in commit order.
type RunEventsResult struct {
	SessionID  string             `json:"session_id"`
	RunID      string             `json:"run_id"`
	Generation uint64             `json:"generation"`
	Total      int64              `json:"total"`
	From       int64              `json:"from"`
	Next       int64              `json:"next"`
	More       bool               `json:"more"`
	Events     []session.RunEvent `json:"events"`
}
