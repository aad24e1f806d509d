package engine

import (
	"context"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// Served is the engine with every operation in the shape of its method in
// the table (api.Methods): the method's params in, its result out. The
// daemon and libcairn dispatch to it, so the few operations whose Go
// signature is friendlier to Go callers (a session id instead of
// api.SessionParams, a pointer or nothing instead of a result) are adapted
// here once. The operations already in that shape (Save, BeginRun, ...)
// come from the embedded *Engine.
type Served struct{ *Engine }

// ResumeSession is Engine.ResumeSession for api.ResumeSession.
func (s Served) ResumeSession(ctx context.Context, p api.ResumeSessionRequest) (api.ResumeSessionResult, error) {
	return deref(s.Engine.ResumeSessionWith(ctx, p))
}

// Summary is Engine.Summary for api.Summary.
func (s Served) Summary(ctx context.Context, p api.SessionParams) (session.Summary, error) {
	return s.Engine.Summary(ctx, p.SessionID)
}

// Artifacts is Engine.Artifacts for api.Artifacts.
func (s Served) Artifacts(ctx context.Context, p api.SessionParams) (api.ArtifactsResult, error) {
	return s.Engine.Artifacts(ctx, p.SessionID)
}

// Runs is Engine.Runs for api.Runs.
func (s Served) Runs(ctx context.Context, p api.SessionParams) (api.RunsResult, error) {
	return s.Engine.Runs(ctx, p.SessionID)
}

// ResumeRun is Engine.ResumeRun for api.ResumeRun.
func (s Served) ResumeRun(ctx context.Context, req api.ResumeRunRequest) (api.ResumeRunResult, error) {
	return deref(s.Engine.ResumeRun(ctx, req))
}

// CompleteStep is Engine.CompleteStep for api.CompleteStep.
func (s Served) CompleteStep(ctx context.Context, req api.CompleteStepRequest) (api.Empty, error) {
	return api.Empty{}, s.Engine.CompleteStep(ctx, req)
}

// FinishWorkflow is Engine.FinishWorkflow for api.FinishWorkflow.
func (s Served) FinishWorkflow(ctx context.Context, p api.WorkflowParams) (api.Empty, error) {
	return api.Empty{}, s.Engine.FinishWorkflow(ctx, p.WorkflowID)
}

// List is Engine.List for api.List.
func (s Served) List(ctx context.Context, _ api.Empty) (api.ListResult, error) {
	l, err := s.Engine.List(ctx)
	return api.ListResult{Sessions: l}, err
}

// Delete is Engine.Delete for api.Delete.
func (s Served) Delete(ctx context.Context, p api.SessionParams) (api.Empty, error) {
	return api.Empty{}, s.Engine.Delete(ctx, p.SessionID)
}

// Export is Engine.Export for api.Export.
func (s Served) Export(ctx context.Context, p api.SessionParams) (api.ExportResult, error) {
	env, err := s.Engine.Export(ctx, p.SessionID)
	return api.ExportResult{Envelope: env}, err
}

// Import is Engine.Import for api.Import.
func (s Served) Import(ctx context.Context, p api.ImportParams) (api.ImportResult, error) {
	return s.Engine.Import(ctx, p.Envelope)
}

func deref[R any](r *R, err error) (R, error) {
	if err != nil {
		var zero R
		return zero, err
	}
	return *r, nil
}

// Verify is Engine.Verify for api.Verify.
func (s Served) Verify(ctx context.Context, req session.VerifyRequest) (session.VerifyReport, error) {
	return deref(s.Engine.Verify(ctx, req))
}

// Repair is Engine.Repair for api.Repair.
func (s Served) Repair(ctx context.Context, req session.RepairRequest) (session.RepairReport, error) {
	return deref(s.Engine.Repair(ctx, req))
}
