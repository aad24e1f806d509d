package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// DefaultMaxReplyBytes is the reply size limit of an engine whose
// Options.MaxReplyBytes is 0: the protocol's default message size limit
// (protocol.DefaultMaxMessageSize, which the engine does not import).
const DefaultMaxReplyBytes int64 = 64 << 20

// Reply size accounting. The engine knows what a reply will weigh before
// it builds it, from the sizes the store reports (encoded JSON, which is
// never smaller than the CBOR the daemon sends), plus these allowances.
const (
	// replyEnvelope is the allowance for a reply's fixed fields and the
	// protocol's framing around the result.
	replyEnvelope = 1024
	// messageOverhead bounds what the encoding adds to one message of a
	// page (a separator, a CBOR byte-string header).
	messageOverhead = 16
	// eventOverhead bounds what one run event adds to the bytes the store
	// counts for it (session.EventSize): its kind and generation, a
	// trace's seq and time, a checkpoint's ids, counters and manifest.
	eventOverhead = 2048
	// traceOverhead bounds what one trace adds to session.TraceSize.
	traceOverhead = 128
	// artifactOverhead bounds an artifact's fixed fields (field names,
	// sha256, size) beyond the lengths of its strings and metadata.
	artifactOverhead = 256
	// runOverhead bounds a run's fixed fields beyond its two ids.
	runOverhead = 320
	// checkpointOverhead bounds a loop checkpoint's fixed fields beyond
	// its state.
	checkpointOverhead = 1536
)

// pagedReads names the reads to use instead of a reply that would be too
// large; every too_large error of a read says it.
const pagedReads = `read it in pages instead: messages (tail, or from/to), artifacts (metadata only) and artifact (one with its data), runEvents, or resumeSession with messages_tail and artifacts="metadata"`

// maxReply is the engine's reply size limit.
func (e *Engine) maxReply() int64 {
	if e.maxReplyBytes > 0 {
		return e.maxReplyBytes
	}
	return DefaultMaxReplyBytes
}

// pageCaps returns the items and bytes a page may carry so that, with
// overhead bytes added per item and the envelope, it stays within the
// reply limit. The items cap also keeps a page's array well within what
// a protocol decoder accepts.
func (e *Engine) pageCaps(overhead int64) (items, bytes int64) {
	limit := e.maxReply()
	items = max(limit/16/overhead, 1)
	bytes = max(limit-items*overhead-replyEnvelope, 1)
	return items, bytes
}

// capQuery lowers q's Limit and MaxBytes to the page caps; it returns the
// capped query and the byte cap.
func (e *Engine) capQuery(q session.Query, overhead int64) (session.Query, int64) {
	items, bytes := e.pageCaps(overhead)
	if q.Limit == 0 || q.Limit > items {
		q.Limit = items
	}
	if q.MaxBytes == 0 || q.MaxBytes > bytes {
		q.MaxBytes = bytes
	}
	return q, bytes
}

// tooLarge is the error of a read whose reply would pass the limit.
func (e *Engine) tooLarge(format string, args ...any) error {
	return session.Errorf(session.CodeTooLarge, "%s, over the reply size limit of %d bytes; %s",
		fmt.Sprintf(format, args...), e.maxReply(), pagedReads)
}

// base64Len is the length of n bytes in base64, as the JSON encoding
// carries artifact data.
func base64Len(n int64) int64 { return (n + 2) / 3 * 4 }

// artifactSize is the encoded size of a, with its data when withData (its
// Size, as the metadata listing reports it, whether or not Data is set).
func artifactSize(a session.Artifact, withData bool) int64 {
	n := int64(len(a.ID)+len(a.Kind)+len(a.Name)+len(a.MediaType)+len(a.RunID)+len(a.SHA256)+len(a.Path)+len(a.Metadata)) + artifactOverhead
	if withData {
		n += base64Len(a.Size)
	}
	return n
}

// Summary describes the session without its content: generation, counts,
// sizes and times (session.Summary). It reads nothing but the store's
// description.
func (e *Engine) Summary(ctx context.Context, sessionID string) (session.Summary, error) {
	if err := e.checkSession(sessionID); err != nil {
		return session.Summary{}, err
	}
	sum, err := e.store.Stat(ctx, sessionID)
	if err != nil {
		return session.Summary{}, wrapStore("Summary", err)
	}
	return sum, nil
}

