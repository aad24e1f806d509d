package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// envelopeKeys are the top-level keys of a version-1 envelope. A document
// with any other top-level key is not a version-1 envelope.
var envelopeKeys = map[string]bool{
	"schema_version": true, "session": true, "artifacts": true, "traces": true, "runs": true,
	"verifications": true, "subagent_tasks": true, "handoff": true, "runtime": true,
}

// Export returns the latest generation of the session as one JSON envelope.
// Opaque values (messages, agent and metadata values, trace data, subagent
// results) are written byte for byte as they were saved, so Import gives
// them back identical.
func (e *Engine) Export(ctx context.Context, sessionID string) ([]byte, error) {
	st, err := e.loadLatest(ctx, "Export", sessionID)
	if err != nil {
		return nil, err
	}
	s := st.Snapshot
	env := api.Envelope{
		SchemaVersion: api.EnvelopeSchemaVersion,
		Artifacts:     nonNil(s.Artifacts),
		Traces:        nonNil(s.Traces),
		Runs:          nonNil(s.Runs),
		Verifications: nonNil(s.Verifications),
		SubagentTasks: nonNil(s.SubagentTasks),
		Handoff:       s.Handoff,
		Runtime:       s.Runtime,
	}
	core := *s
	core.Artifacts, core.Traces, core.Runs, core.Verifications, core.SubagentTasks = nil, nil, nil, nil, nil
	core.Handoff, core.Runtime = nil, nil
	env.Session = &core

	// encoding/json compacts json.RawMessage values; to keep them byte for
	// byte, each is swapped for a unique placeholder string, the envelope
	// marshalled, and the placeholders replaced by the original bytes.
	var raw rawSplicer
	if err := raw.init(); err != nil {
		return nil, err
	}
	core.Messages = make([]session.Value, len(s.Messages))
	for i, m := range s.Messages {
		core.Messages[i] = raw.hold(m)
	}
	core.Agent = raw.holdMap(s.Agent)
	core.Metadata = raw.holdMap(s.Metadata)
	env.Traces = append([]session.Trace{}, env.Traces...)
	for i := range env.Traces {
		env.Traces[i].Data = raw.hold(env.Traces[i].Data)
	}
	env.SubagentTasks = append([]session.SubagentTask{}, env.SubagentTasks...)
	for i := range env.SubagentTasks {
		env.SubagentTasks[i].Result = raw.hold(env.SubagentTasks[i].Result)
	}
	b, err := json.Marshal(&env)
	if err != nil {
		return nil, session.Wrap(session.CodeInternal, err, "engine.Export: marshal envelope")
	}
	return raw.splice(b)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Import creates a session from an export and returns its id and
// generation (1: the store numbers generations afresh; created_at is
// kept). It accepts the envelope and the older bare form, the session
// object alone, which it upgrades. A document with the envelope shape (a
// "session" key) is always read as an envelope: an unknown or future
// schema_version is schema_unsupported and the document is never
// reinterpreted as the bare form. An existing session id is conflict.
// Everything is validated (and secret-named keys dropped) before anything
// is written.
func (e *Engine) Import(ctx context.Context, doc []byte) (api.ImportResult, error) {
	if err := e.check(); err != nil {
		return api.ImportResult{}, err
	}
	snap, err := decodeExport(doc)
	if err != nil {
		return api.ImportResult{}, err
	}
	sid := snap.SessionID
	if err := session.ValidateID("session", sid); err != nil {
		return api.ImportResult{}, err
	}
	snap.SchemaVersion = session.SchemaVersion
	snap.Generation = 0
	c := &session.Change{Replace: snap}
	if err := normalize(c); err != nil {
		return api.ImportResult{}, err
	}
	unlock := e.sessions.lock(sid)
	defer unlock()
	res, err := e.store.Commit(ctx, sid, c, session.CommitOptions{MustNotExist: true, Normalized: true})
	if err != nil {
		return api.ImportResult{}, wrapStore("Import", err)
	}
	e.events.publish(committedEvent(sid, res.Generation))
	return api.ImportResult{SessionID: sid, Generation: res.Generation}, nil
}

// decodeExport reads an envelope or a bare session object into a snapshot.
func decodeExport(doc []byte) (*session.Snapshot, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil || top == nil {
		return nil, session.Errorf(session.CodeInvalidArgument, "import: the document is not a JSON object")
	}
	if _, ok := top["session"]; ok {
		return decodeEnvelope(top, doc)
	}
	if _, ok := top["session_id"]; !ok {
		return nil, session.Errorf(session.CodeInvalidArgument, "import: the document is neither an export envelope (no \"session\") nor a session (no \"session_id\")")
	}
	// The bare form: a session snapshot on its own, schema_version 0
	// (absent, the form before versioning) or 1.
	var v struct {
		SchemaVersion json.RawMessage `json:"schema_version"`
	}
	_ = json.Unmarshal(doc, &v)
	if len(v.SchemaVersion) > 0 {
		n, err := strconv.Atoi(string(v.SchemaVersion))
		if err != nil {
			return nil, session.Errorf(session.CodeInvalidArgument, "import: schema_version %s is not an integer", v.SchemaVersion)
		}
		if err := session.CheckSchema("session", n); err != nil {
			return nil, err
		}
	}
	var snap session.Snapshot
	if err := json.Unmarshal(doc, &snap); err != nil {
		return nil, session.Wrap(session.CodeInvalidArgument, err, "import: session")
	}
	return &snap, nil
}

func decodeEnvelope(top map[string]json.RawMessage, doc []byte) (*session.Snapshot, error) {
	rawVer, ok := top["schema_version"]
	if !ok {
		return nil, session.Errorf(session.CodeInvalidArgument, "import: the envelope has no schema_version")
	}
	ver, err := strconv.Atoi(string(rawVer))
	if err != nil {
		return nil, session.Errorf(session.CodeInvalidArgument, "import: envelope schema_version %s is not an integer", rawVer)
	}
	if ver != api.EnvelopeSchemaVersion {
		return nil, session.Errorf(session.CodeSchemaUnsupported, "import: envelope schema_version %d is not supported; this build reads version %d", ver, api.EnvelopeSchemaVersion)
	}
	for _, k := range sortedKeys(top) {
		if !envelopeKeys[k] {
			return nil, session.Errorf(session.CodeInvalidArgument, "import: unknown envelope field %q for schema_version %d", k, ver)
		}
	}
	var env api.Envelope
	if err := json.Unmarshal(doc, &env); err != nil {
		return nil, session.Wrap(session.CodeInvalidArgument, err, "import: envelope")
	}
	if env.Session == nil {
		return nil, session.Errorf(session.CodeInvalidArgument, "import: the envelope's session is null")
	}
	if err := session.CheckSchema("session", env.Session.SchemaVersion); err != nil {
		return nil, err
	}
	s := env.Session
	type part struct {
		name         string
		inner, outer bool
	}
	for _, p := range []part{
		{"artifacts", len(s.Artifacts) > 0, len(env.Artifacts) > 0},
		{"traces", len(s.Traces) > 0, len(env.Traces) > 0},
		{"runs", len(s.Runs) > 0, len(env.Runs) > 0},
		{"verifications", len(s.Verifications) > 0, len(env.Verifications) > 0},
		{"subagent_tasks", len(s.SubagentTasks) > 0, len(env.SubagentTasks) > 0},
		{"handoff", s.Handoff != nil, env.Handoff != nil},
		{"runtime", s.Runtime != nil, env.Runtime != nil},
	} {
		if p.inner && p.outer {
			return nil, session.Errorf(session.CodeInvalidArgument, "import: %s appear both in the envelope and inside its session", p.name)
		}
	}
	if len(env.Artifacts) > 0 {
		s.Artifacts = env.Artifacts
	}
	if len(env.Traces) > 0 {
		s.Traces = env.Traces
	}
	if len(env.Runs) > 0 {
		s.Runs = env.Runs
	}
	if len(env.Verifications) > 0 {
		s.Verifications = env.Verifications
	}
	if len(env.SubagentTasks) > 0 {
		s.SubagentTasks = env.SubagentTasks
	}
	if env.Handoff != nil {
		s.Handoff = env.Handoff
	}
	if env.Runtime != nil {
		s.Runtime = env.Runtime
	}
	return s, nil
}

// rawSplicer swaps opaque JSON values for placeholder strings before
// marshalling and splices the original bytes back afterwards. Each
// placeholder carries a random nonce, so host data cannot forge one.
type rawSplicer struct {
	prefix []byte // `"cairn-raw-<nonce>-`
	vals   []session.Value
}

func (r *rawSplicer) init() error {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return session.Wrap(session.CodeInternal, err, "engine.Export: random nonce")
	}
	r.prefix = []byte(`"cairn-raw-` + hex.EncodeToString(b[:]) + `-`)
	return nil
}

