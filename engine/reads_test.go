package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// readsFixture is a session with messages over several generations,
// artifacts, traces of two runs, a run with a checkpoint and a resumed run.
type readsFixture struct {
	e         *engine.Engine
	sid       string
	midGen    uint64 // a generation after which messages were added
	midCount  int64  // messages at midGen
	running   string // a run with a loop checkpoint
	resumed   string // a run resumed, whose successor has not checkpointed
	successor string
}

func newReadsFixture(t *testing.T, e *engine.Engine) readsFixture {
	t.Helper()
	ctx := testkit.Context(t)
	fx := readsFixture{e: e, sid: "s"}
	for i := range 6 {
		saveDelta(t, e, fx.sid, msg("u", i), msg("a", i))
	}
	_, err := e.Save(ctx, api.SaveRequest{SessionID: fx.sid, Change: &session.Change{AppendArtifacts: []session.Artifact{
		{ID: "a1", Kind: "file", Name: "one.txt", Data: []byte("first artifact")},
		{ID: "a2", MediaType: "application/json", Data: []byte(`{"x":1}`), Metadata: session.Value(`{"tag":"json"}`)},
		{ID: "a3", Path: "docs/three.md", Size: 3},
	}}})
	noErr(t, err)
	r1, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: fx.sid})
	noErr(t, err)
	r2, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: fx.sid})
	noErr(t, err)
	fx.running, fx.resumed = r1.RunID, r2.RunID
	res, err := e.Save(ctx, api.SaveRequest{SessionID: fx.sid, Change: &session.Change{AppendTraces: []session.Trace{
		{RunID: r1.RunID, Type: "tool", Data: session.Value(`{"t":1}`)},
		{RunID: r2.RunID, Type: "tool", Data: session.Value(`{"t":2}`)},
		{Type: "note"},
		{RunID: r1.RunID, Type: "llm", Data: session.Value(`{"t":3}`)},
	}}})
	noErr(t, err)
	fx.midGen = res.Generation
	fx.midCount = 12
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r1.RunID, Turn: 1, NewMessages: []session.Value{msg("u", 100)}, State: session.Value(`{"step":1}`)})
	noErr(t, err)
	_, err = e.Checkpoint(ctx, api.CheckpointRequest{RunID: r2.RunID, Turn: 1, NewMessages: []session.Value{msg("u", 101)}})
	noErr(t, err)
	rr, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: r2.RunID})
	noErr(t, err)
	fx.successor = rr.RunID
	saveDelta(t, e, fx.sid, msg("a", 102))
	saveDelta(t, e, "other", msg("u", 0))
	return fx
}