// Messages returns a page of the session's messages: the range the
// request selects ([from, to), the last tail, or those added after
// since_generation), cut short by its limit and max_bytes. A page never
// passes the reply size limit: the engine lowers limit and max_bytes to
// fit it, so More may be set where the caller asked for no limit. A single
// message larger than the limit is too_large, naming its index.
func (e *Engine) Messages(ctx context.Context, req api.MessagesRequest) (api.MessagesResult, error) {
	sid := req.SessionID
	if err := e.checkSession(sid); err != nil {
		return api.MessagesResult{}, err
	}
	q := req.Query()
	if err := q.Check(); err != nil {
		return api.MessagesResult{}, err
	}
	q, capBytes := e.capQuery(q, messageOverhead)
	p, err := e.store.Messages(ctx, sid, q)
	if err != nil {
		return api.MessagesResult{}, wrapStore("Messages", err)
	}
	if len(p.Items) > 0 && session.ValueSize(p.Items[0]) > capBytes {
		return api.MessagesResult{}, e.tooLarge("message %d of session %q is %d bytes", p.From, sid, session.ValueSize(p.Items[0]))
	}
	return api.MessagesResult{
		SessionID: sid, Generation: p.Generation, Total: p.Total,
		From: p.From, Next: p.Next, More: p.More, Messages: nonNil(p.Items),
	}, nil
}

// Artifact returns one artifact of the session with its data. It learns
// the artifact's size from the metadata listing first, so an artifact
// larger than the reply size limit is refused (too_large, naming it)
// before its data is read. An id the session does not hold is not_found.
func (e *Engine) Artifact(ctx context.Context, req api.ArtifactRequest) (api.ArtifactResult, error) {
	sid := req.SessionID
	if err := e.checkSession(sid); err != nil {
		return api.ArtifactResult{}, err
	}
	if err := session.ValidateID("artifact", req.ArtifactID); err != nil {
		return api.ArtifactResult{}, err
	}
	ids := []string{req.ArtifactID}
	meta, err := e.store.Artifacts(ctx, sid, ids, false)
	if err != nil {
		return api.ArtifactResult{}, wrapStore("Artifact", err)
	}
	if len(meta.Items) != 1 {
		return api.ArtifactResult{}, session.Errorf(session.CodeNotFound, "session %q holds no artifact %q", sid, req.ArtifactID)
	}
	if n := artifactSize(meta.Items[0], true) + replyEnvelope; n > e.maxReply() {
		return api.ArtifactResult{}, e.tooLarge("artifact %q of session %q is %d bytes (%d encoded)", req.ArtifactID, sid, meta.Items[0].Size, n)
	}
	p, err := e.store.Artifacts(ctx, sid, ids, true)
	if err != nil {
		return api.ArtifactResult{}, wrapStore("Artifact", err)
	}
	if len(p.Items) != 1 {
		return api.ArtifactResult{}, session.Errorf(session.CodeNotFound, "session %q holds no artifact %q", sid, req.ArtifactID)
	}
	a := p.Items[0]
	// A commit between the two reads may have replaced the artifact with
	// a larger one: measure what was read, before answering with it.
	if a.Size < int64(len(a.Data)) {
		a.Size = int64(len(a.Data))
	}
	if n := artifactSize(a, true) + replyEnvelope; n > e.maxReply() {
		return api.ArtifactResult{}, e.tooLarge("artifact %q of session %q is %d bytes (%d encoded)", req.ArtifactID, sid, len(a.Data), n)
	}
	return api.ArtifactResult{SessionID: sid, Generation: p.Generation, Artifact: a}, nil
}

// Artifacts lists the session's artifacts without their data: id, kind,
// name, media type, run, sha256, size, path and metadata, in the
// session's order.
func (e *Engine) Artifacts(ctx context.Context, sessionID string) (api.ArtifactsResult, error) {
	if err := e.checkSession(sessionID); err != nil {
		return api.ArtifactsResult{}, err
	}
	p, err := e.store.Artifacts(ctx, sessionID, nil, false)
	if err != nil {
		return api.ArtifactsResult{}, wrapStore("Artifacts", err)
	}
	n := int64(replyEnvelope)
	for _, a := range p.Items {
		n += artifactSize(a, false)
	}
	if n > e.maxReply() {
		return api.ArtifactsResult{}, e.tooLarge("the artifact list of session %q (%d artifacts) is about %d bytes", sessionID, len(p.Items), n)
	}
	return api.ArtifactsResult{SessionID: sessionID, Generation: p.Generation, Artifacts: nonNil(p.Items)}, nil
}

