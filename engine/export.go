package engine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/session"
)

// envelopeKeys are the top-level keys of a version-1 envelope. A document
// with any other top-level key is not a version-1 envelope.
var envelopeKeys = map[string]bool{
	"schema_version": true, "session": true, "artifacts": true, "traces": true, "runs": true,
	"verifications": true, "subagent_tasks": true, "handoff": true, "runtime": true,
	"checkpoints": true, "workflows": true,
}

// exportPageBytes is how many bytes of messages or traces an export reads
// per page: what it holds at once, whatever the session's size.
const exportPageBytes = 1 << 20

// maxImportFileBytes bounds the file ImportFile reads into memory. The store
// refuses a session larger than its commit limit anyway (import is one
// commit); this only keeps a wrong path from being read whole.
const maxImportFileBytes = 1 << 30

// Export returns the latest generation of the session as one JSON envelope
// (api.Envelope), with its loop checkpoints and the workflows it owns.
// Opaque values (messages, agent and metadata values, trace data, subagent
// results, checkpoint states, step results) are written byte for byte as
// they were saved, so Import gives them back identical. The envelope is
// written as ExportFile writes it, page by page, so the two are the same
// bytes; a session that changes while it is read is conflict.
func (e *Engine) Export(ctx context.Context, sessionID string) ([]byte, error) {
	if err := e.checkSession(sessionID); err != nil {
		return nil, err
	}
	head, _, err := e.store.Head(ctx, sessionID)
	if err != nil {
		return nil, wrapStore("Export", err)
	}
	var buf bytes.Buffer
	if err := e.writeEnvelope(ctx, head, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ExportFile writes the envelope Export returns to the file at req.Path
// (absolute), as it reads the session: a temp file beside it, written page
// by page, synced, renamed into place and the directory synced. Memory
// stays bounded by a page (about exportPageBytes, or the largest single
// message, trace or artifact) whatever the session's size. A session that
// changes during the export is conflict, and the file is left as it was.
func (e *Engine) ExportFile(ctx context.Context, req api.ExportFileRequest) (api.ExportFileResult, error) {
	if err := e.checkSession(req.SessionID); err != nil {
		return api.ExportFileResult{}, err
	}
	path, err := absFile("exportFile", req.Path)
	if err != nil {
		return api.ExportFileResult{}, err
	}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return api.ExportFileResult{}, session.Errorf(session.CodeInvalidArgument, "exportFile: %s is not a regular file; refusing to replace it", path)
	}
	// The head is read before the temp file is made, so a session that
	// does not exist leaves no trace.
	head, _, err := e.store.Head(ctx, req.SessionID)
	if err != nil {
		return api.ExportFileResult{}, wrapStore("ExportFile", err)
	}
	t, err := atomicfile.NewTemp(path, 0o600, nil)
	if err != nil {
		return api.ExportFileResult{}, session.Wrap(session.CodeInvalidArgument, err, "exportFile: %s", path)
	}
	defer t.Abort()
	tw := &tempWriter{t: t}
	w := bufio.NewWriterSize(tw, 256<<10)
	err = e.writeEnvelope(ctx, head, w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = t.Sync()
	}
	if err != nil {
		if _, ok := err.(*session.Error); ok {
			return api.ExportFileResult{}, err
		}
		return api.ExportFileResult{}, session.FileError(err, path, "exportFile")
	}
	f, err := t.Commit()
	if f != nil {
		f.Close()
	}
	if err != nil {
		if f != nil {
			// Renamed but not durable: take the name back rather than
			// report a file that may vanish.
			if os.Remove(path) == nil {
				_ = atomicfile.SyncDir(filepath.Dir(path))
			}
		}
		return api.ExportFileResult{}, session.FileError(err, path, "exportFile")
	}
	return api.ExportFileResult{Path: path, Bytes: tw.off, Generation: head.Snapshot.Generation}, nil
}

// ImportFile imports the envelope (or bare session) in the file at
// req.Path (absolute), as Import does. The file is read whole: import is
// one commit, so a session larger than the store's commit limit is
// too_large however it arrives.
func (e *Engine) ImportFile(ctx context.Context, req api.ImportFileRequest) (api.ImportResult, error) {
	if err := e.check(); err != nil {
		return api.ImportResult{}, err
	}
	path, err := absFile("importFile", req.Path)
	if err != nil {
		return api.ImportResult{}, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|atomicfile.OpenFlags, 0)
	if err != nil {
		code := session.CodeInvalidArgument
		if os.IsNotExist(err) {
			code = session.CodeNotFound
		}
		return api.ImportResult{}, session.Wrap(code, err, "importFile: open %s", path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return api.ImportResult{}, session.Wrap(session.CodeInternal, err, "importFile: stat %s", path)
	}
	if !fi.Mode().IsRegular() {
		return api.ImportResult{}, session.Errorf(session.CodeInvalidArgument, "importFile: %s is not a regular file", path)
	}
	if fi.Size() > maxImportFileBytes {
		return api.ImportResult{}, session.Errorf(session.CodeTooLarge, "importFile: %s holds %d bytes, more than the %d an import reads", path, fi.Size(), int64(maxImportFileBytes))
	}
	doc, err := io.ReadAll(io.LimitReader(f, maxImportFileBytes+1))
	if err != nil {
		return api.ImportResult{}, session.Wrap(session.CodeInternal, err, "importFile: read %s", path)
	}
	return e.Import(ctx, doc)
}

// absFile checks that p names a file by an absolute path: the daemon and
// the host need not share a working directory.
func absFile(op, p string) (string, error) {
	if p == "" || !filepath.IsAbs(p) {
		return "", session.Errorf(session.CodeInvalidArgument, "%s: path %q is not absolute", op, p)
	}
	return filepath.Clean(p), nil
}

// tempWriter appends to an atomicfile.Temp.
type tempWriter struct {
	t   *atomicfile.Temp
	off int64
}

func (w *tempWriter) Write(p []byte) (int, error) {
	if err := w.t.WriteAt(p, w.off); err != nil {
		return 0, err
	}
	w.off += int64(len(p))
	return len(p), nil
}

// writeEnvelope writes to w the envelope of the session whose head
// (everything but messages, artifacts and traces) the caller read, reading
// the rest page by page: pages of messages, one artifact at a time with
// its data, pages of traces, then the head's loop checkpoints and the
// owned workflows. Every page must come from the head's generation, else
// the session changed while it was read: conflict. The bytes are those
// json.Marshal gives api.Envelope, except that opaque values keep their
// bytes and empty checkpoints and workflows are left out.
func (e *Engine) writeEnvelope(ctx context.Context, st *session.State, w io.Writer) error {
	sid, gen := st.Snapshot.SessionID, st.Snapshot.Generation
	flows, err := e.store.Workflows(ctx, sid)
	if err != nil {
		return wrapStore("Export", err)
	}
	same := func(g uint64) error {
		if g != gen {
			return session.Errorf(session.CodeConflict, "export of session %q: session changed during export (generation %d, then %d); retry", sid, gen, g)
		}
		return nil
	}
	ew := &envWriter{w: w}
	var raw rawSplicer
	if err := raw.init(); err != nil {
		return err
	}
	s := st.Snapshot

	// The session's own fields, with the messages streamed where the
	// marker stands.
	core := *s
	core.Artifacts, core.Traces, core.Runs, core.Verifications, core.SubagentTasks = nil, nil, nil, nil, nil
	core.Handoff, core.Runtime = nil, nil
	core.Agent = raw.holdMap(s.Agent)
	core.Metadata = raw.holdMap(s.Metadata)
	marker := append(append([]byte(nil), raw.prefix...), `messages"`...)
	core.Messages = []session.Value{marker}
	b, err := json.Marshal(&core)
	if err != nil {
		return session.Wrap(session.CodeInternal, err, "engine.Export: marshal session")
	}
	i := bytes.Index(b, marker)
	if i < 0 {
		return session.Errorf(session.CodeInternal, "engine.Export: messages marker lost")
	}
	ew.str(`{"schema_version":` + strconv.Itoa(api.EnvelopeSchemaVersion) + `,"session":`)
	ew.spliced(&raw, b[:i])
	err = eachPage(func(from int64) (session.Page[session.Value], error) {
		return e.store.Messages(ctx, sid, session.Query{From: from, MaxBytes: exportPageBytes})
	}, same, "messages", func(n int64, m session.Value) error {
		if n > 0 {
			ew.str(",")
		}
		ew.bytes(m)
		return ew.err
	})
	if err != nil {
		return err
	}
	ew.spliced(&raw, b[i+len(marker):])

	ew.str(`,"artifacts":[`)
	list, err := e.store.Artifacts(ctx, sid, nil, false)
	if err != nil {
		return wrapStore("Export", err)
	}
	if err := same(list.Generation); err != nil {
		return err
	}
	for n, a := range list.Items {
		p, err := e.store.Artifacts(ctx, sid, []string{a.ID}, true)
		if err != nil {
			if isCode(err, session.CodeNotFound) {
				return session.Errorf(session.CodeConflict, "export of session %q: session changed during export (artifact %q went); retry", sid, a.ID)
			}
			return wrapStore("Export", err)
		}
		if err := same(p.Generation); err != nil {
			return err
		}
		if n > 0 {
			ew.str(",")
		}
		ew.json(p.Items[0])
		if ew.err != nil {
			return ew.err
		}
	}
	ew.str(`],"traces":[`)
	err = eachPage(func(from int64) (session.Page[session.Trace], error) {
		return e.store.Traces(ctx, sid, session.Query{From: from, MaxBytes: exportPageBytes})
	}, same, "traces", func(n int64, t session.Trace) error {
		if n > 0 {
			ew.str(",")
		}
		t.Data = raw.hold(t.Data)
		ew.splicedJSON(&raw, t)
		return ew.err
	})
	if err != nil {
		return err
	}
	ew.str(`],"runs":`)
	ew.json(nonNil(s.Runs))
	ew.str(`,"verifications":`)
	ew.json(nonNil(s.Verifications))
	ew.str(`,"subagent_tasks":`)
	tasks := append([]session.SubagentTask{}, s.SubagentTasks...)
	for i := range tasks {
		tasks[i].Result = raw.hold(tasks[i].Result)
	}
	ew.splicedJSON(&raw, tasks)
	ew.str(`,"handoff":`)
	ew.json(s.Handoff)
	ew.str(`,"runtime":`)
	ew.json(s.Runtime)
	if len(st.Checkpoints) > 0 {
		ew.str(`,"checkpoints":[`)
		for n, id := range sortedKeys(st.Checkpoints) {
			cp := *st.Checkpoints[id]
			cp.SessionID = sid
			cp.State = raw.hold(cp.State)
			if n > 0 {
				ew.str(",")
			}
			ew.splicedJSON(&raw, cp)
		}
		ew.str("]")
	}
	if len(flows) > 0 {
		ew.str(`,"workflows":[`)
		for n, wf := range flows {
			for i := range wf.Steps {
				wf.Steps[i].Result = raw.hold(wf.Steps[i].Result)
			}
			if n > 0 {
				ew.str(",")
			}
			ew.splicedJSON(&raw, wf)
		}
		ew.str("]")
	}
	ew.str("}")
	return ew.err
}

// envWriter writes an envelope's pieces, keeping the first error.
type envWriter struct {
	w   io.Writer
	err error
}

func (ew *envWriter) bytes(b []byte) {
	if ew.err == nil {
		_, ew.err = ew.w.Write(b)
	}
}

func (ew *envWriter) str(s string) {
	if ew.err == nil {
		_, ew.err = io.WriteString(ew.w, s)
	}
}

func (ew *envWriter) json(v any) {
	if ew.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		ew.err = session.Wrap(session.CodeInternal, err, "engine.Export: marshal")
		return
	}
	ew.bytes(b)
}

// splicedJSON writes v, whose opaque values raw holds, and lets them go.
func (ew *envWriter) splicedJSON(raw *rawSplicer, v any) {
	if ew.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		ew.err = session.Wrap(session.CodeInternal, err, "engine.Export: marshal")
		return
	}
	ew.spliced(raw, b)
	raw.vals = raw.vals[:0]
}

