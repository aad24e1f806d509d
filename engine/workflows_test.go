package engine_test

import (
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

func TestWorkflows(t *testing.T) {
	spec := []api.StepSpec{{StepID: "fetch", Identity: "f1"}, {StepID: "build", Identity: "b1"}, {StepID: "test", Identity: "t1"}}
	// fixture: "wf" has test and fetch done (in that order), owned by "s";
	// "free" has no owner.
	fixture := func(t *testing.T, e *engine.Engine) {
		t.Helper()
		ctx := testkit.Context(t)
		saveDelta(t, e, "s", msg("u", 1))
		saveDelta(t, e, "other", msg("u", 1))
		noErr(t, e.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "wf", SessionID: "s", StepID: "test", Identity: "t1", Result: session.Value(`{"passed":  true}`)}))
		noErr(t, e.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "wf", SessionID: "s", StepID: "fetch", Identity: "f1", Result: session.Value(`"ok"`)}))
		noErr(t, e.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "free", StepID: "fetch", Identity: "f1"}))
	}
	cases := []struct {
		name string
		req  api.BeginWorkflowRequest
		code session.Code
		want []string // completed step ids in order
	}{
		{"new workflow", api.BeginWorkflowRequest{WorkflowID: "new", Steps: spec}, "", nil},
		{"spec order", api.BeginWorkflowRequest{WorkflowID: "wf", Steps: spec}, "", []string{"fetch", "test"}},
		{"owner named", api.BeginWorkflowRequest{WorkflowID: "wf", SessionID: "s", Steps: spec}, "", []string{"fetch", "test"}},
		{"recorded steps absent from spec are ignored", api.BeginWorkflowRequest{WorkflowID: "wf", Steps: spec[1:]}, "", []string{"test"}},
		{"identity changed", api.BeginWorkflowRequest{WorkflowID: "wf", Steps: []api.StepSpec{{StepID: "fetch", Identity: "f1"}, {StepID: "test", Identity: "t2"}}}, session.CodeStepIdentityChanged, nil},
		{"not the owner", api.BeginWorkflowRequest{WorkflowID: "wf", SessionID: "other", Steps: spec}, session.CodeNotOwner, nil},
		{"unknown session", api.BeginWorkflowRequest{WorkflowID: "wf", SessionID: "nope", Steps: spec}, session.CodeNotFound, nil},
		{"duplicate step in spec", api.BeginWorkflowRequest{WorkflowID: "wf", Steps: []api.StepSpec{{StepID: "a", Identity: "1"}, {StepID: "a", Identity: "1"}}}, session.CodeInvalidArgument, nil},
		{"empty identity", api.BeginWorkflowRequest{WorkflowID: "wf", Steps: []api.StepSpec{{StepID: "a"}}}, session.CodeInvalidArgument, nil},
		{"empty workflow id", api.BeginWorkflowRequest{Steps: spec}, session.CodeInvalidArgument, nil},
		{"unowned workflow, any session", api.BeginWorkflowRequest{WorkflowID: "free", SessionID: "other", Steps: spec}, "", []string{"fetch"}},
	}
	forEachStore(t, func(t *testing.T, f storeFactory) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newEngine(t, f)
				fixture(t, e)
				res, err := e.BeginWorkflow(testkit.Context(t), tc.req)
				wantCode(t, err, tc.code)
				if tc.code != "" {
					return
				}
				var got []string
				for _, s := range res.Completed {
					got = append(got, s.StepID)
				}
				if mustJSON(t, got) != mustJSON(t, tc.want) {
					t.Fatalf("completed = %v, want %v", got, tc.want)
				}
				for _, s := range res.Completed {
					if s.StepID == "test" && string(s.Result) != `{"passed":  true}` {
						t.Fatalf("result not byte-identical: %q", s.Result)
					}
				}
			})
		}
		t.Run("complete step errors", func(t *testing.T) {
			e := newEngine(t, f)
			fixture(t, e)
			ctx := testkit.Context(t)
			for _, c := range []struct {
				req  api.CompleteStepRequest
				code session.Code
			}{
				{api.CompleteStepRequest{WorkflowID: "wf", StepID: "fetch", Identity: "f2"}, session.CodeStepIdentityChanged},
				{api.CompleteStepRequest{WorkflowID: "wf", SessionID: "other", StepID: "build", Identity: "b1"}, session.CodeNotOwner},
				{api.CompleteStepRequest{WorkflowID: "wf", SessionID: "nope", StepID: "build", Identity: "b1"}, session.CodeNotFound},
				{api.CompleteStepRequest{WorkflowID: "wf", StepID: "build"}, session.CodeInvalidArgument},
				{api.CompleteStepRequest{WorkflowID: "wf", StepID: "build", Identity: "b1", Result: session.Value(`{`)}, session.CodeInvalidArgument},
				{api.CompleteStepRequest{WorkflowID: "", StepID: "build", Identity: "b1"}, session.CodeInvalidArgument},
				{api.CompleteStepRequest{WorkflowID: "wf", StepID: "fetch", Identity: "f1", Result: session.Value(`"again"`)}, ""},
			} {
				wantCode(t, e.CompleteStep(ctx, c.req), c.code)
			}
			res, err := e.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf", Steps: spec})
			noErr(t, err)
			if len(res.Completed) != 2 || string(res.Completed[0].Result) != `"again"` {
				t.Fatalf("after errors: %+v", res.Completed)
			}
		})
		t.Run("finish", func(t *testing.T) {
			e := newEngine(t, f)
			fixture(t, e)
			ctx := testkit.Context(t)
			// A changed spec fails closed until the workflow is finished.
			changed := []api.StepSpec{{StepID: "fetch", Identity: "f9"}}
			_, err := e.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf", Steps: changed})
			wantCode(t, err, session.CodeStepIdentityChanged)
			noErr(t, e.FinishWorkflow(ctx, "wf"))
			wantCode(t, e.FinishWorkflow(ctx, "wf"), session.CodeNotFound)
			wantCode(t, e.FinishWorkflow(ctx, ""), session.CodeInvalidArgument)
			res, err := e.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: "wf", Steps: changed})
			noErr(t, err)
			if len(res.Completed) != 0 {
				t.Fatalf("finished workflow still has steps: %+v", res.Completed)
			}
		})
	})
}
