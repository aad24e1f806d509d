package daemon

import (
	"context"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/session"
)

// Backend is what the daemon dispatches to. *engine.Engine implements it;
// the interface exists so the server can be tested and benchmarked over any
// engine configuration (an engine over session.MemStore, for instance).
type Backend interface {
	Save(ctx context.Context, req api.SaveRequest) (api.SaveResult, error)
	ResumeSession(ctx context.Context, sessionID string) (*api.ResumeSessionResult, error)
	BeginRun(ctx context.Context, req api.BeginRunRequest) (api.BeginRunResult, error)
	Checkpoint(ctx context.Context, req api.CheckpointRequest) (api.CheckpointResult, error)
	CompleteRun(ctx context.Context, req api.CompleteRunRequest) (api.CompleteRunResult, error)
	ResumeRun(ctx context.Context, req api.ResumeRunRequest) (*api.ResumeRunResult, error)
	BeginWorkflow(ctx context.Context, req api.BeginWorkflowRequest) (api.BeginWorkflowResult, error)
	CompleteStep(ctx context.Context, req api.CompleteStepRequest) error
	FinishWorkflow(ctx context.Context, workflowID string) error
	List(ctx context.Context) ([]session.Summary, error)
	Delete(ctx context.Context, sessionID string) error
	Fork(ctx context.Context, req api.ForkRequest) (api.ForkResult, error)
	Export(ctx context.Context, sessionID string) ([]byte, error)
	Import(ctx context.Context, envelope []byte) (api.ImportResult, error)
	Handoff(ctx context.Context, req api.HandoffRequest) (api.HandoffResult, error)
	RuntimeCheck(ctx context.Context, req api.RuntimeCheckRequest) (api.RuntimeCheckResult, error)
	RuntimeRestart(ctx context.Context, req api.RuntimeRestartRequest) (api.RestartResult, error)
	Subscribe(fn func(api.Event)) (cancel func())
	Capabilities() session.Capabilities
}

var _ Backend = (*engine.Engine)(nil)