// spliced writes b with raw's placeholders replaced by their values.
func (ew *envWriter) spliced(raw *rawSplicer, b []byte) {
	if ew.err != nil {
		return
	}
	out, err := raw.splice(b)
	if err != nil {
		ew.err = err
		return
	}
	ew.bytes(out)
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
//
// The envelope's loop checkpoints are restored as they were (message
// counts included), so resumeRun continues a run left running; its
// workflows are written first, step by step (a step recorded again
// replaces the earlier record), then the session. A workflow id the
// target holds for another session (or for none) is conflict before
// anything is written. So an import that fails half-way, a crash between
// the workflows and the session included, leaves no session, and the same
// import again completes it.
func (e *Engine) Import(ctx context.Context, doc []byte) (api.ImportResult, error) {
	if err := e.check(); err != nil {
		return api.ImportResult{}, err
	}
	in, err := decodeExport(doc)
	if err != nil {
		return api.ImportResult{}, err
	}
	snap := in.snap
	sid := snap.SessionID
	if err := session.ValidateID("session", sid); err != nil {
		return api.ImportResult{}, err
	}
	snap.SchemaVersion = session.SchemaVersion
	snap.Generation = 0
	for _, cp := range in.checkpoints {
		if err := session.ValidateID("run", cp.RunID); err != nil {
			return api.ImportResult{}, err
		}
		if cp.SessionID != "" && cp.SessionID != sid {
			return api.ImportResult{}, session.Errorf(session.CodeInvalidArgument, "import: checkpoint of run %q names session %q, not %q", cp.RunID, cp.SessionID, sid)
		}
	}
	c := &session.Change{Replace: snap, RestoreCheckpoints: in.checkpoints}
	if err := normalize(c); err != nil {
		return api.ImportResult{}, err
	}
	flows := make([]string, 0, len(in.workflows))
	for i := range in.workflows {
		w := &in.workflows[i]
		if err := session.ValidateID("workflow", w.WorkflowID); err != nil {
			return api.ImportResult{}, err
		}
		if w.SessionID != "" && w.SessionID != sid {
			return api.ImportResult{}, session.Errorf(session.CodeInvalidArgument, "import: workflow %q names owner %q, not session %q", w.WorkflowID, w.SessionID, sid)
		}
		for j := range w.Steps {
			if err := session.NormalizeStep(w.WorkflowID, &w.Steps[j]); err != nil {
				return api.ImportResult{}, err
			}
		}
		flows = append(flows, w.WorkflowID)
	}
	if err := checkUniqueIDs("workflow", flows); err != nil {
		return api.ImportResult{}, err
	}
	unlock := e.sessions.lock(sid)
	defer unlock()
	if _, err := e.store.Stat(ctx, sid); err == nil {
		return api.ImportResult{}, session.Errorf(session.CodeConflict, "import: session %q already exists", sid)
	} else if !isCode(err, session.CodeNotFound) {
		return api.ImportResult{}, wrapStore("Import", err)
	}
	for _, w := range in.workflows {
		have, err := e.store.Workflow(ctx, w.WorkflowID)
		switch {
		case isCode(err, session.CodeNotFound):
		case err != nil:
			return api.ImportResult{}, wrapStore("Import", err)
		case have.SessionID != sid:
			return api.ImportResult{}, session.Errorf(session.CodeConflict, "import: workflow %q already exists here, owned by session %q", w.WorkflowID, have.SessionID)
		}
	}
	for _, w := range in.workflows {
		for _, step := range w.Steps {
			if err := e.store.SaveStep(ctx, w.WorkflowID, sid, step); err != nil {
				return api.ImportResult{}, wrapStore("Import", err)
			}
		}
	}
	events := func(res session.CommitResult) []api.Event { return []api.Event{committedEvent(sid, res.Generation)} }
	res, err := e.store.Commit(ctx, sid, c, session.CommitOptions{MustNotExist: true, Normalized: true, Notify: e.notifyWith(events)})
	if err != nil {
		return api.ImportResult{}, wrapStore("Import", err)
	}
	e.emit(res, events)
	return api.ImportResult{SessionID: sid, Generation: res.Generation}, nil
}

// checkUniqueIDs reports the first id that appears twice.
func checkUniqueIDs(kind string, ids []string) error {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return session.Errorf(session.CodeInvalidArgument, "import: %s %q appears twice", kind, id)
		}
		seen[id] = true
	}
	return nil
}

