package fsstore

import (
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

func errFutureSchema(v int) error {
	return session.Errorf(session.CodeSchemaUnsupported, "log was written with schema_version %d; this build reads up to %d", v, session.SchemaVersion)
}

func errUnknownKind(kind byte) error {
	return session.Errorf(session.CodeSchemaUnsupported, "log holds a record of kind %q unknown to this build (written by a newer cairn?)", kind)
}

// replayState rebuilds the session state from a log's commits through
// session.Apply, stopping after generation upTo (0: all).
func replayState(groups []commitGroup, upTo uint64) (*session.State, error) {
	st := &session.State{}
	var sessionID string
	for _, g := range groups {
		if upTo != 0 && g.commit.Generation > upTo {
			break
		}
		var c session.Change
		var ckpts []*session.LoopCheckpoint
		for _, r := range g.records {
			if err := decodeInto(&c, &ckpts, &sessionID, r); err != nil {
				return nil, err
			}
		}
		session.Apply(st, sessionID, &c, g.commit.Generation, g.commit.Time)
		for _, cp := range ckpts {
			if st.Checkpoints == nil {
				st.Checkpoints = map[string]*session.LoopCheckpoint{}
			}
			st.Checkpoints[cp.RunID] = cp
		}
	}
	if st.Snapshot == nil {
		return nil, session.Errorf(session.CodeInternal, "log holds no commit")
	}
	return st, nil
}

// decodeInto adds one record to the change being rebuilt.
func decodeInto(c *session.Change, ckpts *[]*session.LoopCheckpoint, sessionID *string, r recordlog.Record) error {
	var err error
	switch r.Kind {
	case kindReset:
		var rr resetRec
		if err = decMode.Unmarshal(r.Payload, &rr); err == nil {
			*sessionID = rr.SessionID
			c.Replace = &session.Snapshot{CreatedAt: rr.CreatedAt}
		}
	case kindWorkspace:
		c.Workspace = new(session.Workspace)
		err = decMode.Unmarshal(r.Payload, c.Workspace)
	case kindAgent:
		err = decMode.Unmarshal(r.Payload, &c.Agent)
		if c.Agent == nil {
			c.Agent = map[string]session.Value{}
		}
	case kindMeta:
		var m metaRec
		if err = decMode.Unmarshal(r.Payload, &m); err == nil {
			if c.Metadata == nil {
				c.Metadata = map[string]session.Value{}
			}
			c.Metadata[m.Key] = m.Value
		}
	case kindMessages:
		var ms []session.Value
		if err = decMode.Unmarshal(r.Payload, &ms); err == nil {
			c.AppendMessages = append(c.AppendMessages, ms...)
		}
	case kindTraces:
		var ts []session.Trace
		if err = decMode.Unmarshal(r.Payload, &ts); err == nil {
			c.AppendTraces = append(c.AppendTraces, ts...)
		}
	case kindArtifacts:
		var as []session.Artifact
		if err = decMode.Unmarshal(r.Payload, &as); err == nil {
			c.AppendArtifacts = append(c.AppendArtifacts, as...)
		}
	case kindArtifact:
		var a session.Artifact
		if err = decMode.Unmarshal(r.Payload, &a); err == nil {
			c.PutArtifacts = append(c.PutArtifacts, a)
		}
	case kindBlob:
		if n := len(c.PutArtifacts); n > 0 && c.PutArtifacts[n-1].Data == nil {
			c.PutArtifacts[n-1].Data = append([]byte{}, r.Payload...)
		} else {
			err = fmt.Errorf("artifact data record without its header")
		}
	case kindDelArtifacts:
		var ids []string
		if err = decMode.Unmarshal(r.Payload, &ids); err == nil {
			c.DeleteArtifacts = append(c.DeleteArtifacts, ids...)
		}
	case kindTruncate:
		var n int64
		if err = decMode.Unmarshal(r.Payload, &n); err == nil {
			c.TruncateMessages = &n
		}
	case kindGens:
	case kindRun:
		var v session.Run
		if err = decMode.Unmarshal(r.Payload, &v); err == nil {
			c.UpsertRuns = append(c.UpsertRuns, v)
		}
	case kindVerif:
		var v session.Verification
		if err = decMode.Unmarshal(r.Payload, &v); err == nil {
			c.UpsertVerifications = append(c.UpsertVerifications, v)
		}
	case kindTask:
		var v session.SubagentTask
		if err = decMode.Unmarshal(r.Payload, &v); err == nil {
			c.UpsertSubagentTasks = append(c.UpsertSubagentTasks, v)
		}
	case kindHandoff:
		c.Handoff = new(session.Handoff)
		err = decMode.Unmarshal(r.Payload, c.Handoff)
	case kindRuntime:
		c.Runtime = new(session.Runtime)
		err = decMode.Unmarshal(r.Payload, c.Runtime)
	case kindFiles:
		c.Files = new(session.ManifestRef)
		err = decMode.Unmarshal(r.Payload, c.Files)
	case kindCheckpoint:
		cp := new(session.LoopCheckpoint)
		if err = decMode.Unmarshal(r.Payload, cp); err == nil {
			*ckpts = append(*ckpts, cp)
		}
	case kindDropCkpt:
		var run string
		if err = decMode.Unmarshal(r.Payload, &run); err == nil {
			c.DropCheckpoints = append(c.DropCheckpoints, run)
		}
	default:
		return errUnknownKind(r.Kind)
	}
	if err != nil {
		return session.Wrap(session.CodeInternal, err, "decode %q record", r.Kind)
	}
	return nil
}

// encodeChange frames the records of c for a session whose summary is t,
// ready to be committed as generation gen. It fills in the checkpoint's
// message count exactly as session.Apply will compute it on replay.
func encodeChange(fb *frameBuf, t *tracker, sessionID string, c *session.Change, now time.Time) {
	msgs := t.messages()
	if c.TruncateMessages != nil {
		msgs = min(msgs, *c.TruncateMessages)
	}
	if c.Replace != nil {
		created := t.created
		if t.gen == 0 {
			created = c.Replace.CreatedAt
			if created.IsZero() {
				created = now
			}
		}
		fb.add(kindReset, resetRec{SessionID: sessionID, CreatedAt: created.UTC()})
		encodeSnapshotParts(fb, c.Replace)
		msgs = int64(len(c.Replace.Messages))
	} else if t.gen == 0 {
		fb.add(kindReset, resetRec{SessionID: sessionID, CreatedAt: now.UTC()})
	}
	for i := range c.RestoreCheckpoints {
		cp := c.RestoreCheckpoints[i]
		cp.SessionID = sessionID
		fb.addCheckpoint(&cp)
	}
	encodeDelta(fb, c)
	msgs += int64(len(c.AppendMessages))
	for _, run := range c.DropCheckpoints {
		fb.add(kindDropCkpt, run)
	}
	if c.Checkpoint != nil {
		cp := *c.Checkpoint
		cp.SessionID = sessionID
		cp.MessageCount = msgs
		if cp.CreatedAt.IsZero() {
			cp.CreatedAt = now.UTC()
		}
		fb.addCheckpoint(&cp)
	}
}

// messageChunk bounds one messages or traces record (unless one item is
// larger): a read of one item reads and checks its whole record, so this is
// what a read of one small item may cost at most.
const messageChunk = 16 << 10

func encodeSnapshotParts(fb *frameBuf, s *session.Snapshot) {
	encodeDelta(fb, &session.Change{
		Workspace: s.Workspace, Agent: s.Agent, Metadata: s.Metadata,
		AppendMessages: s.Messages, AppendTraces: s.Traces, AppendArtifacts: s.Artifacts,
		UpsertRuns: s.Runs, UpsertVerifications: s.Verifications, UpsertSubagentTasks: s.SubagentTasks,
		Handoff: s.Handoff, Runtime: s.Runtime, Files: s.Files,
	})
}

func encodeDelta(fb *frameBuf, c *session.Change) {
	if c.Workspace != nil {
		fb.add(kindWorkspace, c.Workspace)
	}
	if c.Agent != nil {
		fb.add(kindAgent, c.Agent)
	}
	for _, k := range sortedKeys(c.Metadata) {
		fb.add(kindMeta, metaRec{Key: k, Value: c.Metadata[k]})
	}
	if c.TruncateMessages != nil {
		fb.add(kindTruncate, *c.TruncateMessages)
	}
	chunked(c.AppendMessages, func(m session.Value) int { return len(m) }, func(part []session.Value) {
		fb.addMessages(kindMessages, part)
	})
	chunked(c.AppendTraces, func(t session.Trace) int { return len(t.Data) + 64 }, func(part []session.Trace) {
		fb.add(kindTraces, part)
	})
	if len(c.DeleteArtifacts) > 0 {
		fb.add(kindDelArtifacts, c.DeleteArtifacts)
	}
	for _, list := range [][]session.Artifact{c.AppendArtifacts, c.PutArtifacts} {
		for _, a := range list {
			addArtifact(fb, a)
		}
	}
	for i := range c.UpsertRuns {
		fb.addRun(&c.UpsertRuns[i])
	}
	for i := range c.UpsertVerifications {
		fb.add(kindVerif, &c.UpsertVerifications[i])
	}
	for i := range c.UpsertSubagentTasks {
		fb.add(kindTask, &c.UpsertSubagentTasks[i])
	}
	if c.Handoff != nil {
		fb.add(kindHandoff, c.Handoff)
	}
	if c.Runtime != nil {
		fb.add(kindRuntime, c.Runtime)
	}
	if c.Files != nil {
		fb.addFiles(c.Files)
	}
}

// chunked cuts list into the parts that are each a record: at most
// messageChunk bytes of items (or one larger item), and calls add with
// each.
func chunked[T any](list []T, size func(T) int, add func([]T)) {
	for start := 0; start < len(list); {
		end, n := start, 0
		for end < len(list) && (end == start || n+size(list[end]) <= messageChunk) {
			n += size(list[end])
			end++
		}
		add(list[start:end])
		start = end
	}
}

// addArtifact adds an artifact's header record and, when it has data, the
// data record after it, so a listing reads headers without the data.
func addArtifact(fb *frameBuf, a session.Artifact) {
	data := a.Data
	a.Data = nil
	fb.addArtifactHeader(&a)
	if len(data) > 0 {
		fb.addRaw(kindBlob, data)
	}
}

// encodeState frames a whole state as one commit of generation gen: the
// content of a compacted log.
func encodeState(fb *frameBuf, st *session.State, gen uint64, updated time.Time) {
	fb.begin()
	s := st.Snapshot
	fb.add(kindReset, resetRec{SessionID: s.SessionID, CreatedAt: s.CreatedAt})
	encodeSnapshotParts(fb, s)
	for _, run := range sortedKeys(st.Checkpoints) {
		fb.addCheckpoint(st.Checkpoints[run])
	}
	fb.commit(gen, updated)
}
