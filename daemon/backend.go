package daemon

import (
	"context"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/session"
)

// Backend is what the daemon dispatches to: every method of the table
// (api.Methods) but those the daemon serves itself, each in the shape of
// its api.Spec, plus the engine's events and capabilities.
// engine.Served implements it; the interface exists so the server can be
// tested over an engine with a method replaced.
type Backend interface {
	Save(ctx context.Context, req api.SaveRequest) (api.SaveResult, error)
	ResumeSession(ctx context.Context, p api.ResumeSessionRequest) (api.ResumeSessionResult, error)
	Summary(ctx context.Context, p api.SessionParams) (session.Summary, error)
	Messages(ctx context.Context, req api.MessagesRequest) (api.MessagesResult, error)
	Artifact(ctx context.Context, req api.ArtifactRequest) (api.ArtifactResult, error)
	Artifacts(ctx context.Context, p api.SessionParams) (api.ArtifactsResult, error)
	ArtifactsByID(ctx context.Context, req api.ArtifactsByIDRequest) (api.ArtifactsByIDResult, error)
	Run(ctx context.Context, req api.RunRequest) (api.RunResult, error)
	Runs(ctx context.Context, p api.SessionParams) (api.RunsResult, error)
	RunEvents(ctx context.Context, req api.RunEventsRequest) (api.RunEventsResult, error)
	BeginRun(ctx context.Context, req api.BeginRunRequest) (api.BeginRunResult, error)
	Checkpoint(ctx context.Context, req api.CheckpointRequest) (api.CheckpointResult, error)
	CompleteRun(ctx context.Context, req api.CompleteRunRequest) (api.CompleteRunResult, error)
	ResumeRun(ctx context.Context, req api.ResumeRunRequest) (api.ResumeRunResult, error)
	BeginWorkflow(ctx context.Context, req api.BeginWorkflowRequest) (api.BeginWorkflowResult, error)
	CompleteStep(ctx context.Context, req api.CompleteStepRequest) (api.Empty, error)
	FinishWorkflow(ctx context.Context, p api.WorkflowParams) (api.Empty, error)
	List(ctx context.Context, _ api.Empty) (api.ListResult, error)
	Delete(ctx context.Context, p api.SessionParams) (api.Empty, error)
	Fork(ctx context.Context, req api.ForkRequest) (api.ForkResult, error)
	Export(ctx context.Context, p api.SessionParams) (api.ExportResult, error)
	Import(ctx context.Context, p api.ImportParams) (api.ImportResult, error)
	ExportFile(ctx context.Context, req api.ExportFileRequest) (api.ExportFileResult, error)
	ImportFile(ctx context.Context, req api.ImportFileRequest) (api.ImportResult, error)
	Verify(ctx context.Context, req session.VerifyRequest) (session.VerifyReport, error)
	Repair(ctx context.Context, req session.RepairRequest) (session.RepairReport, error)
	Handoff(ctx context.Context, req api.HandoffRequest) (api.HandoffResult, error)
	RuntimeCheck(ctx context.Context, req api.RuntimeCheckRequest) (api.RuntimeCheckResult, error)
	RuntimeRestart(ctx context.Context, req api.RuntimeRestartRequest) (api.RestartResult, error)
	Subscribe(fn func(api.Event)) (cancel func())
	Capabilities() session.Capabilities
}

var _ Backend = engine.Served{}