// TestReadsMatchResume: every targeted read answers exactly what the
// whole session (ResumeSession) holds for the same range.
func TestReadsMatchResume(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		ctx := testkit.Context(t)
		fx := newReadsFixture(t, newEngine(t, f))
		e, sid := fx.e, fx.sid
		full, err := e.ResumeSession(ctx, sid)
		noErr(t, err)
		all := full.Snapshot.Messages
		n := int64(len(all))
		if full.MessageCount != n || full.MessagesFrom != 0 {
			t.Fatalf("message_count %d, messages_from %d; %d messages", full.MessageCount, full.MessagesFrom, n)
		}

		t.Run("summary", func(t *testing.T) {
			sum, err := e.Summary(ctx, sid)
			noErr(t, err)
			if sum.Generation != full.Generation || sum.MessageCount != n || sum.ArtifactCount != 3 ||
				sum.TraceCount != int64(len(full.Snapshot.Traces)) || sum.Runs[session.RunRunning] != 2 {
				t.Fatalf("summary %+v", sum)
			}
		})

		t.Run("messages", func(t *testing.T) {
			for _, c := range []struct {
				name     string
				req      api.MessagesRequest
				from, to int64
			}{
				{"all", api.MessagesRequest{}, 0, n},
				{"tail", api.MessagesRequest{Tail: 4}, n - 4, n},
				{"tail past the start", api.MessagesRequest{Tail: n + 10}, 0, n},
				{"range", api.MessagesRequest{From: 3, To: 9}, 3, 9},
				{"from", api.MessagesRequest{From: 10}, 10, n},
				{"to past the end", api.MessagesRequest{From: 5, To: n + 5}, 5, n},
				{"since generation", api.MessagesRequest{SinceGeneration: fx.midGen}, fx.midCount, n},
			} {
				t.Run(c.name, func(t *testing.T) {
					c.req.SessionID = sid
					got := pageAll(t, func(from int64) (api.MessagesResult, error) {
						r := c.req
						if from > 0 {
							r.From, r.Tail, r.SinceGeneration = from, 0, 0
							if r.To == 0 && c.req.Tail == 0 {
								r.To = c.to
							}
						}
						return e.Messages(ctx, r)
					}, c.from, c.to)
					if mustJSON(t, got) != mustJSON(t, all[c.from:c.to]) {
						t.Fatalf("messages %s:\n got %s\nwant %s", c.name, mustJSON(t, got), mustJSON(t, all[c.from:c.to]))
					}
				})
			}
			// Paged by one: the pages concatenate to the whole list.
			var got []session.Value
			for from := int64(0); ; {
				p, err := e.Messages(ctx, api.MessagesRequest{SessionID: sid, From: from, Limit: 1})
				noErr(t, err)
				if p.Total != n || p.Generation != full.Generation || len(p.Messages) != int(p.Next-p.From) {
					t.Fatalf("page %+v", p)
				}
				got = append(got, p.Messages...)
				if !p.More {
					break
				}
				from = p.Next
			}
			if mustJSON(t, got) != mustJSON(t, all) {
				t.Fatal("paged messages differ from the whole list")
			}
		})

		t.Run("artifacts", func(t *testing.T) {
			list, err := e.Artifacts(ctx, sid)
			noErr(t, err)
			want := slices.Clone(full.Snapshot.Artifacts)
			for i := range want {
				one, err := e.Artifact(ctx, api.ArtifactRequest{SessionID: sid, ArtifactID: want[i].ID})
				noErr(t, err)
				if mustJSON(t, one.Artifact) != mustJSON(t, want[i]) || one.Generation != full.Generation {
					t.Fatalf("artifact %s: %s, want %s", want[i].ID, mustJSON(t, one.Artifact), mustJSON(t, want[i]))
				}
				want[i].Data = nil
			}
			if mustJSON(t, list.Artifacts) != mustJSON(t, want) {
				t.Fatalf("artifacts %s, want %s", mustJSON(t, list.Artifacts), mustJSON(t, want))
			}
		})

		t.Run("runs", func(t *testing.T) {
			runs, err := e.Runs(ctx, sid)
			noErr(t, err)
			if mustJSON(t, runs.Runs) != mustJSON(t, full.Snapshot.Runs) || runs.Generation != full.Generation {
				t.Fatalf("runs %s, want %s", mustJSON(t, runs.Runs), mustJSON(t, full.Snapshot.Runs))
			}
			for _, hint := range []string{"", sid} {
				r, err := e.Run(ctx, api.RunRequest{RunID: fx.running, SessionID: hint})
				noErr(t, err)
				if r.SessionID != sid || r.Run.RunID != fx.running || r.Checkpoint == nil || string(r.Checkpoint.State) != `{"step":1}` || r.ResumedAs != "" {
					t.Fatalf("run %s: %s", fx.running, mustJSON(t, r))
				}
			}
			r, err := e.Run(ctx, api.RunRequest{RunID: fx.resumed})
			noErr(t, err)
			// As resumeSession's interrupted runs say it.
			var ir *api.InterruptedRun
			for i := range full.InterruptedRuns {
				if full.InterruptedRuns[i].RunID == fx.resumed {
					ir = &full.InterruptedRuns[i]
				}
			}
			if ir == nil || r.ResumedAs != fx.successor || ir.ResumedAs != r.ResumedAs || r.Run.Status != session.RunInterrupted {
				t.Fatalf("resumed run: %s; interrupted runs %s", mustJSON(t, r), mustJSON(t, full.InterruptedRuns))
			}
		})

		t.Run("run events", func(t *testing.T) {
			var want []session.Trace
			for _, tr := range full.Snapshot.Traces {
				if tr.RunID == fx.running {
					want = append(want, tr)
				}
			}
			var traces []session.Trace
			checkpoints := 0
			for from := int64(0); ; {
				p, err := e.RunEvents(ctx, api.RunEventsRequest{RunID: fx.running, From: from, Limit: 1})
				noErr(t, err)
				for _, ev := range p.Events {
					switch ev.Kind {
					case session.EventTrace:
						traces = append(traces, *ev.Trace)
					case session.EventCheckpoint:
						checkpoints++
					}
				}
				if !p.More {
					break
				}
				from = p.Next
			}
			if mustJSON(t, traces) != mustJSON(t, want) || checkpoints != 1 {
				t.Fatalf("run events: traces %s, want %s; %d checkpoints", mustJSON(t, traces), mustJSON(t, want), checkpoints)
			}
		})

		t.Run("errors", func(t *testing.T) {
			_, err := e.Messages(ctx, api.MessagesRequest{SessionID: sid, Tail: -1})
			wantCode(t, err, session.CodeInvalidArgument)
			_, err = e.Messages(ctx, api.MessagesRequest{SessionID: sid, Tail: 2, From: 1})
			wantCode(t, err, session.CodeInvalidArgument)
			_, err = e.Messages(ctx, api.MessagesRequest{SessionID: sid, From: 5, To: 2})
			wantCode(t, err, session.CodeInvalidArgument)
			_, err = e.Messages(ctx, api.MessagesRequest{})
			wantCode(t, err, session.CodeInvalidArgument)
			_, err = e.Messages(ctx, api.MessagesRequest{SessionID: "nope"})
			wantCode(t, err, session.CodeNotFound)
			_, err = e.Summary(ctx, "nope")
			wantCode(t, err, session.CodeNotFound)
			_, err = e.Artifact(ctx, api.ArtifactRequest{SessionID: sid, ArtifactID: "nope"})
			wantCode(t, err, session.CodeNotFound)
			_, err = e.Artifact(ctx, api.ArtifactRequest{SessionID: sid})
			wantCode(t, err, session.CodeInvalidArgument)
			_, err = e.Run(ctx, api.RunRequest{RunID: "nope"})
			wantCode(t, err, session.CodeNotFound)
			_, err = e.Run(ctx, api.RunRequest{})
			wantCode(t, err, session.CodeInvalidArgument)
			// The rule of checkpoint and completeRun: the named session
			// must record the run.
			_, err = e.Run(ctx, api.RunRequest{RunID: fx.running, SessionID: "other"})
			wantCode(t, err, session.CodeNotOwner)
			_, err = e.RunEvents(ctx, api.RunEventsRequest{RunID: fx.running, SessionID: "other"})
			wantCode(t, err, session.CodeNotOwner)
			_, err = e.RunEvents(ctx, api.RunEventsRequest{RunID: fx.running, From: -1})
			wantCode(t, err, session.CodeInvalidArgument)
			_, err = e.Runs(ctx, "nope")
			wantCode(t, err, session.CodeNotFound)
		})
	})
}