// imported is what an export document carries.
type imported struct {
	snap        *session.Snapshot
	checkpoints []session.LoopCheckpoint
	workflows   []session.Workflow
}

// decodeExport reads an envelope or a bare session object.
func decodeExport(doc []byte) (*imported, error) {
	// encoding/json would turn invalid UTF-8 in a string into U+FFFD:
	// refuse it rather than store something other than what was exported.
	if !utf8.Valid(doc) {
		return nil, session.Errorf(session.CodeInvalidArgument, "import: the document is not UTF-8")
	}
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
	return &imported{snap: &snap}, nil
}

func decodeEnvelope(top map[string]json.RawMessage, doc []byte) (*imported, error) {
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
	return &imported{snap: s, checkpoints: env.Checkpoints, workflows: env.Workflows}, nil
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

// eachPage reads a whole list page by page through read, checks each page's
// generation with same, and calls fn with each item and its index.
func eachPage[T any](read func(from int64) (session.Page[T], error), same func(uint64) error, what string, fn func(int64, T) error) error {
	for from := int64(0); ; {
		p, err := read(from)
		if err != nil {
			return wrapStore("Export", err)
		}
		if err := same(p.Generation); err != nil {
			return err
		}
		for n, item := range p.Items {
			if err := fn(p.From+int64(n), item); err != nil {
				return err
			}
		}
		if p.Next >= p.Total {
			return nil
		}
		if p.Next <= from {
			return session.Errorf(session.CodeInternal, "engine.Export: %s page at %d did not advance", what, from)
		}
		from = p.Next
	}
}
