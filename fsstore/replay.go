package fsstore

import (
	"encoding/binary"
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

// acct tracks how many bytes of a log are live: the latest record of each
// key plus every appended record since the last reset. The rest (superseded
// records, tombstones and commit records) is what compaction reclaims.
type acct struct {
	keys    map[string]int64
	appends int64
	live    int64
}

func (a *acct) reset() { a.keys, a.appends, a.live = map[string]int64{}, 0, 0 }

func (a *acct) set(key string, size int64) {
	if a.keys == nil {
		a.keys = map[string]int64{}
	}
	a.live += size - a.keys[key]
	a.keys[key] = size
}

func (a *acct) drop(key string) {
	a.live -= a.keys[key]
	delete(a.keys, key)
}

func (a *acct) add(size int64) { a.appends += size; a.live += size }

// idOnly decodes just the id fields of upserted records.
type idOnly struct {
	ID     string `json:"id"`
	RunID  string `json:"run_id"`
	TaskID string `json:"task_id"`
	StepID string `json:"step_id"`
	Status string `json:"status"`
}

// cborArrayLen reads the length of the CBOR array at the start of p.
func cborArrayLen(p []byte) (int64, error) {
	if len(p) == 0 || p[0]>>5 != 4 {
		return 0, fmt.Errorf("not a CBOR array")
	}
	info := p[0] & 0x1f
	switch {
	case info < 24:
		return int64(info), nil
	case info == 24 && len(p) >= 2:
		return int64(p[1]), nil
	case info == 25 && len(p) >= 3:
		return int64(binary.BigEndian.Uint16(p[1:])), nil
	case info == 26 && len(p) >= 5:
		return int64(binary.BigEndian.Uint32(p[1:])), nil
	case info == 27 && len(p) >= 9:
		return int64(binary.BigEndian.Uint64(p[1:])), nil
	}
	return 0, fmt.Errorf("bad CBOR array header")
}

// tracker is the summary of a session log kept in memory: enough to answer
// Stat, List, FindRun and Checkpoint, to check CAS and to decide on
// compaction without reading the log. observe is the only code that updates
// it, at open and after each commit, so the two cannot disagree.
type tracker struct {
	sessionID string
	gen       uint64
	first     uint64 // oldest generation the log can still replay
	created   time.Time
	updated   time.Time
	messages  int64
	runs      map[string]string // run id -> status
	ckpts     map[string]*session.LoopCheckpoint
	acct      acct
}

func newTracker() *tracker {
	return &tracker{runs: map[string]string{}, ckpts: map[string]*session.LoopCheckpoint{}}
}

// observe folds one complete commit into the summary.
func (t *tracker) observe(g commitGroup) error {
	for _, r := range g.records {
		if err := t.observeRecord(r); err != nil {
			return err
		}
	}
	t.gen = g.commit.Generation
	if t.first == 0 {
		t.first = t.gen
	}
	t.updated = g.commit.Time
	return nil
}

func (t *tracker) observeRecord(r recordlog.Record) error {
	dec := func(v any) error {
		if err := decMode.Unmarshal(r.Payload, v); err != nil {
			return session.Wrap(session.CodeInternal, err, "decode %q record", r.Kind)
		}
		return nil
	}
	var id idOnly
	switch r.Kind {
	case kindReset:
		var rr resetRec
		if err := dec(&rr); err != nil {
			return err
		}
		if t.sessionID != "" && rr.SessionID != t.sessionID {
			return session.Errorf(session.CodeInternal, "log of session %q holds a reset for %q", t.sessionID, rr.SessionID)
		}
		t.sessionID, t.messages, t.runs = rr.SessionID, 0, map[string]string{}
		if t.created.IsZero() {
			t.created = rr.CreatedAt
		}
		// Checkpoints survive a replace (session.Apply keeps them), so
		// their records stay live; everything else before it is dead.
		kept := map[string]int64{}
		for run := range t.ckpts {
			kept["C/"+run] = t.acct.keys["C/"+run]
		}
		t.acct.reset()
		for k, size := range kept {
			t.acct.set(k, size)
		}
		t.acct.set("R", r.Size)
	case kindMessages:
		n, err := cborArrayLen(r.Payload)
		if err != nil {
			return session.Wrap(session.CodeInternal, err, "decode messages record")
		}
		t.messages += n
		t.acct.add(r.Size)
	case kindTraces, kindArtifacts:
		t.acct.add(r.Size)
	case kindWorkspace, kindAgent, kindHandoff, kindRuntime, kindFiles:
		t.acct.set(string(r.Kind), r.Size)
	case kindMeta:
		var m metaRec
		if err := dec(&m); err != nil {
			return err
		}
		t.acct.set("m/"+m.Key, r.Size)
	case kindRun:
		if err := dec(&id); err != nil {
			return err
		}
		t.runs[id.RunID] = id.Status
		t.acct.set("r/"+id.RunID, r.Size)
	case kindVerif:
		if err := dec(&id); err != nil {
			return err
		}
		t.acct.set("v/"+id.ID, r.Size)
	case kindTask:
		if err := dec(&id); err != nil {
			return err
		}
		t.acct.set("s/"+id.TaskID, r.Size)
	case kindCheckpoint:
		var cp session.LoopCheckpoint
		if err := dec(&cp); err != nil {
			return err
		}
		t.ckpts[cp.RunID] = &cp
		t.acct.set("C/"+cp.RunID, r.Size)
	case kindDropCkpt:
		var run string
		if err := dec(&run); err != nil {
			return err
		}
		delete(t.ckpts, run)
		t.acct.drop("C/" + run)
	default:
		return errUnknownKind(r.Kind)
	}
	return nil
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
	msgs := t.messages
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
		fb.add(kindCheckpoint, &cp)
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
		fb.add(kindCheckpoint, &cp)
	}
}

// messageChunk bounds one messages record written by a replace or a
// compaction, so no single record grows without limit.
const messageChunk = 4 << 20

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
	for start := 0; start < len(c.AppendMessages); {
		end, size := start, 0
		for end < len(c.AppendMessages) && (end == start || size+len(c.AppendMessages[end]) <= messageChunk) {
			size += len(c.AppendMessages[end])
			end++
		}
		fb.add(kindMessages, c.AppendMessages[start:end])
		start = end
	}
	if len(c.AppendTraces) > 0 {
		fb.add(kindTraces, c.AppendTraces)
	}
	if len(c.AppendArtifacts) > 0 {
		fb.add(kindArtifacts, c.AppendArtifacts)
	}
	for i := range c.UpsertRuns {
		fb.add(kindRun, &c.UpsertRuns[i])
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
		fb.add(kindFiles, c.Files)
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
		fb.add(kindCheckpoint, st.Checkpoints[run])
	}
	fb.commit(gen, updated)
}