// pageAll reads the range [from, to) page after page (read(0) first, then
// read(next)) and returns its items.
func pageAll(t *testing.T, read func(from int64) (api.MessagesResult, error), from, to int64) []session.Value {
	t.Helper()
	var out []session.Value
	next := int64(0)
	for range 1000 {
		p, err := read(next)
		noErr(t, err)
		if next == 0 && p.From != from {
			t.Fatalf("page starts at %d, want %d", p.From, from)
		}
		out = append(out, p.Messages...)
		if !p.More {
			if p.Next != to {
				t.Fatalf("range ends at %d, want %d", p.Next, to)
			}
			return out
		}
		next = p.Next
	}
	t.Fatal("paging does not end")
	return nil
}

// countingWorkspace is a workspace tracker that counts the diffs asked of
// it.
type countingWorkspace struct{ diffs int }

func (w *countingWorkspace) RecordManifest(context.Context) (session.ManifestRef, error) {
	return session.ManifestRef{ID: "m1"}, nil
}

func (w *countingWorkspace) DiffFiles(context.Context, session.ManifestRef, *session.ManifestRef) (a, m, d []string, err error) {
	w.diffs++
	return []string{"new.go"}, nil, nil, nil
}

func TestResumeSessionOptions(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		ctx := testkit.Context(t)
		ws := &countingWorkspace{}
		st := openStore(t, f)
		e := engine.New(st, engine.Options{Workspace: ws, ProbeTimeout: -1})
		t.Cleanup(func() { _ = e.Close() })
		fx := newReadsFixture(t, e)
		_, err := e.Save(ctx, api.SaveRequest{SessionID: fx.sid, Change: &session.Change{Runtime: &session.Runtime{Processes: []session.Process{{Name: "web", Command: []string{"true"}}}}}})
		noErr(t, err)

		ws.diffs = 0
		full, err := e.ResumeSession(ctx, fx.sid)
		noErr(t, err)
		if ws.diffs != 1 || !full.Drift.Tracked || len(full.Processes) != 1 {
			t.Fatalf("default resume: %d diffs, drift %+v, processes %+v", ws.diffs, full.Drift, full.Processes)
		}
		// The default answer is the whole session, as the store holds it.
		loaded, err := st.Load(ctx, fx.sid, 0)
		noErr(t, err)
		if mustJSON(t, full.Snapshot) != mustJSON(t, loaded.Snapshot) {
			t.Fatalf("default resume differs from the stored session:\n got %s\nwant %s", mustJSON(t, full.Snapshot), mustJSON(t, loaded.Snapshot))
		}
		n := int64(len(full.Snapshot.Messages))
		i64 := func(v int64) *int64 { return &v }
		no := false

		for _, c := range []struct {
			name string
			req  api.ResumeSessionRequest
			want func(w *session.Snapshot) (from int64)
		}{
			{"tail", api.ResumeSessionRequest{MessagesTail: i64(3)}, func(w *session.Snapshot) int64 {
				w.Messages = w.Messages[n-3:]
				return n - 3
			}},
			{"tail 0", api.ResumeSessionRequest{MessagesTail: i64(0)}, func(w *session.Snapshot) int64 {
				w.Messages = []session.Value{}
				return n
			}},
			{"tail past the start", api.ResumeSessionRequest{MessagesTail: i64(n + 7)}, func(*session.Snapshot) int64 { return 0 }},
			{"artifacts metadata", api.ResumeSessionRequest{Artifacts: api.IncludeMetadata}, func(w *session.Snapshot) int64 {
				w.Artifacts = slices.Clone(w.Artifacts)
				for i := range w.Artifacts {
					w.Artifacts[i].Data = nil
				}
				return 0
			}},
			{"artifacts none, traces none", api.ResumeSessionRequest{Artifacts: api.IncludeNone, Traces: api.IncludeNone}, func(w *session.Snapshot) int64 {
				w.Artifacts, w.Traces = nil, nil
				return 0
			}},
			{"explicit defaults", api.ResumeSessionRequest{Artifacts: api.IncludeFull, Traces: api.IncludeAll}, func(*session.Snapshot) int64 { return 0 }},
		} {
			t.Run(c.name, func(t *testing.T) {
				c.req.SessionID = fx.sid
				got, err := e.ResumeSessionWith(ctx, c.req)
				noErr(t, err)
				want := *full.Snapshot
				from := c.want(&want)
				if mustJSON(t, got.Snapshot) != mustJSON(t, &want) || got.MessageCount != n || got.MessagesFrom != from {
					t.Fatalf("got %s (count %d, from %d)\nwant %s (count %d, from %d)", mustJSON(t, got.Snapshot), got.MessageCount, got.MessagesFrom, mustJSON(t, &want), n, from)
				}
				if mustJSON(t, got.InterruptedRuns) != mustJSON(t, full.InterruptedRuns) || got.Generation != full.Generation {
					t.Fatalf("interrupted runs %s, want %s", mustJSON(t, got.InterruptedRuns), mustJSON(t, full.InterruptedRuns))
				}
			})
		}

		t.Run("no drift, no processes", func(t *testing.T) {
			ws.diffs = 0
			got, err := e.ResumeSessionWith(ctx, api.ResumeSessionRequest{SessionID: fx.sid, Drift: &no, Processes: &no})
			noErr(t, err)
			if ws.diffs != 0 || got.Drift.Tracked || got.Drift.Reason != "not requested" || got.Processes == nil || len(got.Processes) != 0 {
				t.Fatalf("%d diffs; drift %+v; processes %+v", ws.diffs, got.Drift, got.Processes)
			}
			if mustJSON(t, got.Snapshot) != mustJSON(t, full.Snapshot) {
				t.Fatal("the snapshot changed with drift and processes off")
			}
		})

		t.Run("bad options", func(t *testing.T) {
			for _, req := range []api.ResumeSessionRequest{
				{MessagesTail: i64(-1)},
				{Artifacts: "some"},
				{Traces: "full"},
			} {
				req.SessionID = fx.sid
				_, err := e.ResumeSessionWith(ctx, req)
				wantCode(t, err, session.CodeInvalidArgument)
			}
		})
	})
}

