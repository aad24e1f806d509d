package api

import (
	"encoding/json"
	"time"

	"github.com/cairn-dev/cairn/session"
)

// PrepareJSON encodes the parts of r other than the messages, once, and
// returns the appender that reuses them (see JSONPreparer).
func (r ResumeSessionResult) PrepareJSON() JSONAppender {
	s := r.Snapshot
	if s == nil {
		return preparedSession{}
	}
	p := preparedSession{r: r}
	var err1, err2, err3 error
	p.head, err1 = json.Marshal(snapshotHead{s.SchemaVersion, s.SessionID, s.Generation, s.CreatedAt, s.UpdatedAt, s.Workspace, s.Agent, s.Metadata})
	p.tail, err2 = json.Marshal(snapshotTail{s.Artifacts, s.Traces, s.Runs, s.Verifications, s.SubagentTasks, s.Handoff, s.Runtime, s.Files})
	p.rest, err3 = json.Marshal(resumeRest{r.Generation, r.MessageCount, r.MessagesFrom, r.Drift, r.InterruptedRuns, r.Processes})
	if err1 != nil || err2 != nil || err3 != nil {
		return preparedSession{}
	}
	return p
}

// JSONSize bounds the length of r's AppendJSON (see JSONAppender); it
// encodes the parts other than the messages to know their length.
func (r ResumeSessionResult) JSONSize() int { return r.PrepareJSON().JSONSize() }

// AppendJSON appends r's JSON encoding to b (see JSONAppender): the
// session's messages, which are most of a resumed session, copied as they
// are stored; the rest of the snapshot and of the answer through
// encoding/json, in two halves around the messages (snapshotHead,
// snapshotTail, resumeRest). It returns nil where encoding/json would fail
// or write null for the snapshot, for the caller to use encoding/json.
func (r ResumeSessionResult) AppendJSON(b []byte) []byte { return r.PrepareJSON().AppendJSON(b) }

// preparedSession is a ResumeSessionResult with its JSON but the messages
// encoded: the snapshot's fields before and after them, and the answer's
// after the snapshot, each a JSON object. Without them (no snapshot, or
// encoding/json failed) it encodes to nil.
type preparedSession struct {
	r                ResumeSessionResult
	head, tail, rest []byte
}

func (p preparedSession) JSONSize() int {
	if p.head == nil {
		return 0
	}
	n := len(p.head) + len(p.tail) + len(p.rest) + len(`{"snapshot":,"messages":[]}`)
	for _, m := range p.r.Snapshot.Messages {
		n += max(len(m), len("null")) + 1
	}
	return n
}

func (p preparedSession) AppendJSON(b []byte) []byte {
	if p.head == nil {
		return nil
	}
	b = grow(b, len(b)+p.JSONSize())
	b = append(b, `{"snapshot":`...)
	b = append(b, p.head[:len(p.head)-1]...) // without its }
	b = append(b, `,"messages":`...)
	b = appendArray(b, p.r.Snapshot.Messages, appendValue)
	if len(p.tail) > len("{}") {
		b = append(b, ',')
		b = append(b, p.tail[1:]...)
	} else {
		b = append(b, '}')
	}
	b = append(b, ',')
	return append(b, p.rest[1:]...)
}

// snapshotHead is session.Snapshot's fields before Messages, and
// snapshotTail those after it, with the same types and tags, so that
// encoding/json writes each field as it does in a Snapshot
// (TestResumeSessionParts holds them to it).
type snapshotHead struct {
	SchemaVersion int                      `json:"schema_version"`
	SessionID     string                   `json:"session_id"`
	Generation    uint64                   `json:"generation"`
	CreatedAt     time.Time                `json:"created_at"`
	UpdatedAt     time.Time                `json:"updated_at"`
	Workspace     *session.Workspace       `json:"workspace,omitempty"`
	Agent         map[string]session.Value `json:"agent,omitempty"`
	Metadata      map[string]session.Value `json:"metadata,omitempty"`
}

type snapshotTail struct {
	Artifacts     []session.Artifact     `json:"artifacts,omitempty"`
	Traces        []session.Trace        `json:"traces,omitempty"`
	Runs          []session.Run          `json:"runs,omitempty"`
	Verifications []session.Verification `json:"verifications,omitempty"`
	SubagentTasks []session.SubagentTask `json:"subagent_tasks,omitempty"`
	Handoff       *session.Handoff       `json:"handoff,omitempty"`
	Runtime       *session.Runtime       `json:"runtime,omitempty"`
	Files         *session.ManifestRef   `json:"files,omitempty"`
}

// resumeRest is ResumeSessionResult's fields after Snapshot.
type resumeRest struct {
	Generation      uint64           `json:"generation"`
	MessageCount    int64            `json:"message_count"`
	MessagesFrom    int64            `json:"messages_from"`
	Drift           Drift            `json:"drift"`
	InterruptedRuns []InterruptedRun `json:"interrupted_runs"`
	Processes       []ProcessState   `json:"processes"`
}
