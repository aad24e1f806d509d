package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/apischema"
	"github.com/cairn-dev/cairn/session"
)

// TestAnswersMatchSchema runs every engine method on a session with few
// records (so most lists are empty) and checks each answer, as JSON,
// against its type in api/schema.json: a list is [] when empty, never
// null, and no answer has a field the schema lacks.
func TestAnswersMatchSchema(t *testing.T) {
	b, err := os.ReadFile("../api/schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := apischema.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	forEachStore(t, func(t *testing.T, f storeFactory) {
		ctx := context.Background()
		e := newEngine(t, f)
		check := func(typ string, v any, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			raw, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			doc2, err := apischema.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range doc.Validate(typ, doc2) {
				t.Errorf("%v\n%s", err, raw)
			}
		}
		// A session saved with nothing but its id: every list empty.
		save, err := e.Save(ctx, api.SaveRequest{SessionID: "s1", Snapshot: &session.Snapshot{SessionID: "s1"}})
		check("SaveResult", save, err)
		res, err := e.ResumeSession(ctx, "s1")
		check("ResumeSessionResult", res, err)
		run, err := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "s1"})
		check("BeginRunResult", run, err)
		cp, err := e.Checkpoint(ctx, api.CheckpointRequest{RunID: run.RunID, Turn: 1})
		check("CheckpointResult", cp, err)
		res, err = e.ResumeSession(ctx, "s1")
		check("ResumeSessionResult", res, err)
		rr, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: run.RunID})
		check("ResumeRunResult", rr, err)
		done, err := e.CompleteRun(ctx, api.CompleteRunRequest{RunID: rr.RunID, Status: session.RunCompleted})
		check("CompleteRunResult", done, err)
		wf, err := e.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "w1", Steps: []api.StepSpec{{StepID: "a", Identity: "1"}}})
		check("BeginWorkflowResult", wf, err)
		list, err := e.List(ctx)
		check("ListResult", api.ListResult{Sessions: list}, err)
		fork, err := e.Fork(ctx, api.ForkRequest{SessionID: "s1", NewID: "s2"})
		check("ForkResult", fork, err)
		env, err := e.Export(ctx, "s1")
		check("ExportResult", api.ExportResult{Envelope: env}, err)
		ho, err := e.Handoff(ctx, api.HandoffRequest{SessionID: "s1"})
		check("HandoffResult", ho, err)
		rc, err := e.RuntimeCheck(ctx, api.RuntimeCheckRequest{SessionID: "s1"})
		check("RuntimeCheckResult", rc, err)
		noErr(t, e.Delete(ctx, "s1"))
		imp, err := e.Import(ctx, env)
		check("ImportResult", imp, err)
	})
}