// TestReplySizeLimit: a reply that would pass MaxReplyBytes is refused with
// too_large naming the paged reads, and pages are cut to fit it.
func TestReplySizeLimit(t *testing.T) {
	const limit = 16 << 10
	forEachStore(t, func(t *testing.T, f storeFactory) {
		ctx := testkit.Context(t)
		e := engine.New(openStore(t, f), engine.Options{MaxReplyBytes: limit})
		t.Cleanup(func() { _ = e.Close() })
		kb := func(i int) session.Value {
			return session.Value(fmt.Sprintf(`{"n":%d,"text":%q}`, i, strings.Repeat("x", 1000)))
		}
		for i := range 40 {
			saveDelta(t, e, "s", kb(i))
		}
		_, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendArtifacts: []session.Artifact{
			{ID: "small", Data: []byte("tiny")},
			{ID: "big", Data: []byte(strings.Repeat("b", limit))},
		}}})
		noErr(t, err)

		_, err = e.ResumeSession(ctx, "s")
		wantTooLarge(t, err, "resumeSession with messages_tail")

		// Trimmed to fit, the same session resumes.
		tail := int64(5)
		r, err := e.ResumeSessionWith(ctx, api.ResumeSessionRequest{SessionID: "s", MessagesTail: &tail, Artifacts: api.IncludeMetadata})
		noErr(t, err)
		if len(r.Snapshot.Messages) != 5 || r.MessagesFrom != 35 || len(r.Snapshot.Artifacts) != 2 || r.Snapshot.Artifacts[1].Data != nil {
			t.Fatalf("trimmed resume: %d messages from %d, artifacts %s", len(r.Snapshot.Messages), r.MessagesFrom, mustJSON(t, r.Snapshot.Artifacts))
		}
		// A tail that does not fit, and the big artifact's data, do not.
		tail = 30
		_, err = e.ResumeSessionWith(ctx, api.ResumeSessionRequest{SessionID: "s", MessagesTail: &tail, Artifacts: api.IncludeNone})
		wantTooLarge(t, err, "messages (tail")
		tail = 1
		_, err = e.ResumeSessionWith(ctx, api.ResumeSessionRequest{SessionID: "s", MessagesTail: &tail})
		wantTooLarge(t, err, "artifact (one")

		// An unlimited messages read comes in pages that each fit.
		var got []session.Value
		pages := 0
		for from := int64(0); ; pages++ {
			p, err := e.Messages(ctx, api.MessagesRequest{SessionID: "s", From: from})
			noErr(t, err)
			if size := len(mustJSON(t, p)); size > limit {
				t.Fatalf("a page of %d messages is %d bytes, over the limit %d", len(p.Messages), size, limit)
			}
			got = append(got, p.Messages...)
			if !p.More {
				break
			}
			from = p.Next
		}
		if len(got) != 40 || pages < 2 {
			t.Fatalf("%d messages in %d pages", len(got), pages+1)
		}

		_, err = e.Artifact(ctx, api.ArtifactRequest{SessionID: "s", ArtifactID: "big"})
		wantTooLarge(t, err, `artifact "big"`)
		_, err = e.Artifact(ctx, api.ArtifactRequest{SessionID: "s", ArtifactID: "small"})
		noErr(t, err)

		// One message larger than the limit is named.
		saveDelta(t, e, "s", session.Value(`"`+strings.Repeat("m", limit)+`"`))
		_, err = e.Messages(ctx, api.MessagesRequest{SessionID: "s", Tail: 1})
		wantTooLarge(t, err, "message 40")
		tail = 1
		_, err = e.ResumeSessionWith(ctx, api.ResumeSessionRequest{SessionID: "s", MessagesTail: &tail, Artifacts: api.IncludeNone})
		wantTooLarge(t, err, "messages_tail")

		// Run events are paged to fit as well.
		run, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"})
		noErr(t, err)
		var traces []session.Trace
		for i := range 30 {
			traces = append(traces, session.Trace{RunID: run.RunID, Type: "t", Data: kb(i)})
		}
		_, err = e.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendTraces: traces}})
		noErr(t, err)
		n := 0
		for from := int64(0); ; {
			p, err := e.RunEvents(ctx, api.RunEventsRequest{RunID: run.RunID, From: from})
			noErr(t, err)
			if size := len(mustJSON(t, p)); size > limit {
				t.Fatalf("a page of %d events is %d bytes, over the limit %d", len(p.Events), size, limit)
			}
			n += len(p.Events)
			if !p.More {
				break
			}
			from = p.Next
		}
		if n != 30 {
			t.Fatalf("%d run events, want 30", n)
		}
	})
}