// hold returns the placeholder for v (nil stays nil).
func (r *rawSplicer) hold(v session.Value) session.Value {
	if len(v) == 0 {
		return v
	}
	r.vals = append(r.vals, v)
	ph := append([]byte(nil), r.prefix...)
	ph = strconv.AppendInt(ph, int64(len(r.vals)-1), 10)
	return append(ph, '"')
}

func (r *rawSplicer) holdMap(m map[string]session.Value) map[string]session.Value {
	if m == nil {
		return nil
	}
	out := make(map[string]session.Value, len(m))
	for k, v := range m {
		out[k] = r.hold(v)
	}
	return out
}

// splice replaces every placeholder in b by its original value.
func (r *rawSplicer) splice(b []byte) ([]byte, error) {
	if len(r.vals) == 0 {
		return b, nil
	}
	out := make([]byte, 0, len(b)+len(b)/4)
	for {
		i := bytes.Index(b, r.prefix)
		if i < 0 {
			return append(out, b...), nil
		}
		out = append(out, b[:i]...)
		rest := b[i+len(r.prefix):]
		j := bytes.IndexByte(rest, '"')
		n, err := strconv.Atoi(string(rest[:max(j, 0)]))
		if j < 0 || err != nil || n < 0 || n >= len(r.vals) {
			return nil, session.Errorf(session.CodeInternal, "engine.Export: corrupt raw placeholder")
		}
		out = append(out, r.vals[n]...)
		b = rest[j+1:]
	}
}