// Runs lists the session's runs, in the session's order.
func (e *Engine) Runs(ctx context.Context, sessionID string) (api.RunsResult, error) {
	if err := e.checkSession(sessionID); err != nil {
		return api.RunsResult{}, err
	}
	head, _, err := e.store.Head(ctx, sessionID)
	if err != nil {
		return api.RunsResult{}, wrapStore("Runs", err)
	}
	runs := head.Snapshot.Runs
	n := int64(replyEnvelope)
	for _, r := range runs {
		n += int64(len(r.RunID)+len(r.ParentRunID)) + runOverhead
	}
	if n > e.maxReply() {
		return api.RunsResult{}, e.tooLarge("the run list of session %q (%d runs) is about %d bytes", sessionID, len(runs), n)
	}
	return api.RunsResult{SessionID: sessionID, Generation: head.Snapshot.Generation, Runs: nonNil(runs)}, nil
}

// Run returns one run with its latest loop checkpoint, if it has one, and
// the run that resumed it and has not checkpointed yet (ResumedAs, as in
// ResumeSession's interrupted runs). The session is the one named by the
// request (which must record the run: else not_owner when another
// session records it, not_found when none does), else the one holding
// the run's checkpoint, else the one the store finds recording it.
func (e *Engine) Run(ctx context.Context, req api.RunRequest) (api.RunResult, error) {
	head, run, err := e.runHead(ctx, "Run", req.RunID, req.SessionID)
	if err != nil {
		return api.RunResult{}, err
	}
	out := api.RunResult{SessionID: head.Snapshot.SessionID, Generation: head.Snapshot.Generation, Run: *run}
	if cp := head.Checkpoints[run.RunID]; cp != nil {
		if n := int64(len(cp.State)) + checkpointOverhead + replyEnvelope; n > e.maxReply() {
			return api.RunResult{}, e.tooLarge("the checkpoint of run %q is %d bytes", run.RunID, n)
		}
		out.Checkpoint = cp
	}
	if child := pendingSuccessor(head, run.RunID); child != nil {
		out.ResumedAs = child.RunID
	}
	return out, nil
}

// RunEvents returns a page of a run's events: every trace recorded with
// its id and each of its loop checkpoints still kept, in commit order,
// from index from (or those committed after since_generation), cut short
// by limit and max_bytes and, like Messages, by the reply size limit. The
// session is found as for Run.
func (e *Engine) RunEvents(ctx context.Context, req api.RunEventsRequest) (api.RunEventsResult, error) {
	q := req.Query()
	if err := q.Check(); err != nil {
		return api.RunEventsResult{}, err
	}
	head, run, err := e.runHead(ctx, "RunEvents", req.RunID, req.SessionID)
	if err != nil {
		return api.RunEventsResult{}, err
	}
	sid := head.Snapshot.SessionID
	q, capBytes := e.capQuery(q, eventOverhead)
	p, err := e.store.RunEvents(ctx, sid, run.RunID, q)
	if err != nil {
		return api.RunEventsResult{}, wrapStore("RunEvents", err)
	}
	if len(p.Items) > 0 && session.EventSize(p.Items[0]) > capBytes {
		return api.RunEventsResult{}, e.tooLarge("event %d of run %q (a %s) is %d bytes", p.From, run.RunID, p.Items[0].Kind, session.EventSize(p.Items[0]))
	}
	return api.RunEventsResult{
		SessionID: sid, RunID: run.RunID, Generation: p.Generation, Total: p.Total,
		From: p.From, Next: p.Next, More: p.More, Events: nonNil(p.Items),
	}, nil
}

// runHead returns the head of the session that records runID and the
// run's record there; hint, when set, names that session (see Run). The
// session is found as the run operations find it (locateRun), and a
// session that does not record the run answers as runIn does.
func (e *Engine) runHead(ctx context.Context, op, runID, hint string) (*session.State, *session.Run, error) {
	if err := e.check(); err != nil {
		return nil, nil, err
	}
	if err := session.ValidateID("run", runID); err != nil {
		return nil, nil, err
	}
	sid, _, err := e.locateRun(ctx, runID, hint)
	if err != nil {
		return nil, nil, err
	}
	head, _, err := e.readRunHead(ctx, sid)
	if err != nil {
		return nil, nil, wrapStore(op, err)
	}
	r, err := e.runIn(ctx, head, runID, hint)
	if err != nil {
		return nil, nil, err
	}
	return head, r, nil
}