// wantTooLarge fails unless err is too_large and its message names the
// paged read hint.
func wantTooLarge(t *testing.T, err error, hint string) {
	t.Helper()
	wantCode(t, err, session.CodeTooLarge)
	if !strings.Contains(err.Error(), hint) {
		t.Fatalf("too_large error does not name %q: %v", hint, err)
	}
}

// TestResumeSessionConsistentUnderWrites: a resume assembled from several
// reads while another goroutine commits still shows one generation: each
// commit adds one message and one trace, so the counts always agree.
func TestResumeSessionConsistentUnderWrites(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		ctx := testkit.Context(t)
		e := newEngine(t, f)
		one := func(i int) *session.Change {
			return &session.Change{AppendMessages: []session.Value{msg("u", i)}, AppendTraces: []session.Trace{{Type: "t"}}}
		}
		_, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: one(0)})
		noErr(t, err)
		done := make(chan error, 1)
		go func() {
			for i := 1; i <= 100; i++ {
				if _, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Change: one(i)}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for finished := false; !finished; {
			select {
			case err := <-done:
				noErr(t, err)
				finished = true
			default:
			}
			r, err := e.ResumeSession(ctx, "s")
			noErr(t, err)
			if int64(len(r.Snapshot.Messages)) != r.MessageCount || len(r.Snapshot.Traces) != len(r.Snapshot.Messages) ||
				r.Snapshot.Generation != r.Generation || uint64(r.MessageCount) != r.Generation {
				t.Fatalf("mixed generations: generation %d, %d messages (count %d), %d traces",
					r.Generation, len(r.Snapshot.Messages), r.MessageCount, len(r.Snapshot.Traces))
			}
		}
	})
}
