package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// TestE2ETargetedReads drives the targeted reads through a real cairnd
// with a small message size limit: each answers what the whole session
// holds for its range, a whole resume past the limit is refused with
// too_large naming the paged reads, and pages come cut to fit.
func TestE2ETargetedReads(t *testing.T) {
	const limit = 64 << 10
	ws := workspace(t)
	p := startCairnd(t, ws, "--max-message-size", fmt.Sprint(limit))
	c := p.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// 40 messages of about 2 KiB, in four saves; a small and a 40 KiB
	// artifact; a run with traces and a checkpoint.
	text := strings.Repeat("x", 2000)
	var gens []uint64
	for s := range 4 {
		var ms []session.Value
		for i := range 10 {
			ms = append(ms, val(fmt.Sprintf(`{"n":%d,"text":%q}`, s*10+i, text)))
		}
		r := must[api.SaveResult](t, "save")(c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: ms}}))
		gens = append(gens, r.Generation)
	}
	must[api.SaveResult](t, "save artifacts")(c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendArtifacts: []session.Artifact{
		{ID: "small", Name: "small.txt", Data: []byte("tiny"), Metadata: val(`{"k":"v"}`)},
		{ID: "big", Data: []byte(strings.Repeat("b", 40<<10))},
	}}}))
	run := must[api.BeginRunResult](t, "beginRun")(c.BeginRun(ctx, api.BeginRunRequest{SessionID: "s"}))
	must[api.SaveResult](t, "save traces")(c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendTraces: []session.Trace{
		{RunID: run.RunID, Type: "tool", Data: val(`{"i":1}`)},
		{Type: "other"},
		{RunID: run.RunID, Type: "tool", Data: val(`{"i":2}`)},
	}}}))
	must[api.CheckpointResult](t, "checkpoint")(c.Checkpoint(ctx, api.CheckpointRequest{RunID: run.RunID, Turn: 1, State: val(`{"at":1}`)}))
	must[api.SaveResult](t, "save other")(c.Save(ctx, api.SaveRequest{SessionID: "other", Change: &session.Change{AppendMessages: []session.Value{val(`1`)}}}))

	// The whole session is over the limit: refused, naming the paged reads.
	_, err := c.ResumeSession(ctx, "s")
	wantCode(t, "whole resume", err, session.CodeTooLarge)
	for _, read := range []string{"messages (tail", "artifact (one", "runEvents", "messages_tail"} {
		if !strings.Contains(err.Error(), read) {
			t.Fatalf("too_large does not name %q: %v", read, err)
		}
	}

	// Trimmed, it resumes, and tells where its messages start.
	tail := int64(5)
	no := false
	res := must[*api.ResumeSessionResult](t, "trimmed resume")(c.ResumeSessionWith(ctx, api.ResumeSessionRequest{
		SessionID: "s", MessagesTail: &tail, Artifacts: api.IncludeMetadata, Drift: &no, Processes: &no}))
	if res.MessageCount != 40 || res.MessagesFrom != 35 || len(res.Snapshot.Messages) != 5 || len(res.Snapshot.Artifacts) != 2 ||
		res.Snapshot.Artifacts[1].Data != nil || res.Snapshot.Artifacts[1].Size != 40<<10 || res.Drift.Reason != "not requested" ||
		len(res.Snapshot.Traces) != 3 || len(res.InterruptedRuns) != 1 {
		t.Fatalf("trimmed resume: %d/%d messages from %d, artifacts %d, drift %+v, %d traces, interrupted %+v", len(res.Snapshot.Messages),
			res.MessageCount, res.MessagesFrom, len(res.Snapshot.Artifacts), res.Drift, len(res.Snapshot.Traces), res.InterruptedRuns)
	}

	sum := must[session.Summary](t, "summary")(c.Summary(ctx, "s"))
	if sum.Generation != res.Generation || sum.MessageCount != 40 || sum.ArtifactCount != 2 || sum.TraceCount != 3 {
		t.Fatalf("summary %+v", sum)
	}

	// Messages: a tail, a range, since a generation, and the whole list in
	// pages that each fit.
	tailPage := must[api.MessagesResult](t, "messages tail")(c.Messages(ctx, api.MessagesRequest{SessionID: "s", Tail: 5}))
	if mustMarshal(t, tailPage.Messages) != mustMarshal(t, res.Snapshot.Messages) || tailPage.From != 35 || tailPage.More {
		t.Fatalf("tail page from %d: differs from the resume's tail", tailPage.From)
	}
	var all []session.Value
	pages := 0
	for from := int64(0); ; pages++ {
		pg := must[api.MessagesResult](t, "messages page")(c.Messages(ctx, api.MessagesRequest{SessionID: "s", From: from}))
		all = append(all, pg.Messages...)
		if !pg.More {
			break
		}
		from = pg.Next
	}
	if len(all) != 40 || pages == 0 || mustMarshal(t, all[35:]) != mustMarshal(t, res.Snapshot.Messages) {
		t.Fatalf("%d messages in %d pages", len(all), pages+1)
	}
	rng := must[api.MessagesResult](t, "messages range")(c.Messages(ctx, api.MessagesRequest{SessionID: "s", From: 12, To: 15}))
	if mustMarshal(t, rng.Messages) != mustMarshal(t, all[12:15]) || rng.Total != 40 {
		t.Fatalf("range 12..15: %+v", rng)
	}
	since := must[api.MessagesResult](t, "messages since")(c.Messages(ctx, api.MessagesRequest{SessionID: "s", SinceGeneration: gens[2], Limit: 100}))
	if since.From != 30 || len(since.Messages) != 10 {
		t.Fatalf("since generation %d: from %d, %d messages", gens[2], since.From, len(since.Messages))
	}
	_, err = c.Messages(ctx, api.MessagesRequest{SessionID: "s", Tail: 3, From: 1})
	wantCode(t, "tail with from", err, session.CodeInvalidArgument)
	_, err = c.Messages(ctx, api.MessagesRequest{SessionID: "nope"})
	wantCode(t, "messages of a missing session", err, session.CodeNotFound)

	// Artifacts: the list without data, each one with its data.
	list := must[api.ArtifactsResult](t, "artifacts")(c.Artifacts(ctx, "s"))
	if mustMarshal(t, list.Artifacts) != mustMarshal(t, res.Snapshot.Artifacts) {
		t.Fatalf("artifacts %s, want %s", mustMarshal(t, list.Artifacts), mustMarshal(t, res.Snapshot.Artifacts))
	}
	big := must[api.ArtifactResult](t, "artifact big")(c.Artifact(ctx, api.ArtifactRequest{SessionID: "s", ArtifactID: "big"}))
	if len(big.Artifact.Data) != 40<<10 || big.Artifact.SHA256 != list.Artifacts[1].SHA256 {
		t.Fatalf("big artifact: %d bytes", len(big.Artifact.Data))
	}
	small := must[api.ArtifactResult](t, "artifact small")(c.Artifact(ctx, api.ArtifactRequest{SessionID: "s", ArtifactID: "small"}))
	if string(small.Artifact.Data) != "tiny" || string(small.Artifact.Metadata) != `{"k":"v"}` {
		t.Fatalf("small artifact: %+v", small.Artifact)
	}
	_, err = c.Artifact(ctx, api.ArtifactRequest{SessionID: "s", ArtifactID: "nope"})
	wantCode(t, "missing artifact", err, session.CodeNotFound)

	// Runs.
	runs := must[api.RunsResult](t, "runs")(c.Runs(ctx, "s"))
	if len(runs.Runs) != 1 || runs.Runs[0].RunID != run.RunID {
		t.Fatalf("runs %+v", runs)
	}
	one := must[api.RunResult](t, "run")(c.Run(ctx, api.RunRequest{RunID: run.RunID}))
	if one.SessionID != "s" || one.Run.Status != session.RunRunning || one.Checkpoint == nil || string(one.Checkpoint.State) != `{"at":1}` {
		t.Fatalf("run %+v", one)
	}
	_, err = c.Run(ctx, api.RunRequest{RunID: run.RunID, SessionID: "other"})
	wantCode(t, "run in another session", err, session.CodeNotOwner)
	_, err = c.Run(ctx, api.RunRequest{RunID: "nope"})
	wantCode(t, "missing run", err, session.CodeNotFound)
	var kinds []string
	for from := int64(0); ; {
		pg := must[api.RunEventsResult](t, "runEvents")(c.RunEvents(ctx, api.RunEventsRequest{RunID: run.RunID, SessionID: "s", From: from, Limit: 2}))
		for _, ev := range pg.Events {
			kinds = append(kinds, ev.Kind)
		}
		if !pg.More {
			break
		}
		from = pg.Next
	}
	if strings.Join(kinds, ",") != "trace,trace,checkpoint" {
		t.Fatalf("run events %v", kinds)
	}
	_, err = c.RunEvents(ctx, api.RunEventsRequest{RunID: run.RunID, SessionID: "other"})
	wantCode(t, "runEvents in another session", err, session.CodeNotOwner)

	// One message over the limit is named, not sent.
	must[api.SaveResult](t, "save one big message")(c.Save(ctx, api.SaveRequest{SessionID: "s",
		Change: &session.Change{AppendMessages: []session.Value{val(`"` + strings.Repeat("m", 63<<10) + `"`)}}}))
	_, err = c.Messages(ctx, api.MessagesRequest{SessionID: "s", Tail: 1})
	wantCode(t, "one message over the limit", err, session.CodeTooLarge)
	if !strings.Contains(err.Error(), "message 40") {
		t.Fatalf("too_large does not name the message: %v", err)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