// ResumeSessionWith is ResumeSession with the request's options: a tail
// of the messages, artifacts with data, as metadata or none, traces or
// none, drift and process checks on or off. Without options the answer is
// ResumeSession's.
//
// It is built from the store's targeted reads, never a whole load, and
// its size is known before it is built: a reply that would pass the reply
// size limit (Options.MaxReplyBytes) is too_large, and the error names
// the paged reads to use instead. With no option that trims content, the
// store's live size of the session decides, before any content is read.
func (e *Engine) ResumeSessionWith(ctx context.Context, req api.ResumeSessionRequest) (*api.ResumeSessionResult, error) {
	sid := req.SessionID
	if err := e.checkSession(sid); err != nil {
		return nil, err
	}
	o, err := resumeOptionsOf(req)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		if attempt == 3 {
			// Commits keep landing between the reads: hold off this
			// engine's writers for the last attempt.
			unlock := e.sessions.lock(sid)
			defer unlock()
		}
		res, stale, err := e.resumeOnce(ctx, sid, o)
		if err != nil || !stale {
			return res, err
		}
		if attempt >= 3 {
			return nil, session.Errorf(session.CodeConflict, "resumeSession: session %q changed during every read", sid)
		}
	}
}

// resumeOptions are a ResumeSessionRequest's options, defaults applied.
type resumeOptions struct {
	tail             *int64
	artifacts        string
	traces           bool
	drift, processes bool
	trimsContent     bool
}

func resumeOptionsOf(req api.ResumeSessionRequest) (resumeOptions, error) {
	o := resumeOptions{tail: req.MessagesTail, artifacts: req.Artifacts, traces: true, drift: true, processes: true}
	if o.tail != nil && *o.tail < 0 {
		return o, session.Errorf(session.CodeInvalidArgument, "resumeSession: messages_tail %d is negative", *o.tail)
	}
	switch o.artifacts {
	case "":
		o.artifacts = api.IncludeFull
	case api.IncludeFull, api.IncludeMetadata, api.IncludeNone:
	default:
		return o, session.Errorf(session.CodeInvalidArgument, "resumeSession: artifacts is %q; use %q, %q or %q", req.Artifacts, api.IncludeFull, api.IncludeMetadata, api.IncludeNone)
	}
	switch req.Traces {
	case "", api.IncludeAll:
	case api.IncludeNone:
		o.traces = false
	default:
		return o, session.Errorf(session.CodeInvalidArgument, "resumeSession: traces is %q; use %q or %q", req.Traces, api.IncludeAll, api.IncludeNone)
	}
	if req.Drift != nil {
		o.drift = *req.Drift
	}
	if req.Processes != nil {
		o.processes = *req.Processes
	}
	o.trimsContent = o.tail != nil || o.artifacts != api.IncludeFull || !o.traces
	return o, nil
}

// resumeOnce builds a resume answer from one head and the reads of its
// content; stale reports that a read answered from another generation
// than the head, so the caller reads again.
func (e *Engine) resumeOnce(ctx context.Context, sid string, o resumeOptions) (*api.ResumeSessionResult, bool, error) {
	head, sum, err := e.store.Head(ctx, sid)
	if err != nil {
		return nil, false, wrapStore("ResumeSession", err)
	}
	if err := session.CheckSchema("snapshot", head.Snapshot.SchemaVersion); err != nil {
		return nil, false, err
	}
	gen := head.Snapshot.Generation
	limit := e.maxReply()
	// The whole session: its live size is what the reply carries, known
	// before any content, drift or process check.
	if !o.trimsContent && sum.LiveBytes+replyEnvelope > limit {
		return nil, false, e.tooLarge("resumeSession: session %q is %d bytes", sid, sum.LiveBytes)
	}

	res := &api.ResumeSessionResult{Generation: gen, MessageCount: sum.MessageCount, InterruptedRuns: interruptedRuns(head)}
	res.Drift = untracked("not requested")
	if o.drift {
		res.Drift = e.drift(ctx, head.Snapshot.Files)
	}
	res.Processes = []api.ProcessState{}
	if o.processes {
		res.Processes = e.probeProcesses(ctx, head.Snapshot.Runtime)
	}

	// What is left for content, once the parts already at hand are
	// counted. The head's own encoding is bounded by the live size; the
	// drift and runs are small beside the content.
	budget := limit - replyEnvelope - extrasSize(res)
	if o.trimsContent {
		budget -= jsonSize(head.Snapshot)
	} else {
		budget -= sum.LiveBytes
	}
	if budget < 0 {
		return nil, false, e.tooLarge("resumeSession: session %q is about %d bytes", sid, limit-budget)
	}
	// Without trimming, the live size covered the content: the reads are
	// not cut, only checked for the generation.
	contentCap := func(b int64) int64 {
		if !o.trimsContent {
			return 0
		}
		return max(b, 1)
	}
	snap := head.Snapshot

	if o.artifacts != api.IncludeNone && sum.ArtifactCount > 0 {
		withData := o.artifacts == api.IncludeFull
		if o.trimsContent {
			meta, err := e.store.Artifacts(ctx, sid, nil, false)
			if err != nil {
				return nil, false, wrapStore("ResumeSession", err)
			}
			if meta.Generation != gen {
				return nil, true, nil
			}
			for _, a := range meta.Items {
				budget -= artifactSize(a, withData)
			}
			if budget < 0 {
				return nil, false, e.tooLarge("resumeSession: the artifacts of session %q take about %d bytes", sid, limit-budget)
			}
			if !withData {
				snap.Artifacts = meta.Items
			}
		}
		if withData {
			p, err := e.store.Artifacts(ctx, sid, nil, true)
			if err != nil {
				return nil, false, wrapStore("ResumeSession", err)
			}
			if p.Generation != gen {
				return nil, true, nil
			}
			snap.Artifacts = p.Items
		}
	}

	if o.traces && sum.TraceCount > 0 {
		budget -= sum.TraceCount * traceOverhead
		if o.trimsContent && budget < 0 {
			return nil, false, e.tooLarge("resumeSession: the %d traces of session %q do not fit", sum.TraceCount, sid)
		}
		p, err := e.store.Traces(ctx, sid, session.Query{MaxBytes: contentCap(budget)})
		if err != nil {
			return nil, false, wrapStore("ResumeSession", err)
		}
		if p.Generation != gen {
			return nil, true, nil
		}
		for _, t := range p.Items {
			budget -= session.TraceSize(t)
		}
		// A page holds its first item whatever its size: check what came.
		if o.trimsContent && (p.More || budget < 0) {
			return nil, false, e.tooLarge("resumeSession: the traces of session %q do not fit", sid)
		}
		snap.Traces = p.Items
	}

	snap.Messages = []session.Value{}
	q := session.Query{}
	if o.tail != nil {
		q.Tail = *o.tail
	}
	res.MessagesFrom = sum.MessageCount
	if sum.MessageCount > 0 && (o.tail == nil || *o.tail > 0) {
		n := sum.MessageCount
		if o.tail != nil {
			n = min(n, *o.tail)
		}
		budget -= n * messageOverhead
		if o.trimsContent && budget < 0 {
			return nil, false, e.tooLarge("resumeSession: the %d messages asked for of session %q do not fit", n, sid)
		}
		q.MaxBytes = contentCap(budget)
		p, err := e.store.Messages(ctx, sid, q)
		if err != nil {
			return nil, false, wrapStore("ResumeSession", err)
		}
		if p.Generation != gen {
			return nil, true, nil
		}
		for _, m := range p.Items {
			budget -= session.ValueSize(m)
		}
		if o.trimsContent && (p.More || budget < 0) {
			return nil, false, e.tooLarge("resumeSession: the %d messages asked for of session %q do not fit", n, sid)
		}
		snap.Messages, res.MessagesFrom = nonNil(p.Items), p.From
	}
	res.Snapshot = snap
	return res, false, nil
}

// extrasSize bounds the encoded size of what a resume answer carries
// besides the snapshot: drift, interrupted runs and process states.
func extrasSize(r *api.ResumeSessionResult) int64 {
	n := int64(len(r.Drift.Reason)) + 128
	for _, l := range [][]string{r.Drift.Added, r.Drift.Modified, r.Drift.Deleted} {
		for _, p := range l {
			// A path is quoted, and JSON escapes at most double a byte
			// (six for control characters, which paths rarely hold).
			n += 2*int64(len(p)) + 3
		}
	}
	n += int64(len(r.InterruptedRuns)) * (session.MaxIDBytes*2 + runOverhead)
	n += jsonSize(r.Processes)
	return n
}

// jsonSize is the length of v's JSON encoding (0 if it has none). The
// engine uses it on parts that carry no session content (a head, process
// states), which are small.
func jsonSize(v any) int64 {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return int64(len(b))
}
